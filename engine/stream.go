package engine

import (
	"strconv"
	"strings"
)

// StreamInfo is what an engine that writes its own frames needs to know
// about a streamed response (a native engine with its own formatters, which
// ignores Request.Formatter): the constant parts of the stream that the
// session decided, because the session also uses them (it stores Responses
// API responses under these ids and writes an error event of its own when
// it must end a stream itself). The dialect builds Request.Formatter from
// the same values, so an engine that formats with it and an engine that
// writes its own frames from StreamInfo produce the same bytes.
//
// The contract for an engine that writes its own frames:
//   - every Deliver holds whole events, each in its own transport frame
//     (Chunked), and the frames that end the stream (the last chunk
//     included) come in the same Deliver as the final Result: the session
//     does what must happen before the client sees the end (the Responses
//     store's save) between the two;
//   - a Responses stream numbers its events from FirstSequence, one more
//     per event, each in a "sequence_number" member, and names its output
//     items by ItemID;
//   - errors the engine detects itself are its to write (it may use the
//     Formatter's AppendError for them); when the session ends a stream
//     (a failed session), it writes the dialect's error event itself, after
//     the last whole event it forwarded.
//
// StreamInfo is small and holds only strings the session keeps anyway:
// filling it costs no allocation.
type StreamInfo struct {
	// Dialect is the API whose frames the stream carries. DialectNone
	// means the stream can only be written with Formatter (one prompt's
	// part of a batched completions request, whose parts the dialect
	// joins into one stream).
	Dialect Dialect
	// ID is the response's id, the same in every frame: "chatcmpl-…"
	// (chat), "cmpl-…" (completions), "resp_…" (Responses), "msg_…"
	// (Messages).
	ID string
	// Model is the model name the frames echo.
	Model string
	// Created is the response's creation time in Unix seconds: "created"
	// of chat and completions chunks, "created_at" of a Responses object.
	// Messages frames carry none.
	Created int64
	// Chunked wraps each event in one HTTP/1.1 chunk (RFC 9112 §7.1) and
	// ends the stream with the last chunk "0\r\n\r\n"; otherwise events
	// are written bare, in a body the connection's close ends.
	Chunked bool
	// IncludeUsage ends a chat or completions stream with a chunk holding
	// "choices":[] and the usage, before data: [DONE]
	// (stream_options.include_usage). ContinuousUsage adds the running
	// usage to every chunk (vLLM's continuous_usage_stats); it is set only
	// with IncludeUsage.
	IncludeUsage    bool
	ContinuousUsage bool
	// FirstSequence is the sequence_number of a Responses stream's first
	// event (response.created).
	FirstSequence int
}

// Dialect names the wire format of a stream.
type Dialect uint8

const (
	DialectNone        Dialect = iota // no stream of its own (see StreamInfo.Dialect)
	DialectChat                       // OpenAI chat completions chunks
	DialectCompletions                // OpenAI (legacy) completions chunks
	DialectResponses                  // OpenAI Responses API events
	DialectMessages                   // Anthropic Messages events
)

// Prefixes of the Responses API's output item ids (ItemID).
const (
	ItemReasoning = "rs_"   // a reasoning item
	ItemMessage   = "msg_"  // an assistant message item
	ItemCall      = "fc_"   // a function_call item
	ItemCallID    = "call_" // a function call's call_id, when the engine gave the call no ID
)

// ItemID is the id of the Responses API output item at outputIndex of the
// response respID: prefix (ItemReasoning, ItemMessage, ItemCall or
// ItemCallID) + respID without its "resp_" + "_" + outputIndex, e.g.
// "msg_k3j2_1" for output 1 of "resp_k3j2". The streamed events, the
// stored response and the non-streamed body all use it.
func ItemID(prefix, respID string, outputIndex int) string {
	return string(AppendItemID(nil, prefix, respID, outputIndex))
}

// AppendItemID appends ItemID's text (unquoted) to dst without allocating.
func AppendItemID(dst []byte, prefix, respID string, outputIndex int) []byte {
	dst = append(dst, prefix...)
	dst = append(dst, strings.TrimPrefix(respID, "resp_")...)
	dst = append(dst, '_')
	return strconv.AppendInt(dst, int64(outputIndex), 10)
}
