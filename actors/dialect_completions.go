package actors

import (
	"time"

	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
)

// completionsDialect is POST /v1/completions (the legacy text API). A
// batch of prompts runs as one engine session per prompt
// (dialect_completions_batch.go).
type completionsDialect struct {
	req     openai.CompletionRequest
	id      string
	idBuf   idBuf
	created int64
	fmt     openai.CompletionFormatter
	batch   *completionsBatch
}

func (d *completionsDialect) decode(ss *session) *apiError {
	if err := openai.DecodeCompletionRequest(ss.req.Body, &d.req); err != nil {
		return openaiDecodeError(err)
	}
	ss.owner.reportUnknown(ss.req.Endpoint, d.req.Unknown)
	d.id = responseID(&d.idBuf, "cmpl-", ss.req, d.req.RequestID)
	d.created = time.Now().Unix()
	if d.req.Prompt.Count() > 1 {
		return d.startBatch(ss)
	}
	if pe := d.req.ToEngine(&ss.ereq); pe != nil {
		return openaiError(pe.API())
	}
	return nil
}

// echoPrompt is the prompt text echo repeats: as sent, or the token-id
// prompt detokenized.
func (d *completionsDialect) echoPrompt(ss *session) string {
	if !d.req.Echo {
		return ""
	}
	return echoText(ss.owner.cfg.Engine, &d.req.Prompt)
}

// echoText is the text of a one-prompt request p that echo repeats: the
// prompt's text as sent, or its token ids, as sent, detokenized.
func echoText(eng engine.Engine, p *openai.Prompt) string {
	if len(p.Texts) > 0 {
		return p.Texts[0]
	}
	if len(p.Tokens) > 0 {
		return eng.Detokenize(p.Tokens[0])
	}
	return ""
}

func (d *completionsDialect) stream(ss *session) engine.Formatter {
	o := d.req.CompletionStreamOptions()
	o.Framing = ss.framing
	o.EchoPrompt = d.echoPrompt(ss)
	si := &ss.ereq.StreamInfo
	si.Dialect, si.ID, si.Created = engine.DialectCompletions, d.id, d.created
	si.IncludeUsage, si.ContinuousUsage = o.IncludeUsage, o.IncludeUsage && o.ContinuousUsage
	d.fmt.Reset(si.ID, si.Model, si.Created, o)
	return &d.fmt
}

func (d *completionsDialect) appendResponse(dst []byte, ss *session, res *engine.Result) []byte {
	m := openai.CompletionMeta{ID: d.id, Model: ss.ereq.Model, Created: d.created,
		Logprobs: d.req.Logprobs.Defined, Echo: d.req.Echo, EchoPrompt: d.echoPrompt(ss), TokenIDs: d.req.ReturnTokenIDs}
	return openai.AppendCompletion(dst, &m, res)
}

func (d *completionsDialect) appendError(dst []byte, e *apiError) []byte {
	return appendOpenAIError(dst, e)
}

func (d *completionsDialect) appendStreamError(dst []byte, ss *session, e *engine.Error) []byte {
	ae := openai.FromEngineError(e, "prompt")
	return ae.AppendStreamError(dst, ss.framing)
}

func (d *completionsDialect) engineError(e *engine.Error, _ *engine.Request) *apiError {
	return openaiError(openai.FromEngineError(engineParams(e, "prompt", "max_tokens"), "prompt"))
}

func (d *completionsDialect) streamContentType() string { return "text/event-stream" }
