package actors

import (
	"github.com/vajra-go/vajra/codegen/anthropic"
	"github.com/vajra-go/vajra/engine"
)

// countTokensDialect is POST /v1/messages/count_tokens: the prompt is
// validated and tokenized exactly as /v1/messages would (Engine.Prepare),
// and nothing is generated. It answers from decode.
type countTokensDialect struct {
	req  anthropic.CountTokensRequest
	body []byte
}

func (d *countTokensDialect) decode(ss *session) *apiError {
	if ae := decodeAnthropic(ss, &d.req.MessagesRequest); ae != nil {
		return ae
	}
	if e := d.req.ToEngine(&ss.ereq); e != nil {
		return anthropicError(e)
	}
	if !ss.owner.servesModel(ss.ereq.Model) {
		return modelNotFound(ss.ereq.Model)
	}
	if err := ss.owner.cfg.Engine.Prepare(&ss.ereq); err != nil {
		return d.engineError(engine.AsError(err), &ss.ereq)
	}
	d.body = anthropic.AppendCountTokens(d.body[:0], len(ss.ereq.PromptTokens))
	ss.finish(200, d.body)
	return errPending
}

func (d *countTokensDialect) stream(*session) engine.Formatter { return nil }

func (d *countTokensDialect) appendStreamError(dst []byte, _ *session, _ *engine.Error) []byte {
	return dst // never streams
}

func (d *countTokensDialect) appendResponse(dst []byte, _ *session, _ *engine.Result) []byte {
	return dst
}

func (d *countTokensDialect) appendError(dst []byte, e *apiError) []byte {
	return appendAnthropicError(dst, e)
}

func (d *countTokensDialect) engineError(e *engine.Error, _ *engine.Request) *apiError {
	return anthropicError(anthropic.FromEngine(e))
}

func (d *countTokensDialect) streamContentType() string { return "text/event-stream" }
