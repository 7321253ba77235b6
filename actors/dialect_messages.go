package actors

import (
	"errors"

	"github.com/vajra-go/vajra/codegen/anthropic"
	"github.com/vajra-go/vajra/engine"
)

// messagesDialect is Anthropic's POST /v1/messages. n is always 1; errors
// take Anthropic's shape, {"type":"error","error":{"type","message"}}, with
// the status from codegen/anthropic's table (overload is 529).
type messagesDialect struct {
	req   anthropic.MessagesRequest
	id    string
	idBuf idBuf
	fmt   anthropic.StreamFormatter
}

func (d *messagesDialect) decode(ss *session) *apiError {
	if ae := decodeAnthropic(ss, &d.req); ae != nil {
		return ae
	}
	if e := d.req.ToEngine(&ss.ereq); e != nil {
		return anthropicError(e)
	}
	d.id = d.idBuf.newID("msg_")
	return nil
}

// decodeAnthropic decodes a Messages (or count_tokens) body and reports its
// unknown fields.
func decodeAnthropic(ss *session, r *anthropic.MessagesRequest) *apiError {
	if err := anthropic.DecodeMessagesRequest(ss.req.Body, r); err != nil {
		var e *anthropic.Error
		if errors.As(err, &e) { // a body that is not UTF-8 text: says where
			return anthropicError(e)
		}
		// The lexer's text quotes the client's bytes: keep it out.
		return &apiError{Status: 400, Type: anthropic.KindInvalidRequest.Type(),
			Message: "The request body is not valid JSON, or a field has the wrong JSON type."}
	}
	ss.owner.reportUnknown(ss.req.Endpoint, r.Unknown)
	return nil
}

func (d *messagesDialect) stream(ss *session) engine.Formatter {
	si := &ss.ereq.StreamInfo
	si.Dialect, si.ID = engine.DialectMessages, d.id
	d.fmt.Reset(anthropic.StreamConfig{ID: si.ID, Model: si.Model, Framing: ss.framing, Ping: true})
	return &d.fmt
}

func (d *messagesDialect) appendResponse(dst []byte, ss *session, res *engine.Result) []byte {
	return anthropic.AppendMessage(dst, d.id, ss.ereq.Model, res)
}

func (d *messagesDialect) appendError(dst []byte, e *apiError) []byte {
	return appendAnthropicError(dst, e)
}

func (d *messagesDialect) appendStreamError(dst []byte, ss *session, e *engine.Error) []byte {
	return anthropic.AppendStreamError(dst, ss.framing, e)
}

func (d *messagesDialect) engineError(e *engine.Error, _ *engine.Request) *apiError {
	return anthropicError(anthropic.FromEngine(e))
}

func (d *messagesDialect) streamContentType() string { return "text/event-stream" }

// anthropicError turns the codegen error into the session's error.
func anthropicError(e *anthropic.Error) *apiError {
	return &apiError{Status: e.Status(), Type: e.Kind.Type(), Param: e.Param, Message: e.Message}
}

// appendAnthropicError renders any session error in Anthropic's shape. The
// type comes from Anthropic's table by status, since errors the session
// makes itself (unknown model, a failed session) carry OpenAI's words.
func appendAnthropicError(dst []byte, e *apiError) []byte {
	return anthropic.AppendErrorBody(dst, anthropic.TypeForStatus(e.Status), e.Message)
}
