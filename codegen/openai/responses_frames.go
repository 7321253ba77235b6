package openai

import (
	"bytes"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// respItemKind is the type of the output item a ResponsesFormatter has open.
type respItemKind uint8

const (
	respNone respItemKind = iota
	respReasoning
	respMessage
	respCall
)

// respIDPrefix is each item kind's id prefix (engine.ItemID), as
// BuildResponse gives the stored items.
var respIDPrefix = [...]string{respReasoning: engine.ItemReasoning, respMessage: engine.ItemMessage, respCall: engine.ItemCall}

// ResponsesFormatter writes the SSE events of one streamed Responses API
// response. Each event is
//
//	event: <type>\ndata: {"type":"<type>",…,"sequence_number":k}\n\n
//
// in its own transport frame, with sequence_number counting from 0:
// response.created and response.in_progress (the in-progress response
// object), then per output item response.output_item.added, its content
// events and response.output_item.done, and last response.completed (or
// response.incomplete / response.failed) with the final response object.
//
// Item bookkeeping lives here: reasoning opens a reasoning item
// (reasoning_text deltas), text a message item (one output_text part),
// each tool call a function_call item; an item closes when the next opens
// or the choice ends. The formatter keeps each item's text to repeat it in
// the .done events, in a buffer it reuses.
//
// ResponsesFormatter implements engine.Formatter; n is always 1. It is used
// from one goroutine at a time; Reset readies it for another response.
// AppendDelta does not allocate in steady state; AppendStart and AppendEnd
// build the response object once each.
type ResponsesFormatter struct {
	meta    ResponseMeta
	framing codegen.Framing
	seq     int
	next    int // output index of the next item
	open    respItemKind
	ended   bool
	id      []byte // the open item's id
	text    []byte // the open item's text or arguments so far
	lps     []byte // the open message's logprob entries so far, comma-joined
	// held are the logprob entries of tokens with no text yet (a Delta
	// with empty text: no event carries them), comma-joined: they go
	// with the next text's delta, or into the message's .done.
	held   []byte
	callID []byte
	name   []byte
}

var _ engine.Formatter = (*ResponsesFormatter)(nil)

// NewResponsesFormatter returns a formatter for the response described by
// meta (from ResponsesRequest.Meta, with the response's id).
func NewResponsesFormatter(meta ResponseMeta, framing codegen.Framing) *ResponsesFormatter {
	return &ResponsesFormatter{meta: meta, framing: framing}
}

// Reset readies f for another response, keeping its buffers.
func (f *ResponsesFormatter) Reset(meta ResponseMeta, framing codegen.Framing) {
	*f = ResponsesFormatter{meta: meta, framing: framing,
		id: f.id[:0], text: f.text[:0], lps: f.lps[:0], held: f.held[:0], callID: f.callID[:0], name: f.name[:0]}
}

// begin opens the frame of event typ (codegen.BeginEvent).
func (f *ResponsesFormatter) begin(dst []byte, typ string) ([]byte, int) {
	return codegen.BeginEvent(dst, f.framing, typ)
}

// SetSequence numbers the next event seq (0 after Reset): a stream whose
// first sequence_number is not 0 (engine.StreamInfo.FirstSequence).
func (f *ResponsesFormatter) SetSequence(seq int) { f.seq = seq }

// end appends the event's sequence_number, closes the data object and the
// event, and ends its frame.
func (f *ResponsesFormatter) end(dst []byte, mark int) []byte {
	dst = endEvent(dst, f.framing, mark, f.seq)
	f.seq++
	return dst
}

// endEvent appends an event's sequence_number seq, closes the data object
// and the event, and ends the frame begun at mark.
func endEvent(dst []byte, framing codegen.Framing, mark, seq int) []byte {
	dst = append(dst, `,"sequence_number":`...)
	dst = codegen.AppendInt(dst, int64(seq))
	return codegen.EndEvent(dst, framing, mark)
}

// responseEvent appends an event carrying the whole response object r.
func (f *ResponsesFormatter) responseEvent(dst []byte, typ string, r *ResponseObject) []byte {
	dst, mark := f.begin(dst, typ)
	dst = append(dst, `,"response":`...)
	dst = AppendResponse(dst, r)
	return f.end(dst, mark)
}

// AppendStart appends response.created and response.in_progress.
func (f *ResponsesFormatter) AppendStart(dst []byte, s *engine.Start) []byte {
	r := BuildResponse(&f.meta, nil)
	dst = f.responseEvent(dst, "response.created", r)
	return f.responseEvent(dst, "response.in_progress", r)
}

// AppendDelta appends the events of one step's output.
func (f *ResponsesFormatter) AppendDelta(dst []byte, d *engine.Delta) []byte {
	switch d.Kind {
	case engine.DeltaReasoning:
		if len(d.Text) == 0 {
			return dst
		}
		if f.open != respReasoning {
			dst = f.closeItem(dst, ResponseCompleted)
			dst = f.openItem(dst, respReasoning, d)
		}
		f.text = append(f.text, d.Text...)
		dst, mark := f.begin(dst, "response.reasoning_text.delta")
		dst = f.appendItemRef(dst, true)
		dst = append(dst, `,"delta":`...)
		dst = codegen.AppendJSONString(dst, d.Text)
		return f.end(dst, mark)
	case engine.DeltaText:
		if len(d.Text) == 0 {
			for i := range d.Logprobs {
				if len(f.held) > 0 {
					f.held = append(f.held, ',')
				}
				f.held = appendLogprobEntry(f.held, &d.Logprobs[i])
			}
			return dst
		}
		if f.open != respMessage {
			dst = f.closeItem(dst, ResponseCompleted)
			dst = f.openItem(dst, respMessage, d)
		}
		f.text = append(f.text, d.Text...)
		dst, mark := f.begin(dst, "response.output_text.delta")
		dst = f.appendItemRef(dst, true)
		dst = append(dst, `,"delta":`...)
		dst = codegen.AppendJSONString(dst, d.Text)
		dst = append(dst, `,"logprobs":[`...)
		sep := len(f.held) > 0
		dst = append(dst, f.held...)
		f.takeHeld()
		for i := range d.Logprobs {
			if len(f.lps) > 0 {
				f.lps = append(f.lps, ',')
			}
			if sep {
				dst = append(dst, ',')
			}
			sep = true
			m := len(dst)
			dst = appendLogprobEntry(dst, &d.Logprobs[i])
			f.lps = append(f.lps, dst[m:]...)
		}
		dst = append(dst, ']')
		return f.end(dst, mark)
	case engine.DeltaToolCallStart:
		dst = f.closeItem(dst, ResponseCompleted)
		return f.openItem(dst, respCall, d)
	case engine.DeltaToolCallArgs:
		if f.open != respCall {
			// Arguments with no open call break the engine's contract; open
			// an anonymous call rather than drop them.
			dst = f.closeItem(dst, ResponseCompleted)
			dst = f.openItem(dst, respCall, d)
		}
		if len(d.Text) == 0 {
			return dst
		}
		f.text = append(f.text, d.Text...)
		dst, mark := f.begin(dst, "response.function_call_arguments.delta")
		dst = f.appendItemRef(dst, false)
		dst = append(dst, `,"delta":`...)
		dst = codegen.AppendJSONString(dst, d.Text)
		return f.end(dst, mark)
	}
	return dst
}

// appendItemRef appends the open item's "item_id" and "output_index" (and
// "content_index":0 for items with content parts).
func (f *ResponsesFormatter) appendItemRef(dst []byte, content bool) []byte {
	dst = append(dst, `,"item_id":`...)
	dst = codegen.AppendJSONString(dst, f.id)
	dst = append(dst, `,"output_index":`...)
	dst = codegen.AppendInt(dst, int64(f.next))
	if content {
		dst = append(dst, `,"content_index":0`...)
	}
	return dst
}

// openItem appends response.output_item.added for a new item (and
// response.content_part.added for one with content).
func (f *ResponsesFormatter) openItem(dst []byte, k respItemKind, d *engine.Delta) []byte {
	f.open = k
	f.id = engine.AppendItemID(f.id[:0], respIDPrefix[k], f.meta.ID, f.next)
	f.text = f.text[:0]
	if k == respCall {
		if d.ToolCallID != "" {
			f.callID = append(f.callID[:0], d.ToolCallID...)
		} else {
			f.callID = engine.AppendItemID(f.callID[:0], engine.ItemCallID, f.meta.ID, f.next)
		}
		f.name = append(f.name[:0], d.ToolName...)
	}
	dst, mark := f.begin(dst, "response.output_item.added")
	dst = append(dst, `,"output_index":`...)
	dst = codegen.AppendInt(dst, int64(f.next))
	dst = append(dst, `,"item":`...)
	dst = f.appendOpenItem(dst, ResponseInProgress, false)
	dst = f.end(dst, mark)
	if k == respCall {
		return dst
	}
	dst, mark = f.begin(dst, "response.content_part.added")
	dst = f.appendItemRef(dst, true)
	dst = append(dst, `,"part":`...)
	dst = f.appendPart(dst, false)
	return f.end(dst, mark)
}

// appendOpenItem appends the open item as an object, with its content so
// far when full (the .done form) and without it otherwise (the .added form).
func (f *ResponsesFormatter) appendOpenItem(dst []byte, status string, full bool) []byte {
	dst = append(dst, `{"id":`...)
	dst = codegen.AppendJSONString(dst, f.id)
	switch f.open {
	case respReasoning:
		dst = append(dst, `,"type":"reasoning","summary":[]`...)
		if full {
			dst = append(dst, `,"content":[`...)
			dst = f.appendPart(dst, true)
			dst = append(dst, ']')
		}
	case respMessage:
		dst = append(dst, `,"type":"message","status":"`...)
		dst = append(dst, status...)
		dst = append(dst, `","content":[`...)
		if full {
			dst = f.appendPart(dst, true)
		}
		dst = append(dst, `],"role":"assistant"`...)
	case respCall:
		dst = append(dst, `,"type":"function_call","status":"`...)
		dst = append(dst, status...)
		dst = append(dst, `","arguments":`...)
		if full {
			dst = codegen.AppendJSONString(dst, f.text)
		} else {
			dst = append(dst, `""`...)
		}
		dst = append(dst, `,"call_id":`...)
		dst = codegen.AppendJSONString(dst, f.callID)
		dst = append(dst, `,"name":`...)
		dst = codegen.AppendJSONString(dst, f.name)
	}
	return append(dst, '}')
}

// takeHeld moves the held logprob entries into the message's.
func (f *ResponsesFormatter) takeHeld() {
	if len(f.held) == 0 {
		return
	}
	if len(f.lps) > 0 {
		f.lps = append(f.lps, ',')
	}
	f.lps = append(f.lps, f.held...)
	f.held = f.held[:0]
}

// appendPart appends the open item's content part: empty, or with its text.
func (f *ResponsesFormatter) appendPart(dst []byte, full bool) []byte {
	if f.open == respReasoning {
		dst = append(dst, `{"type":"reasoning_text","text":`...)
	} else {
		dst = append(dst, `{"type":"output_text","annotations":[],"logprobs":[`...)
		if full {
			dst = append(dst, f.lps...)
		}
		dst = append(dst, `],"text":`...)
	}
	if full {
		dst = codegen.AppendJSONString(dst, f.text)
	} else {
		dst = append(dst, `""`...)
	}
	return append(dst, '}')
}

// closeItem appends the events that finish the open item, if any: the
// text's or arguments' .done, response.content_part.done, and
// response.output_item.done with the whole item.
func (f *ResponsesFormatter) closeItem(dst []byte, status string) []byte {
	var mark int
	switch f.open {
	case respNone:
		return dst
	case respReasoning:
		dst, mark = f.begin(dst, "response.reasoning_text.done")
		dst = f.appendItemRef(dst, true)
	case respMessage:
		f.takeHeld()
		dst, mark = f.begin(dst, "response.output_text.done")
		dst = f.appendItemRef(dst, true)
		dst = append(dst, `,"logprobs":[`...)
		dst = append(dst, f.lps...)
		dst = append(dst, ']')
	case respCall:
		dst, mark = f.begin(dst, "response.function_call_arguments.done")
		dst = f.appendItemRef(dst, false)
		dst = append(dst, `,"name":`...)
		dst = codegen.AppendJSONString(dst, f.name)
		dst = append(dst, `,"arguments":`...)
		dst = codegen.AppendJSONString(dst, f.text)
	}
	if f.open != respCall {
		dst = append(dst, `,"text":`...)
		dst = codegen.AppendJSONString(dst, f.text)
	}
	dst = f.end(dst, mark)
	if f.open != respCall {
		dst, mark = f.begin(dst, "response.content_part.done")
		dst = f.appendItemRef(dst, true)
		dst = append(dst, `,"part":`...)
		dst = f.appendPart(dst, true)
		dst = f.end(dst, mark)
	}
	dst, mark = f.begin(dst, "response.output_item.done")
	dst = append(dst, `,"output_index":`...)
	dst = codegen.AppendInt(dst, int64(f.next))
	dst = append(dst, `,"item":`...)
	dst = f.appendOpenItem(dst, status, true)
	dst = f.end(dst, mark)
	f.open = respNone
	f.next++
	f.lps = f.lps[:0]
	return dst
}

// AppendChoiceEnd closes the open item: "incomplete" when the choice ran
// out of tokens, "completed" otherwise.
func (f *ResponsesFormatter) AppendChoiceEnd(dst []byte, e *engine.ChoiceEnd) []byte {
	if f.ended {
		return dst
	}
	f.ended = true
	status := ResponseCompleted
	if e.FinishReason == engine.FinishLength || e.FinishReason == engine.FinishAbort {
		status = ResponseIncomplete
	}
	return f.closeItem(dst, status)
}

// AppendEnd appends the final event with the response object built from
// res (BuildResponse, as the non-streamed body): response.completed,
// response.incomplete, or response.failed; then it ends the chunked body.
func (f *ResponsesFormatter) AppendEnd(dst []byte, res *engine.Result) []byte {
	if !f.ended {
		e := engine.ChoiceEnd{FinishReason: engine.FinishStop, StopTokenID: -1}
		if len(res.Choices) > 0 {
			e.FinishReason = res.Choices[0].FinishReason
		}
		dst = f.AppendChoiceEnd(dst, &e)
	}
	r := BuildResponse(&f.meta, res)
	typ := "response.failed"
	switch r.Status {
	case ResponseCompleted:
		typ = "response.completed"
	case ResponseIncomplete:
		typ = "response.incomplete"
	}
	dst = f.responseEvent(dst, typ, r)
	return codegen.AppendLastChunk(dst, f.framing)
}

// AppendError appends response.failed (AppendResponseFailed) at the
// stream's next sequence_number.
func (f *ResponsesFormatter) AppendError(dst []byte, err *engine.Error) []byte {
	dst = AppendResponseFailed(dst, &f.meta, f.framing, f.seq, err)
	f.seq++
	return dst
}

// AppendResponseFailed appends the response.failed event, numbered seq,
// that ends a Responses stream after an error: its response object (meta's)
// has status "failed" and error {code, message} from err; then it ends the
// chunked body. (An in-stream "error" event would not end the SDKs'
// streams; response.failed is the terminal event they wait for.)
// ResponsesFormatter.AppendError writes it at its own next number; a session
// that must end a stream itself writes it at the number after the last
// event it forwarded (LastSequenceNumber), whoever wrote the events.
func AppendResponseFailed(dst []byte, meta *ResponseMeta, framing codegen.Framing, seq int, err *engine.Error) []byte {
	r := BuildResponse(meta, &engine.Result{Err: err})
	if err.Kind == engine.KindAborted {
		r.Status = ResponseFailed // a stream has no "cancelled" terminal event
		r.Error = &ResponseErrorObject{Code: "server_error", Message: orDefault(err.Message, "The request was aborted.")}
	}
	dst, mark := codegen.BeginEvent(dst, framing, "response.failed")
	dst = append(dst, `,"response":`...)
	dst = AppendResponse(dst, r)
	dst = endEvent(dst, framing, mark, seq)
	return codegen.AppendLastChunk(dst, framing)
}

// sequenceKey is the member every Responses stream event carries its number in.
var sequenceKey = []byte(`"sequence_number":`)

// LastSequenceNumber returns the sequence_number of the last Responses
// stream event in frames (whole events, as a stream's deliveries hold
// them), or false when frames hold none. It reads backwards from the end,
// usually a few dozen bytes: the last "sequence_number" member in frames is
// the last event's, since no response object or item has such a member and
// a JSON string cannot hold its unescaped quotes.
func LastSequenceNumber(frames []byte) (int, bool) {
	i := bytes.LastIndex(frames, sequenceKey)
	if i < 0 {
		return 0, false
	}
	rest := bytes.TrimLeft(frames[i+len(sequenceKey):], " \t")
	n, digits := 0, 0
	for _, c := range rest {
		if c < '0' || c > '9' || digits == 18 { // 18 digits cannot overflow an int64
			break
		}
		n = n*10 + int(c-'0')
		digits++
	}
	return n, digits > 0
}

// CutTerminalEvent returns frames without their last event when it is a
// Responses stream's terminal one (response.completed, response.incomplete
// or response.failed, with the chunked body's last-chunk after it), and
// that event's sequence_number; ok is false when frames do not end with
// one. A session uses it to replace the end it held back (a store that
// failed to save the response turns it into response.failed). Whole
// events only, as a stream's deliveries hold them.
func CutTerminalEvent(frames []byte, framing codegen.Framing) (rest []byte, seq int, ok bool) {
	typeKey := []byte(`{"type":"response.`)
	i := bytes.LastIndex(frames, typeKey)
	if i < 0 {
		return frames, 0, false
	}
	typ := frames[i+len(typeKey)-len("response."):]
	if q := bytes.IndexByte(typ, '"'); q < 0 {
		return frames, 0, false
	} else {
		typ = typ[:q]
	}
	switch string(typ) {
	case "response.completed", "response.incomplete", "response.failed":
	default:
		return frames, 0, false
	}
	seq, ok = LastSequenceNumber(frames[i:])
	if !ok {
		return frames, 0, false
	}
	start := i
	switch framing {
	case codegen.FramingWebSocket:
		// An unmasked text frame's header: 2, 4 or 10 bytes.
		switch {
		case start >= 2 && frames[start-2] == 0x81 && frames[start-1] < 126:
			start -= 2
		case start >= 4 && frames[start-4] == 0x81 && frames[start-3] == 126:
			start -= 4
		case start >= 10 && frames[start-10] == 0x81 && frames[start-9] == 127:
			start -= 10
		default:
			return frames, 0, false
		}
	default:
		prefix := []byte("event: " + string(typ) + "\ndata: ")
		if !bytes.HasSuffix(frames[:start], prefix) {
			return frames, 0, false
		}
		start -= len(prefix)
		if framing == codegen.FramingChunked {
			// The chunk's header: hex digits, CRLF.
			if start < 3 || frames[start-1] != '\n' || frames[start-2] != '\r' {
				return frames, 0, false
			}
			start -= 2
			for start > 0 && isHex(frames[start-1]) {
				start--
			}
		}
	}
	return frames[:start], seq, true
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

// AppendResponseFailedCode is AppendResponseFailed with the error object's
// code and message given (a failure that is not the engine's, such as
// response_store_unavailable).
func AppendResponseFailedCode(dst []byte, meta *ResponseMeta, framing codegen.Framing, seq int, code, message string) []byte {
	r := BuildResponse(meta, &engine.Result{Err: &engine.Error{Kind: engine.KindInternal, Message: message}})
	r.Status = ResponseFailed
	r.Error = &ResponseErrorObject{Code: code, Message: message}
	dst, mark := codegen.BeginEvent(dst, framing, "response.failed")
	dst = append(dst, `,"response":`...)
	dst = AppendResponse(dst, r)
	dst = endEvent(dst, framing, mark, seq)
	return codegen.AppendLastChunk(dst, framing)
}
