package openai

import (
	"bytes"

	"github.com/mailru/easyjson/jlexer"

	"github.com/vajra-go/vajra/codegen"
)

// This file reads back a Responses stream's own events (codegen.FramingRaw:
// "event: <type>\ndata: {…}\n\n" each), for background responses: the
// session keeps their events in a log, resumes a stream from a
// sequence_number (EventsAfter) and shows the output so far
// (ResponseAccumulator) without knowing what wrote them.

// eventEnd ends every raw SSE event: a JSON data line holds no raw
// newline, so the first blank line after "data:" is the event's end.
var eventEnd = []byte("\n\n")

// NextEvent splits the first whole raw event off events: ev is the event
// (with its blank line), rest what follows; ok is false when events holds
// no whole event.
func NextEvent(events []byte) (ev, rest []byte, ok bool) {
	i := bytes.Index(events, eventEnd)
	if i < 0 {
		return nil, events, false
	}
	return events[:i+2], events[i+2:], true
}

// EventsAfter returns the suffix of events (whole raw events, numbered
// upwards without gaps) that starts with the first event whose
// sequence_number is greater than after. ok is false when that event is
// no longer in events: the first event kept is numbered above after+1.
// It reads each event's number from its end (LastSequenceNumber).
func EventsAfter(events []byte, after int) (rest []byte, ok bool) {
	first := true
	for rest = events; len(rest) > 0; {
		ev, next, whole := NextEvent(rest)
		if !whole {
			return nil, true
		}
		n, _ := LastSequenceNumber(ev)
		if n > after {
			return rest, !first || n <= after+1
		}
		first = false
		rest = next
	}
	return nil, true
}

// FirstSequenceNumber returns the sequence_number of the first whole event
// in events, or false when there is none.
func FirstSequenceNumber(events []byte) (int, bool) {
	ev, _, ok := NextEvent(events)
	if !ok {
		return 0, false
	}
	return LastSequenceNumber(ev)
}

// EndsStream reports whether the last event in frames (whole raw events)
// is a terminal one: response.completed, response.incomplete or
// response.failed. An event line starts frames or follows a blank line
// (a JSON data line holds no raw newline), so text cannot fake one.
func EndsStream(frames []byte) bool {
	line := frames
	if i := bytes.LastIndex(frames, []byte("\n\nevent: ")); i >= 0 {
		line = frames[i+2:]
	}
	for _, t := range terminalEvents {
		if bytes.HasPrefix(line, t) {
			return true
		}
	}
	return false
}

var terminalEvents = [][]byte{
	[]byte("event: response.completed\n"), []byte("event: response.incomplete\n"), []byte("event: response.failed\n"),
}

// AppendTerminalEvent appends the event that ends a Responses stream with
// the final object r, numbered seq: response.completed,
// response.incomplete, or response.failed (for failed and cancelled
// objects: the API has no response.cancelled event, and the SDKs end a
// stream on response.failed); then the end of the chunked body.
func AppendTerminalEvent(dst []byte, framing codegen.Framing, seq int, r *ResponseObject) []byte {
	typ := "response.failed"
	switch r.Status {
	case ResponseCompleted:
		typ = "response.completed"
	case ResponseIncomplete:
		typ = "response.incomplete"
	}
	dst, mark := codegen.BeginEvent(dst, framing, typ)
	dst = append(dst, `,"response":`...)
	dst = AppendResponse(dst, r)
	dst = endEvent(dst, framing, mark, seq)
	return codegen.AppendLastChunk(dst, framing)
}

// ResponseAccumulator folds a Responses stream's events into the output
// items so far, as GET shows a background response in progress: each item
// the stream closed as its .done event carried it, the open one with its
// text (or arguments) so far. Logprobs are not kept. Fold events in order,
// each once; the zero value is empty. Not safe for concurrent use.
type ResponseAccumulator struct {
	items []ResponseItem
	// open: the last item is open, with its text or arguments so far in
	// text (appended to, so that folding n deltas costs O(n)).
	open bool
	text []byte
	// Started: the stream's first event (response.created) was folded.
	Started bool
}

// Fold reads whole raw events (FramingRaw) and applies them. Events it
// cannot read are skipped: they are the stream's own.
func (a *ResponseAccumulator) Fold(events []byte) {
	for len(events) > 0 {
		ev, rest, ok := NextEvent(events)
		if !ok {
			return
		}
		events = rest
		i := bytes.Index(ev, []byte("data: "))
		if i < 0 {
			continue
		}
		var e responseStreamEvent
		in := jlexer.Lexer{Data: ev[i+len("data: "):]}
		e.UnmarshalEasyJSON(&in)
		if in.Error() != nil {
			continue
		}
		a.apply(&e)
	}
}

func (a *ResponseAccumulator) apply(e *responseStreamEvent) {
	n := len(a.items)
	switch e.Type {
	case "response.created", "response.in_progress":
		a.Started = true
	case "response.output_item.added":
		if e.Item != nil && e.OutputIndex == n {
			a.items = append(a.items, *e.Item)
			a.open, a.text = true, a.text[:0]
		}
	case "response.output_item.done":
		if e.Item != nil && e.OutputIndex == n-1 {
			a.items[n-1] = *e.Item
			a.open, a.text = false, a.text[:0]
		}
	case "response.content_part.added":
		if a.open && e.OutputIndex == n-1 && e.Part != nil && len(a.items[n-1].Content) == 0 {
			a.items[n-1].Content = []ResponsesContentPart{*e.Part}
		}
	case "response.output_text.delta", "response.reasoning_text.delta", "response.function_call_arguments.delta":
		if a.open && e.OutputIndex == n-1 {
			a.text = append(a.text, e.Delta...)
		}
	}
}

// Output returns the output items so far. The items are the caller's; the
// accumulator keeps its own.
func (a *ResponseAccumulator) Output() []ResponseItem {
	items := append([]ResponseItem(nil), a.items...)
	if !a.open || len(items) == 0 {
		return items
	}
	it := &items[len(items)-1]
	switch it.Type {
	case "function_call":
		it.Arguments = string(a.text)
	case "reasoning", "message":
		part := ResponsesContentPart{Type: "output_text"}
		if it.Type == "reasoning" {
			part.Type = "reasoning_text"
		}
		if len(it.Content) > 0 {
			part = it.Content[0]
		}
		part.Text = string(a.text)
		it.Content = []ResponsesContentPart{part}
	}
	return items
}

// BuildPartialResponse is the response object of meta while it runs: status
// (queued or in_progress) and the output items so far (a
// ResponseAccumulator's), no usage.
func BuildPartialResponse(meta *ResponseMeta, status string, items []ResponseItem) *ResponseObject {
	r := BuildResponse(meta, nil)
	r.Status = status
	if len(items) > 0 {
		r.Output = items
	}
	return r
}
