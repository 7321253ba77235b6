package llama

import (
	"strconv"
	"strings"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/capi"
	"github.com/vajra-go/vajra/engine/text"
	"github.com/vajra-go/vajra/engine/text/grammar"
)

// prepared is what Prepare leaves for Start in Request.Prepared.
type prepared struct {
	e         *Engine
	prompt    []int32
	maxTokens int
	grammar   string
	parse     text.Options
	forced    *forcedTool // tool_choice required or named, else nil
}

// Prepare renders the prompt (the chat template for Messages), tokenizes
// it with the model's tokenizer and checks it against the context; see
// engine.Engine. It runs on the caller's goroutine, off the scheduler.
// After Close it fails with KindClosed.
func (e *Engine) Prepare(req *engine.Request) error {
	if !e.gate.enter() {
		return errClosed()
	}
	defer e.gate.leave()
	if err := e.validate(req); err != nil {
		return err
	}
	if len(req.Audio.PCM) > 0 {
		return invalid("audio", "this engine (llama.cpp, a text model) does not transcribe audio; "+
			"serve transcription with an engine that does (the embedded simulated engine does)")
	}
	p := &prepared{e: e}
	var err error
	thinkingOff := false
	switch {
	case len(req.Messages) > 0:
		// A tool-use template (tokenizer.chat_template.tool_use) renders
		// requests that carry tools.
		tools := req.Tools
		if req.ToolChoice.Mode == engine.ToolChoiceNone {
			tools = nil
		}
		s, off, rerr := e.template(tools).RenderRequest(req)
		if rerr != nil {
			return rerr
		}
		thinkingOff = off
		// The template writes the BOS token itself when the model wants one.
		add := e.addBOS && (e.bos == "" || !strings.HasPrefix(s, e.bos))
		p.prompt, err = e.model.Tokenize(nil, s, add, true)
	case req.Prompt != "":
		p.prompt, err = e.model.Tokenize(nil, req.Prompt, true, true)
	case len(req.PromptTokens) > 0:
		for i, id := range req.PromptTokens {
			if id < 0 || int(id) >= e.vocabN {
				return invalid("prompt", "prompt token "+strconv.Itoa(i)+" is "+strconv.Itoa(int(id))+
					", outside the vocabulary (0.."+strconv.Itoa(e.vocabN-1)+")")
			}
		}
		// llama_token is an int32 too: the engine reads the caller's ids
		// and never writes them.
		p.prompt = req.PromptTokens
	default:
		return invalid("prompt", "the prompt is empty")
	}
	if err != nil {
		return &engine.Error{Kind: engine.KindInternal, Message: "tokenization failed: " + err.Error()}
	}
	if len(p.prompt) == 0 {
		return invalid("prompt", "the prompt is empty")
	}
	if len(req.PromptTokens) == 0 {
		req.PromptTokens = p.prompt
	}
	mt, cerr := engine.CheckContext(len(p.prompt), e.cfg.MaxModelLen, req.Sampling.MaxTokens)
	if cerr != nil {
		return cerr
	}
	if cerr := engine.CheckMinTokens(req.Sampling.MinTokens, mt); cerr != nil {
		return cerr
	}
	p.maxTokens = mt
	fg, named, forced, ferr := grammar.ForToolChoice(req)
	if ferr != nil {
		return ferr
	}
	if forced {
		p.forced = &forcedTool{name: named}
	}
	switch req.ResponseFormat.Type {
	case engine.FormatJSONObject:
		p.grammar = grammar.JSONObject
	case engine.FormatJSONSchema:
		g, gerr := grammar.FromJSONSchema(req.ResponseFormat.Schema)
		if gerr != nil {
			return invalid("response_format", "the JSON schema cannot be enforced: "+gerr.Error())
		}
		p.grammar = g
	}
	if forced {
		p.grammar = fg // a forced call's grammar wins over response_format
	}
	if p.grammar != "" {
		// Parse it once here, off the scheduler, so that a grammar
		// llama.cpp refuses is a 400 and not a failed stream.
		s, gerr := capi.NewSampler(e.model, capi.SamplerParams{Grammar: p.grammar, Temperature: 0})
		if gerr != nil {
			return invalid("response_format", "llama.cpp refused the grammar made from the schema")
		}
		s.Free()
	}
	p.parse = text.Options{
		Stop:         req.Sampling.Stop,
		IncludeStop:  req.Sampling.IncludeStopStr,
		MinTokens:    req.Sampling.MinTokens,
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

func (e *Engine) validate(req *engine.Request) error {
	if err := engine.CheckRequest(req, min(MaxN, e.cfg.MaxNumSeqs), MaxStopStrings); err != nil {
		return err
	}
	sp := &req.Sampling
	for _, b := range sp.LogitBias {
		if b.TokenID < 0 || b.TokenID >= e.vocabN {
			return invalid("logit_bias", "logit_bias names token "+strconv.Itoa(b.TokenID)+", outside the vocabulary (0.."+strconv.Itoa(e.vocabN-1)+")")
		}
	}
	for _, id := range sp.StopTokenIDs {
		if id < 0 || id >= e.vocabN {
			return invalid("stop_token_ids", "stop token id "+strconv.Itoa(id)+" is outside the vocabulary (0.."+strconv.Itoa(e.vocabN-1)+")")
		}
	}
	return nil
}

func invalid(param, msg string) error {
	return &engine.Error{Kind: engine.KindInvalid, Param: param, Message: msg}
}
