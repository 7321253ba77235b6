package bench

import (
	"fmt"
	"strings"
)

// Raw SSE bodies of every dialect, as servers send them (see WIRE.md). Each
// has 3 tokens, a usage block reporting 3 and its terminal event.
var dialectStreams = map[Dialect]string{
	DialectChat: `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}

: keep-alive

data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"lo \"x\""},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"length"}]}

data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}

data: [DONE]

`,
	DialectCompletions: `data: {"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"a","finish_reason":null}]}

data: {"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"","finish_reason":null}]}

data: {"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"b","finish_reason":null}]}

data: {"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"c","finish_reason":"length"}],"usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}}

data: [DONE]

`,
	DialectResponses: `event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[]}}

event: response.in_progress
data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1"}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"type":"message","content":[]}}

event: response.content_part.added
data: {"type":"response.content_part.added","sequence_number":3,"output_index":0,"content_index":0,"part":{"type":"output_text","text":""}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":4,"output_index":0,"content_index":0,"delta":"one"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":5,"output_index":0,"content_index":0,"delta":" two"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":6,"output_index":0,"content_index":0,"delta":" three"}

event: response.output_text.done
data: {"type":"response.output_text.done","sequence_number":7,"text":"one two three"}

event: response.completed
data: {"type":"response.completed","sequence_number":8,"response":{"id":"resp_1","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"one two three"}]}],"usage":{"input_tokens":4,"output_tokens":3,"total_tokens":7}}}

`,
	DialectMessages: `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{"input_tokens":4,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: ping
data: {"type":"ping"}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":" there"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":3}}

event: message_stop
data: {"type":"message_stop"}

`,
}

// realtimeEvents is a Realtime (GA) exchange's server events after
// response.create: 3 tokens.
var realtimeEvents = []string{
	`{"type":"response.created","event_id":"e1","response":{"id":"r1","status":"in_progress"}}`,
	`{"type":"response.output_item.added","event_id":"e2","output_index":0,"item":{"id":"i1","type":"message"}}`,
	`{"type":"response.content_part.added","event_id":"e3","part":{"type":"text","text":""}}`,
	`{"type":"response.output_text.delta","event_id":"e4","delta":"a"}`,
	`{"type":"response.output_text.delta","event_id":"e5","delta":"b"}`,
	`{"type":"response.text.delta","event_id":"e6","delta":"c"}`,
	`{"type":"response.output_text.done","event_id":"e7","text":"abc"}`,
	`{"type":"response.done","event_id":"e8","response":{"id":"r1","status":"completed","usage":{"input_tokens":3,"output_tokens":3}}}`,
}

// crlf converts a stream's line ends to CRLF.
func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

// chunkedBody frames s as HTTP/1.1 chunks of at most size bytes.
func chunkedBody(s string, size int) string {
	var b strings.Builder
	for len(s) > 0 {
		n := min(size, len(s))
		fmt.Fprintf(&b, "%x\r\n%s\r\n", n, s[:n])
		s = s[n:]
	}
	b.WriteString("0\r\n\r\n")
	return b.String()
}
