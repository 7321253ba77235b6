package openai

import (
	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// This file is the one table from an error kind to its HTTP status and its
// OpenAI error body, used before the 200 (as the response body) and after it
// (as the in-stream error event of chat completions and completions).

// ErrorKind classifies an API error.
type ErrorKind uint8

const (
	KindInvalidRequest       ErrorKind = iota // 400: bad parameter or body
	KindAuthentication                        // 401: missing or wrong API key
	KindPermission                            // 403: key not allowed to do this
	KindNotFound                              // 404: unknown model or route
	KindTooLarge                              // 413: body over the limit
	KindUnsupportedMediaType                  // 415: body is not application/json
	KindRateLimit                             // 429: the client's rate limit
	KindOverloaded                            // 429: the engine's queue is full
	KindServer                                // 500: engine or server failure
	KindUnavailable                           // 503: shutting down, engine stopped
	numKinds
)

// kindInfo is one row of the error table.
type kindInfo struct {
	status int
	typ    string // OpenAI "type"
	code   string // default "code"; empty renders null
}

// errorTable maps each ErrorKind to its status, type and default code. The
// Stainless SDKs pick their typed error from the status alone (400, 401, 403,
// 404, 409, 422, 429, >=500) and retry on 429 and 5xx; type and code are
// for humans and for clients that switch on code (context_length_exceeded).
var errorTable = [numKinds]kindInfo{
	KindInvalidRequest:       {400, "invalid_request_error", ""},
	KindAuthentication:       {401, "authentication_error", "invalid_api_key"},
	KindPermission:           {403, "permission_error", ""},
	KindNotFound:             {404, "not_found_error", "model_not_found"},
	KindTooLarge:             {413, "invalid_request_error", "request_too_large"},
	KindUnsupportedMediaType: {415, "invalid_request_error", "unsupported_media_type"},
	KindRateLimit:            {429, "rate_limit_error", "rate_limit_exceeded"},
	KindOverloaded:           {429, "rate_limit_error", "engine_overloaded"},
	KindServer:               {500, "server_error", ""},
	KindUnavailable:          {503, "server_error", "service_unavailable"},
}

// Status returns the HTTP status of errors of kind k.
func (k ErrorKind) Status() int { return k.info().status }

// Type returns the OpenAI error "type" of kind k.
func (k ErrorKind) Type() string { return k.info().typ }

func (k ErrorKind) info() kindInfo {
	if k >= numKinds {
		return errorTable[KindServer]
	}
	return errorTable[k]
}

// Codes used in ParamError and APIError. OpenAI's codes where it has one.
const (
	CodeInvalidJSON            = "invalid_json"
	CodeInvalidType            = "invalid_type"
	CodeInvalidValue           = "invalid_value"
	CodeMissing                = "missing_required_parameter"
	CodeUnsupported            = "unsupported_parameter"
	CodeUnsupportedValue       = "unsupported_value"
	CodeUnsupportedContent     = "unsupported_content_type"
	CodeTopLogprobsNeedsLogprb = "top_logprobs_requires_logprobs"
	CodeStreamOptionsNoStream  = "stream_options_requires_stream"
	CodeUnknownTool            = "tool_choice_unknown_function"
	CodeContextLength          = "context_length_exceeded"
)

// APIError is any error the OpenAI dialect reports to a client: its kind
// picks the status and type; Code overrides the kind's default code.
type APIError struct {
	Kind    ErrorKind
	Param   string // empty renders null
	Code    string // empty renders the kind's default code (or null)
	Message string
}

func (e *APIError) Error() string { return "openai: " + e.Message }

// Status returns the HTTP status.
func (e *APIError) Status() int { return e.Kind.Status() }

func (e *APIError) code() string {
	if e.Code != "" {
		return e.Code
	}
	return e.Kind.info().code
}

// AppendBody appends the error's JSON body:
// {"error":{"message":...,"type":...,"param":...,"code":...}}.
func (e *APIError) AppendBody(dst []byte) []byte {
	return AppendErrorBody(dst, e.Status(), e.Kind.Type(), e.code(), e.Param, e.Message)
}

// AppendStreamError appends the error as the in-stream event of a chat
// completions or completions stream after the 200, then "data: [DONE]" and,
// for chunked framing, the last chunk: each SSE event is its own frame.
func (e *APIError) AppendStreamError(dst []byte, f codegen.Framing) []byte {
	dst, mark := codegen.BeginFrame(dst, f)
	dst = append(dst, "data: "...)
	dst = e.AppendBody(dst)
	dst = append(dst, "\n\n"...)
	dst = codegen.EndFrame(dst, f, mark)
	return appendDone(dst, f)
}

// appendDone appends "data: [DONE]" as its own frame and ends the body.
func appendDone(dst []byte, f codegen.Framing) []byte {
	dst, mark := codegen.BeginFrame(dst, f)
	dst = append(dst, "data: [DONE]\n\n"...)
	dst = codegen.EndFrame(dst, f, mark)
	return codegen.AppendLastChunk(dst, f)
}

// AppendErrorBody appends an OpenAI error body. code and param render as null
// when empty; typ defaults to the type of status's row in the table. message
// is escaped, so it may hold client text.
func AppendErrorBody(dst []byte, status int, typ, code, param, message string) []byte {
	if typ == "" {
		typ = typeForStatus(status)
	}
	dst = append(dst, `{"error":{"message":`...)
	dst = codegen.AppendJSONStringS(dst, message)
	dst = append(dst, `,"type":`...)
	dst = codegen.AppendJSONStringS(dst, typ)
	dst = append(dst, `,"param":`...)
	dst = appendStringOrNull(dst, param)
	dst = append(dst, `,"code":`...)
	dst = appendStringOrNull(dst, code)
	return append(dst, "}}"...)
}

func typeForStatus(status int) string {
	for _, r := range errorTable {
		if r.status == status {
			return r.typ
		}
	}
	if status >= 500 {
		return "server_error"
	}
	return "invalid_request_error"
}

func appendStringOrNull(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return codegen.AppendJSONStringS(dst, s)
}

// ParamError is a request that failed decoding or validation: always a 400
// invalid_request_error naming the parameter at fault (JSON path, e.g.
// "messages[0].content[1]") and a stable code.
type ParamError struct {
	Param   string
	Code    string
	Message string
}

func (e *ParamError) Error() string {
	if e.Param == "" {
		return "openai: " + e.Message
	}
	return "openai: " + e.Param + ": " + e.Message
}

// Status is always 400.
func (e *ParamError) Status() int { return 400 }

// API returns the error as an APIError.
func (e *ParamError) API() APIError {
	return APIError{Kind: KindInvalidRequest, Param: e.Param, Code: e.Code, Message: e.Message}
}

// AppendBody appends the 400 body.
func (e *ParamError) AppendBody(dst []byte) []byte {
	return AppendErrorBody(dst, 400, "invalid_request_error", e.Code, e.Param, e.Message)
}

// FromEngineError maps an engine error to the API error to send. promptParam
// names the prompt parameter of the endpoint ("messages" for chat, "prompt"
// for completions), blamed for context-length errors.
func FromEngineError(e *engine.Error, promptParam string) APIError {
	switch e.Kind {
	case engine.KindInvalid:
		return APIError{Kind: KindInvalidRequest, Param: e.Param, Message: e.Message}
	case engine.KindContextLength:
		p := e.Param
		if p == "" {
			p = promptParam
		}
		return APIError{Kind: KindInvalidRequest, Param: p, Code: CodeContextLength, Message: e.Message}
	case engine.KindOverloaded:
		return APIError{Kind: KindOverloaded, Message: orDefault(e.Message, "The engine is overloaded; retry later.")}
	case engine.KindClosed:
		return APIError{Kind: KindUnavailable, Message: orDefault(e.Message, "The engine is shutting down.")}
	case engine.KindAborted:
		return APIError{Kind: KindUnavailable, Code: "request_aborted", Message: orDefault(e.Message, "The request was aborted.")}
	}
	// Internal: the message may carry engine internals; keep it generic.
	return APIError{Kind: KindServer, Message: "The engine failed to complete the request."}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
