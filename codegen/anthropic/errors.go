package anthropic

import (
	"strconv"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// Kind classifies an Anthropic API error. Each kind has one HTTP status and
// one error type string (the table kinds below), used both for the JSON body
// before the 200 and for the in-stream `event: error` after it.
type Kind uint8

const (
	KindInvalidRequest  Kind = iota // 400 invalid_request_error
	KindAuthentication              // 401 authentication_error
	KindPermission                  // 403 permission_error
	KindNotFound                    // 404 not_found_error
	KindRequestTooLarge             // 413 request_too_large
	KindRateLimit                   // 429 rate_limit_error
	KindAPI                         // 500 api_error
	KindUnavailable                 // 503 api_error (engine stopped, shutting down)
	KindOverloaded                  // 529 overloaded_error
)

// kinds is the one table from Kind to status and error type. The types are
// the ones Anthropic documents; 503 has no type of its own, so it reuses
// api_error (the SDKs key their typed errors on the status).
var kinds = [...]struct {
	status int
	typ    string
}{
	KindInvalidRequest:  {400, "invalid_request_error"},
	KindAuthentication:  {401, "authentication_error"},
	KindPermission:      {403, "permission_error"},
	KindNotFound:        {404, "not_found_error"},
	KindRequestTooLarge: {413, "request_too_large"},
	KindRateLimit:       {429, "rate_limit_error"},
	KindAPI:             {500, "api_error"},
	KindUnavailable:     {503, "api_error"},
	KindOverloaded:      {529, "overloaded_error"},
}

// Status is the HTTP status of k.
func (k Kind) Status() int { return kinds[k].status }

// Type is the Anthropic error type string of k.
func (k Kind) Type() string { return kinds[k].typ }

// TypeForStatus is the error type of the table's row for an HTTP status:
// api_error for other 5xx, invalid_request_error for other statuses. For
// errors made outside this package (netio's refusals, a failed session).
func TypeForStatus(status int) string {
	for k := range kinds {
		if kinds[k].status == status {
			return kinds[k].typ
		}
	}
	if status >= 500 {
		return KindAPI.Type()
	}
	return KindInvalidRequest.Type()
}

// Error is an Anthropic API error. Param names the request field at fault
// in Anthropic's dotted form (messages.0.content.1), when one is; Message
// already starts with it.
type Error struct {
	Kind    Kind
	Param   string
	Message string
}

func (e *Error) Error() string { return "anthropic: " + e.Message }

// Status is the HTTP status to answer with.
func (e *Error) Status() int { return e.Kind.Status() }

// AppendBody appends the error's JSON body,
// {"type":"error","error":{"type":…,"message":…}}.
func (e *Error) AppendBody(dst []byte) []byte {
	return AppendErrorBody(dst, e.Kind.Type(), e.Message)
}

// AppendErrorBody appends {"type":"error","error":{"type":typ,"message":message}}.
// The same object is the data of an in-stream `event: error`.
func AppendErrorBody(dst []byte, typ, message string) []byte {
	dst = append(dst, `{"type":"error","error":{"type":`...)
	dst = codegen.AppendJSONStringS(dst, typ)
	dst = append(dst, `,"message":`...)
	dst = codegen.AppendJSONStringS(dst, message)
	return append(dst, "}}"...)
}

// invalid is a 400 invalid_request_error naming param, in Anthropic's
// "param: message" form.
func invalid(param, msg string) *Error {
	return &Error{Kind: KindInvalidRequest, Param: param, Message: param + ": " + msg}
}

// PromptTooLong is the 400 Anthropic answers when the prompt does not fit:
// "prompt is too long: N tokens > M maximum".
func PromptTooLong(promptTokens, maxTokens int) *Error {
	return &Error{Kind: KindInvalidRequest, Message: "prompt is too long: " +
		strconv.Itoa(promptTokens) + " tokens > " + strconv.Itoa(maxTokens) + " maximum"}
}

// FromEngine maps an engine error onto the table: invalid and context
// length → 400 invalid_request_error, overloaded → 529 overloaded_error,
// closed → 503, aborted and internal → 500 api_error. The engine's message
// is kept (engine.Error carries no token counts, so a context-length error
// reads "prompt is too long: " + the engine's words; use PromptTooLong when
// the counts are known).
func FromEngine(err *engine.Error) *Error {
	e := &Error{Kind: engineKind(err.Kind), Message: err.Message}
	switch err.Kind {
	case engine.KindInvalid:
		if err.Param != "" {
			e.Param = err.Param
			e.Message = err.Param + ": " + err.Message
		}
	case engine.KindContextLength:
		e.Message = "prompt is too long: " + err.Message
	case engine.KindOverloaded:
		if e.Message == "" {
			e.Message = "Overloaded"
		}
	case engine.KindClosed:
		if e.Message == "" {
			e.Message = "the engine is shutting down"
		}
	case engine.KindAborted:
		if e.Message == "" {
			e.Message = "the request was aborted"
		}
	default:
		if e.Message == "" {
			e.Message = "internal server error"
		}
	}
	return e
}

// engineKind maps an engine error kind onto the table: FromEngine's kinds,
// and alone the stream's error event's, which must not allocate.
func engineKind(k engine.ErrorKind) Kind {
	switch k {
	case engine.KindInvalid, engine.KindContextLength:
		return KindInvalidRequest
	case engine.KindOverloaded:
		return KindOverloaded
	case engine.KindClosed:
		return KindUnavailable
	}
	return KindAPI
}
