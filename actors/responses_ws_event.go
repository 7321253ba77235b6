package actors

import (
	"github.com/mailru/easyjson/jlexer"

	"github.com/vajra-go/vajra/codegen"
)

// The client events of the Responses API over WebSocket. A response.create
// carries the POST /v1/responses body's fields flat beside its "type"
// (openai-go's ResponsesClientEventResponseCreateParam), plus the
// transport's own: stream_id (the lane, echoed on every event of the
// response), generate (false prepares state without output). stream is
// implicit and background is not served over WebSocket (OpenAI's
// "WebSocket events" reference says both).

// Client event types.
const (
	wsEventCreate = "response.create"
	wsEventSteer  = "response.steer"
)

// maxStreamID is the longest stream_id (openai-go's validResponseStreamID:
// 1-256 ASCII letters, digits, '_', '-', '.').
const maxStreamID = 256

// wsCreateEvent is what the connection routes a response.create on.
type wsCreateEvent struct {
	streamID string
	// previousID is the create's previous_response_id (which stays in the
	// body too), for the connection-local chain (responses_ws_chain.go).
	previousID string
}

// parseCreate reads one client message. For a response.create it appends
// to body the create's parameters as a POST /v1/responses body, with
// "stream":true and without the transport's members, and returns it with
// the event's routing. Otherwise ae says why the message is refused; the
// stream_id is returned then too when the event had a valid one, so that
// the error event reaches the client's lane. It never quotes client text
// unescaped.
func parseCreate(msg, body []byte) (ev wsCreateEvent, out []byte, ae *apiError) {
	var streamID string
	var (
		gotType             bool
		typeName            string
		background, noGen   bool
		badStreamID, sawAny bool
	)
	in := jlexer.Lexer{Data: msg}
	out = append(body, '{')
	if !in.IsDelim('{') {
		return wsCreateEvent{}, body, wsBadJSON()
	}
	in.Delim('{')
	for in.Ok() && !in.IsDelim('}') {
		key := in.UnsafeFieldName(false)
		in.WantColon()
		switch key {
		case "type":
			if in.IsNull() {
				in.Skip()
			} else {
				typeName, gotType = in.String(), true
			}
		case "stream_id":
			if in.IsNull() {
				in.Skip()
				break
			}
			// Unescaped, as the SDK reads it ("l\u0061ne" is "lane").
			if id := in.String(); validStreamID(id) {
				streamID = id
			} else {
				badStreamID = true
			}
		case "generate":
			if in.IsNull() {
				in.Skip()
			} else {
				noGen = !in.Bool()
			}
		case "background":
			if in.IsNull() {
				in.Skip()
			} else {
				background = in.Bool()
			}
		case "stream":
			// Implicit over WebSocket: every response streams.
			in.Skip()
		default:
			raw := in.Raw()
			if key == "previous_response_id" && len(raw) > 0 && raw[0] == '"' {
				prev := jlexer.Lexer{Data: raw}
				ev.previousID = prev.String()
			}
			if sawAny {
				out = append(out, ',')
			}
			sawAny = true
			out = codegen.AppendJSONStringS(out, key)
			out = append(out, ':')
			out = append(out, raw...)
		}
		in.WantComma()
	}
	in.Delim('}')
	in.Consumed()
	if in.Error() != nil {
		return wsCreateEvent{}, body, wsBadJSON()
	}
	switch {
	case !gotType:
		return wsCreateEvent{streamID: streamID}, body, &apiError{Status: 400, Type: "invalid_request_error", Code: "missing_required_parameter", Param: "type",
			Message: "The event has no \"type\": send {\"type\":\"response.create\", ...}."}
	case typeName == wsEventSteer:
		return wsCreateEvent{streamID: streamID}, body, &apiError{Status: 400, Type: "invalid_request_error", Code: "unsupported_event_type", Param: "type",
			Message: "response.steer is not supported by this server."}
	case typeName != wsEventCreate:
		return wsCreateEvent{streamID: streamID}, body, &apiError{Status: 400, Type: "invalid_request_error", Code: "unknown_event_type", Param: "type",
			Message: "Unknown client event type " + quoteID(typeName) + ": the Responses API over WebSocket accepts response.create."}
	case badStreamID:
		return wsCreateEvent{}, body, &apiError{Status: 400, Type: "invalid_request_error", Code: "invalid_stream_id", Param: "stream_id",
			Message: "stream_id must be 1-256 ASCII letters, digits, underscores, hyphens or periods."}
	case background:
		return wsCreateEvent{streamID: streamID}, body, &apiError{Status: 400, Type: "invalid_request_error", Code: "unsupported_parameter", Param: "background",
			Message: "background is not supported over WebSocket; use POST /v1/responses."}
	case noGen:
		return wsCreateEvent{streamID: streamID}, body, &apiError{Status: 400, Type: "invalid_request_error", Code: "unsupported_parameter", Param: "generate",
			Message: "generate: false is not supported by this server."}
	}
	if sawAny {
		out = append(out, ',')
	}
	out = append(out, `"stream":true}`...)
	ev.streamID = streamID
	return ev, out, nil
}

func wsBadJSON() *apiError {
	return &apiError{Status: 400, Type: "invalid_request_error", Code: "invalid_json",
		Message: "The message is not a valid JSON object."}
}

// validStreamID is openai-go's rule for a stream_id. An id that passes
// needs no escaping in JSON, so it is written into events as it is.
func validStreamID(id string) bool {
	if len(id) == 0 || len(id) > maxStreamID {
		return false
	}
	for _, c := range []byte(id) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
