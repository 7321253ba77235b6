package remote

import (
	"strconv"
	"strings"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/text"
	"github.com/vajra-go/vajra/engine/text/grammar"
)

// prepared is what Prepare leaves for Start in Request.Prepared.
type prepared struct {
	e          *Engine
	m          *model
	prompt     []int32
	maxTokens  int
	constraint Constraint
	forced     bool
	forcedName string
	parse      text.Options
}

// Prepare renders the prompt (the chat template for Messages), tokenizes
// it and checks it against the workers' context length, and turns tools,
// tool_choice and response_format into the worker's constraint; see
// engine.Engine. It fails with KindClosed while no worker has answered.
func (e *Engine) Prepare(req *engine.Request) error {
	m := e.model.Load()
	if m == nil || e.closed.Load() {
		return e.unavailable()
	}
	if err := engine.CheckRequest(req, MaxN, MaxStopStrings); err != nil {
		return err
	}
	if len(req.Audio.PCM) > 0 {
		return invalid("audio", "this engine (remote text workers) does not transcribe audio")
	}
	sp := &req.Sampling
	for _, b := range sp.LogitBias {
		if b.TokenID < 0 || b.TokenID >= m.vocab {
			return invalid("logit_bias", "logit_bias names token "+strconv.Itoa(b.TokenID)+", outside the vocabulary (0.."+strconv.Itoa(m.vocab-1)+")")
		}
	}
	for _, id := range sp.StopTokenIDs {
		if id < 0 || id >= m.vocab {
			return invalid("stop_token_ids", "stop token id "+strconv.Itoa(id)+" is outside the vocabulary (0.."+strconv.Itoa(m.vocab-1)+")")
		}
	}
	if req.PromptLogprobs != 0 && !m.promptLogprobs {
		return invalid("logprobs", "this engine's workers do not return prompt logprobs (echo with logprobs)")
	}
	p := &prepared{e: e, m: m}
	thinkingOff := false
	var err error
	switch {
	case len(req.Messages) > 0:
		tmpl := m.tmpl
		if m.toolTmpl != nil && len(req.Tools) > 0 && req.ToolChoice.Mode != engine.ToolChoiceNone {
			tmpl = m.toolTmpl
		}
		s, off, rerr := tmpl.RenderRequest(req)
		if rerr != nil {
			return rerr
		}
		thinkingOff = off
		// The template writes the BOS token itself when the model wants one.
		add := m.tok.AddBOS() && (m.bosText == "" || !strings.HasPrefix(s, m.bosText))
		p.prompt, err = m.encode(nil, s, add)
	case req.Prompt != "":
		p.prompt, err = m.encode(nil, req.Prompt, m.tok.AddBOS())
	case len(req.PromptTokens) > 0:
		for i, id := range req.PromptTokens {
			if id < 0 || int(id) >= m.vocab {
				return invalid("prompt", "prompt token "+strconv.Itoa(i)+" is "+strconv.Itoa(int(id))+
					", outside the vocabulary (0.."+strconv.Itoa(m.vocab-1)+")")
			}
		}
		p.prompt = req.PromptTokens
	default:
		return invalid("prompt", "the prompt is empty")
	}
	if err != nil {
		return &engine.Error{Kind: engine.KindClosed, Message: "the engine worker could not tokenize the prompt (" + err.Error() + "); retry later"}
	}
	if len(p.prompt) == 0 {
		return invalid("prompt", "the prompt is empty")
	}
	if len(req.PromptTokens) == 0 {
		req.PromptTokens = p.prompt
	}
	mt, cerr := engine.CheckContext(len(p.prompt), m.maxLen, sp.MaxTokens)
	if cerr != nil {
		return cerr
	}
	if cerr := engine.CheckMinTokens(req.Sampling.MinTokens, mt); cerr != nil {
		return cerr
	}
	p.maxTokens = mt
	g, named, forced, ferr := grammar.ForToolChoice(req)
	if ferr != nil {
		return ferr
	}
	switch req.ResponseFormat.Type {
	case engine.FormatJSONObject:
		p.constraint = Constraint{Kind: ConstraintJSONObject, EBNF: jsonObjectEBNF}
	case engine.FormatJSONSchema:
		// llama-server converts the schema itself, with the same converter
		// as this, so that a schema it cannot enforce is a 400 here and not
		// a failed stream after the 200; vLLM and SGLang get the grammar.
		gbnf, gerr := grammar.FromJSONSchema(req.ResponseFormat.Schema)
		if gerr != nil {
			return invalid("response_format", "the JSON schema cannot be enforced: "+gerr.Error())
		}
		p.constraint = Constraint{Kind: ConstraintJSONSchema, Value: string(req.ResponseFormat.Schema), EBNF: grammar.EBNF(gbnf)}
	}
	if forced {
		// A forced call's grammar wins over response_format.
		p.constraint = Constraint{Kind: ConstraintGrammar, Value: g, EBNF: grammar.EBNF(g)}
		p.forced, p.forcedName = true, named
	}
	p.parse = text.Options{
		Stop:         sp.Stop,
		IncludeStop:  sp.IncludeStopStr,
		MinTokens:    sp.MinTokens,
		Reasoning:    e.cfg.ReasoningParser,
		ReasoningOff: thinkingOff,
		Tools:        e.cfg.ToolCallParser,
		ToolsOff:     len(req.Tools) == 0 || req.ToolChoice.Mode == engine.ToolChoiceNone,
		Stream:       req.Stream, // tool-call arguments stream as they come
	}
	if len(req.Messages) == 0 {
		// Completions: the prompt is raw text, the output is too.
		p.parse.Reasoning, p.parse.Tools = "", ""
	}
	req.Prepared = p
	return nil
}

// jsonObjectEBNF enforces response_format json_object: any JSON object.
var jsonObjectEBNF = func() string {
	g, err := grammar.FromJSONSchema([]byte(`{"type":"object"}`))
	if err != nil {
		panic(err)
	}
	return grammar.EBNF(g)
}()

func (e *Engine) unavailable() error {
	if e.closed.Load() {
		return &engine.Error{Kind: engine.KindClosed, Message: "the engine is shut down"}
	}
	return &engine.Error{Kind: engine.KindClosed, Message: "no engine worker is available (" +
		strconv.Itoa(len(e.list())) + " configured, none healthy); retry later"}
}

func invalid(param, msg string) error {
	return &engine.Error{Kind: engine.KindInvalid, Param: param, Message: msg}
}
