package llama

import (
	"errors"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/capi"
	"github.com/vajra-go/vajra/engine/pipeline"
	"github.com/vajra-go/vajra/engine/text"
	"github.com/vajra-go/vajra/engine/text/chattemplate"
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
// it with the model's tokenizer and checks it against the context
// (pipeline.Prepare); see engine.Engine. It runs on the caller's
// goroutine, off the scheduler. After Close it fails with KindClosed.
func (e *Engine) Prepare(req *engine.Request) error {
	if !e.gate.enter() {
		return errClosed()
	}
	defer e.gate.leave()
	if len(req.Audio.PCM) > 0 {
		if err := engine.CheckRequest(req, min(MaxN, e.cfg.MaxNumSeqs), MaxStopStrings); err != nil {
			return err
		}
		return invalid("audio", "this engine (llama.cpp, a text model) does not transcribe audio; "+
			"serve transcription with an engine that does (the embedded simulated engine does)")
	}
	if err := engine.CheckCapabilities(req, e.Lacks(), "in-process llama.cpp models"); err != nil {
		return err
	}
	if err := engine.CheckRank(req, 1); err != nil {
		return err
	}
	var pp pipeline.Prepared
	if err := pipeline.Prepare(prepModel{e}, req, pipeline.Limits{MaxN: min(MaxN, e.cfg.MaxNumSeqs), MaxStop: MaxStopStrings,
		ReasoningParser: e.cfg.ReasoningParser, ToolCallParser: e.cfg.ToolCallParser}, &pp); err != nil {
		return err
	}
	p := &prepared{e: e, prompt: pp.Prompt, maxTokens: pp.MaxTokens, grammar: pp.Grammar, parse: pp.Parse}
	if pp.Forced {
		p.forced = &forcedTool{name: pp.ForcedName}
	}
	req.Prepared = p
	return nil
}

// prepModel is the engine's model as pipeline.Prepare reads it.
type prepModel struct{ e *Engine }

func (m prepModel) VocabSize() int  { return m.e.vocabN }
func (m prepModel) MaxLen() int     { return m.e.cfg.MaxModelLen }
func (m prepModel) AddBOS() bool    { return m.e.addBOS }
func (m prepModel) BOSText() string { return m.e.bos }

func (m prepModel) Template(tools bool) *chattemplate.Template {
	if tools && m.e.toolTmpl != nil {
		return m.e.toolTmpl
	}
	return m.e.tmpl
}

// Tokenize parses special tokens' text (the template writes them).
func (m prepModel) Tokenize(dst []int32, s string, bos bool) ([]int32, error) {
	return m.e.model.Tokenize(dst, s, bos, true)
}

// Lacks declares what llama.cpp's sampler here does not do
// (engine.Lacker): vLLM's bad words, allowed token ids and priority
// scheduling.
func (e *Engine) Lacks() engine.Capability {
	return engine.CapBadWords | engine.CapAllowedTokenIDs | engine.CapPriority | engine.CapCacheSalt | engine.CapExtraArgs
}

var _ engine.Lacker = (*Engine)(nil)

// CheckGrammar parses the grammar once, off the scheduler, so that a
// grammar llama.cpp refuses is a 400 and not a failed stream.
func (m prepModel) CheckGrammar(g string) error {
	s, err := capi.NewSampler(m.e.model, capi.SamplerParams{Grammar: g, Temperature: 0})
	if err != nil {
		return errors.New("llama.cpp refused the grammar")
	}
	s.Free()
	return nil
}

func invalid(param, msg string) error {
	return &engine.Error{Kind: engine.KindInvalid, Param: param, Message: msg}
}

// ParsesOutput implements engine.OutputParser.
func (e *Engine) ParsesOutput() bool { return e.cfg.HasParsers() }
