package openai

import (
	"strconv"

	"github.com/mailru/easyjson/jwriter"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// This file writes the Realtime API's server events. Every event is
//
//	{"type":"<type>","event_id":"<prefix><n>",…}
//
// in its own transport frame (a WebSocket text frame in service). The
// event ids come from a RealtimeEvents: a prefix that is the writer's own
// and a counter, so that writing one allocates nothing. A session's own
// events (session.created, item bookkeeping, errors) and each response's
// or transcription's events (written by the engine through a Formatter)
// have writers of their own, with different prefixes: the engine's
// goroutine and the session never share a counter.

// RealtimeEvents numbers and frames the events of one writer.
type RealtimeEvents struct {
	framing codegen.Framing
	beta    bool
	prefix  []byte
	n       uint64
}

// Reset readies w for events framed with framing, in the beta shape when
// beta, with ids prefix + 0, 1, 2... prefix is copied (into w's reused
// buffer); it must hold only characters a JSON string keeps as they are.
func (w *RealtimeEvents) Reset(prefix []byte, framing codegen.Framing, beta bool) {
	w.prefix = append(w.prefix[:0], prefix...)
	w.framing, w.beta, w.n = framing, beta, 0
}

// Beta reports whether w writes the beta shape.
func (w *RealtimeEvents) Beta() bool { return w.beta }

// begin opens event typ and writes its event_id.
func (w *RealtimeEvents) begin(dst []byte, typ string) ([]byte, int) {
	dst, mark := codegen.BeginEvent(dst, w.framing, typ)
	dst = append(dst, `,"event_id":"`...)
	dst = append(dst, w.prefix...)
	dst = strconv.AppendUint(dst, w.n, 10)
	w.n++
	return append(dst, '"'), mark
}

// end closes the event begun at mark.
func (w *RealtimeEvents) end(dst []byte, mark int) []byte {
	return codegen.EndEvent(dst, w.framing, mark)
}

// AppendSession appends session.created or session.updated (typ) with s.
func (w *RealtimeEvents) AppendSession(dst []byte, typ string, s *RealtimeSessionObject) []byte {
	dst, mark := w.begin(dst, typ)
	dst = append(dst, `,"session":`...)
	jw := jwriter.Writer{}
	s.MarshalEasyJSON(&jw)
	jw.Buffer.DumpTo((*appendWriter)(&dst))
	return w.end(dst, mark)
}

// AppendError appends an error event: error.type typ, code, message, param
// (empty renders null) and the event_id of the client event at fault
// (empty renders null). message is escaped: it may quote client text.
func (w *RealtimeEvents) AppendError(dst []byte, typ, code, message, param, clientEventID string) []byte {
	dst, mark := w.begin(dst, "error")
	dst = append(dst, `,"error":{"type":`...)
	dst = codegen.AppendJSONStringS(dst, typ)
	dst = append(dst, `,"code":`...)
	dst = appendStringOrNull(dst, code)
	dst = append(dst, `,"message":`...)
	dst = codegen.AppendJSONStringS(dst, message)
	dst = append(dst, `,"param":`...)
	dst = appendStringOrNull(dst, param)
	dst = append(dst, `,"event_id":`...)
	dst = appendStringOrNull(dst, clientEventID)
	return w.end(append(dst, '}'), mark)
}

// AppendAPIError appends e as an error event (AppendError).
func (w *RealtimeEvents) AppendAPIError(dst []byte, e APIError, clientEventID string) []byte {
	return w.AppendError(dst, e.Kind.Type(), e.code(), e.Message, e.Param, clientEventID)
}

// RealtimeItem is a conversation item as the server renders it: a message
// with text content, or a user message holding committed input audio
// (Audio) with its transcript once known.
type RealtimeItem struct {
	ID     string
	Role   string // user, assistant, system
	Text   string
	Audio  bool
	Status string // completed, in_progress, incomplete
	// Transcript is an audio item's transcript; HasTranscript says it is
	// known (before, it renders null).
	Transcript    string
	HasTranscript bool
}

// appendItem appends it as an item object.
func (w *RealtimeEvents) appendItem(dst []byte, it *RealtimeItem) []byte {
	dst = append(dst, `{"id":`...)
	dst = codegen.AppendJSONStringS(dst, it.ID)
	dst = append(dst, `,"type":"message","object":"realtime.item","status":`...)
	dst = codegen.AppendJSONStringS(dst, it.Status)
	dst = append(dst, `,"role":`...)
	dst = codegen.AppendJSONStringS(dst, it.Role)
	dst = append(dst, `,"content":[`...)
	switch {
	case it.Audio:
		dst = append(dst, `{"type":"input_audio","transcript":`...)
		if it.HasTranscript {
			dst = codegen.AppendJSONStringS(dst, it.Transcript)
		} else {
			dst = append(dst, "null"...)
		}
		dst = append(dst, '}')
	case it.Role == "assistant":
		dst = w.appendOutputTextHead(dst)
		dst = codegen.AppendJSONStringS(dst, it.Text)
		dst = append(dst, '}')
	default:
		dst = append(dst, `{"type":"input_text","text":`...)
		dst = codegen.AppendJSONStringS(dst, it.Text)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// appendOutputText appends an assistant message's text content part:
// "output_text" in the GA shape, "text" in the beta one.
func (w *RealtimeEvents) appendOutputText(dst []byte, text []byte) []byte {
	dst = w.appendOutputTextHead(dst)
	dst = codegen.AppendJSONString(dst, text)
	return append(dst, '}')
}

// appendOutputTextHead appends the part's start, up to its text.
func (w *RealtimeEvents) appendOutputTextHead(dst []byte) []byte {
	if w.beta {
		return append(dst, `{"type":"text","text":`...)
	}
	return append(dst, `{"type":"output_text","text":`...)
}

// appendItemEvent appends an event carrying item it and its
// previous_item_id (prev; "" renders null).
func (w *RealtimeEvents) appendItemEvent(dst []byte, typ, prev string, it *RealtimeItem) []byte {
	dst, mark := w.begin(dst, typ)
	dst = append(dst, `,"previous_item_id":`...)
	dst = appendStringOrNull(dst, prev)
	dst = append(dst, `,"item":`...)
	dst = w.appendItem(dst, it)
	return w.end(dst, mark)
}

// AppendItemCreated appends what a new, complete item in the conversation
// gets: conversation.item.added and conversation.item.done (GA), or
// conversation.item.created (beta). prev is the id of the item before it
// ("" when it is first).
func (w *RealtimeEvents) AppendItemCreated(dst []byte, prev string, it *RealtimeItem) []byte {
	if w.beta {
		return w.appendItemEvent(dst, "conversation.item.created", prev, it)
	}
	dst = w.appendItemEvent(dst, "conversation.item.added", prev, it)
	return w.appendItemEvent(dst, "conversation.item.done", prev, it)
}

// AppendItemRetrieved appends conversation.item.retrieved with it.
func (w *RealtimeEvents) AppendItemRetrieved(dst []byte, it *RealtimeItem) []byte {
	dst, mark := w.begin(dst, "conversation.item.retrieved")
	dst = append(dst, `,"item":`...)
	dst = w.appendItem(dst, it)
	return w.end(dst, mark)
}

// AppendItemDeleted appends conversation.item.deleted for item id.
func (w *RealtimeEvents) AppendItemDeleted(dst []byte, id string) []byte {
	dst, mark := w.begin(dst, "conversation.item.deleted")
	dst = append(dst, `,"item_id":`...)
	dst = codegen.AppendJSONStringS(dst, id)
	return w.end(dst, mark)
}

// AppendCommitted appends input_audio_buffer.committed: the buffer became
// item id, after prev ("" renders null).
func (w *RealtimeEvents) AppendCommitted(dst []byte, prev, id string) []byte {
	dst, mark := w.begin(dst, "input_audio_buffer.committed")
	dst = append(dst, `,"previous_item_id":`...)
	dst = appendStringOrNull(dst, prev)
	dst = append(dst, `,"item_id":`...)
	dst = codegen.AppendJSONStringS(dst, id)
	return w.end(dst, mark)
}

// AppendCleared appends input_audio_buffer.cleared.
func (w *RealtimeEvents) AppendCleared(dst []byte) []byte {
	dst, mark := w.begin(dst, "input_audio_buffer.cleared")
	return w.end(dst, mark)
}

// RealtimeResponseMeta is what a response's events say about it, decided
// by the session.
type RealtimeResponseMeta struct {
	ID string // "resp_…"
	// ConversationID is the conversation the response joins; "" for an
	// out-of-band response (conversation "none"), which renders null and
	// sends no conversation.item events.
	ConversationID string
	ItemID         string // the assistant item's id
	PreviousItemID string // the item before it in the conversation ("" renders null)
	// MaxOutputTokens is the response's cap (0 renders "inf").
	MaxOutputTokens int
	Temperature     float64
}

// Realtime response statuses (response.done's response.status).
const (
	RealtimeCompleted  = "completed"
	RealtimeIncomplete = "incomplete"
	RealtimeCancelled  = "cancelled"
	RealtimeFailed     = "failed"
	RealtimeInProgress = "in_progress"
)

// RealtimeFormatter writes the events of one Realtime response, framed
// once on the engine side: the session writes response.created with
// AppendCreated before it starts the engine; the engine then writes,
// through the engine.Formatter methods, response.output_item.added,
// conversation.item.added, response.content_part.added, one
// response.output_text.delta per step (beta: response.text.delta), and at
// the end response.output_text.done, response.content_part.done,
// response.output_item.done, conversation.item.done and response.done with
// status and usage. A response the client cancelled ends with
// AppendCancelled, which the session calls once the engine delivered the
// final Result (the engine writes nothing after an abort, and never calls
// the Formatter after its final delivery).
//
// It keeps the item's text to repeat it in the .done events, in a buffer
// it reuses. AppendDelta does not allocate in steady state. Reset readies
// it for the next response.
type RealtimeFormatter struct {
	meta   RealtimeResponseMeta
	ev     RealtimeEvents
	opened bool // the output item was added
	closed bool // the output item was done
	done   bool // response.done was written
	status string
	text   []byte
	// partRef is appendRef(item, content), rendered at Reset.
	partRef []byte
}

var _ engine.Formatter = (*RealtimeFormatter)(nil)

// Reset readies f for the response meta, with event ids prefix + n.
func (f *RealtimeFormatter) Reset(meta RealtimeResponseMeta, prefix []byte, framing codegen.Framing, beta bool) {
	f.meta = meta
	f.ev.Reset(prefix, framing, beta)
	f.opened, f.closed, f.done, f.status = false, false, false, ""
	f.text = f.text[:0]
	// The members every part event repeats (each text delta among them),
	// rendered once per response rather than escaped per event.
	f.partRef = f.appendRef(f.partRef[:0], true, true)
}

// Text returns the assistant item's text so far (valid until Reset).
func (f *RealtimeFormatter) Text() []byte { return f.text }

// ItemID returns the assistant item's id.
func (f *RealtimeFormatter) ItemID() string { return f.meta.ItemID }

// Done reports whether response.done was written.
func (f *RealtimeFormatter) Done() bool { return f.done }

// Status returns the assistant item's final status ("" while open).
func (f *RealtimeFormatter) Status() string { return f.status }

// AppendCreated appends response.created with the in-progress response.
func (f *RealtimeFormatter) AppendCreated(dst []byte) []byte {
	dst, mark := f.ev.begin(dst, "response.created")
	dst = append(dst, `,"response":`...)
	dst = f.appendResponse(dst, RealtimeInProgress, nil, nil)
	return f.ev.end(dst, mark)
}

// AppendStart opens the response's one output item, an assistant message.
func (f *RealtimeFormatter) AppendStart(dst []byte, _ *engine.Start) []byte {
	f.opened = true
	it := f.item(RealtimeInProgress)
	dst, mark := f.ev.begin(dst, "response.output_item.added")
	dst = f.appendResponseRef(dst, false, false)
	dst = append(dst, `,"item":`...)
	dst = f.appendItem(dst, &it, false)
	dst = f.ev.end(dst, mark)
	if f.meta.ConversationID != "" {
		typ := "conversation.item.added"
		if f.ev.beta {
			typ = "conversation.item.created"
		}
		dst, mark = f.ev.begin(dst, typ)
		dst = append(dst, `,"previous_item_id":`...)
		dst = appendStringOrNull(dst, f.meta.PreviousItemID)
		dst = append(dst, `,"item":`...)
		dst = f.appendItem(dst, &it, false)
		dst = f.ev.end(dst, mark)
	}
	dst, mark = f.ev.begin(dst, "response.content_part.added")
	dst = f.appendResponseRef(dst, true, true)
	dst = append(dst, `,"part":{"type":"text","text":""}`...)
	return f.ev.end(dst, mark)
}

// item returns the output item with the given status (its text is f.text,
// written by appendItem).
func (f *RealtimeFormatter) item(status string) RealtimeItem {
	return RealtimeItem{ID: f.meta.ItemID, Role: "assistant", Status: status}
}

// appendItem appends the output item; full includes its text content.
func (f *RealtimeFormatter) appendItem(dst []byte, it *RealtimeItem, full bool) []byte {
	dst = append(dst, `{"id":`...)
	dst = codegen.AppendJSONStringS(dst, it.ID)
	dst = append(dst, `,"type":"message","object":"realtime.item","status":`...)
	dst = codegen.AppendJSONStringS(dst, it.Status)
	dst = append(dst, `,"role":"assistant","content":[`...)
	if full {
		dst = f.ev.appendOutputText(dst, f.text)
	}
	return append(dst, "]}"...)
}

// appendResponseRef appends "response_id", "item_id" (item), and
// "output_index":0 and "content_index":0 (content) as the item's events
// carry them.
func (f *RealtimeFormatter) appendResponseRef(dst []byte, item, content bool) []byte {
	if item && content {
		return append(dst, f.partRef...)
	}
	return f.appendRef(dst, item, content)
}

// appendRef renders what appendResponseRef appends.
func (f *RealtimeFormatter) appendRef(dst []byte, item, content bool) []byte {
	dst = append(dst, `,"response_id":`...)
	dst = codegen.AppendJSONStringS(dst, f.meta.ID)
	if item {
		dst = append(dst, `,"item_id":`...)
		dst = codegen.AppendJSONStringS(dst, f.meta.ItemID)
	}
	dst = append(dst, `,"output_index":0`...)
	if content {
		dst = append(dst, `,"content_index":0`...)
	}
	return dst
}

// AppendDelta appends one step's text as a text delta event. Output other
// than answer text (reasoning; tool calls, which a Realtime session never
// asks for) is not part of a Realtime response.
func (f *RealtimeFormatter) AppendDelta(dst []byte, d *engine.Delta) []byte {
	if d.Kind != engine.DeltaText || len(d.Text) == 0 || f.closed {
		return dst
	}
	f.text = append(f.text, d.Text...)
	typ := "response.output_text.delta"
	if f.ev.beta {
		typ = "response.text.delta"
	}
	dst, mark := f.ev.begin(dst, typ)
	dst = f.appendResponseRef(dst, true, true)
	dst = append(dst, `,"delta":`...)
	dst = codegen.AppendJSONString(dst, d.Text)
	return f.ev.end(dst, mark)
}

// AppendChoiceEnd closes the output item: "incomplete" when the response
// ran out of tokens, "completed" otherwise.
func (f *RealtimeFormatter) AppendChoiceEnd(dst []byte, e *engine.ChoiceEnd) []byte {
	status := RealtimeCompleted
	if e.FinishReason == engine.FinishLength || e.FinishReason == engine.FinishAbort {
		status = RealtimeIncomplete
	}
	return f.closeItem(dst, status)
}

// closeItem appends the events that finish the open output item, once.
func (f *RealtimeFormatter) closeItem(dst []byte, status string) []byte {
	if !f.opened || f.closed {
		return dst
	}
	f.closed, f.status = true, status
	typ := "response.output_text.done"
	if f.ev.beta {
		typ = "response.text.done"
	}
	dst, mark := f.ev.begin(dst, typ)
	dst = f.appendResponseRef(dst, true, true)
	dst = append(dst, `,"text":`...)
	dst = codegen.AppendJSONString(dst, f.text)
	dst = f.ev.end(dst, mark)

	dst, mark = f.ev.begin(dst, "response.content_part.done")
	dst = f.appendResponseRef(dst, true, true)
	dst = append(dst, `,"part":{"type":"text","text":`...)
	dst = codegen.AppendJSONString(dst, f.text)
	dst = f.ev.end(append(dst, '}'), mark)

	it := f.item(status)
	dst, mark = f.ev.begin(dst, "response.output_item.done")
	dst = f.appendResponseRef(dst, false, false)
	dst = append(dst, `,"item":`...)
	dst = f.appendItem(dst, &it, true)
	dst = f.ev.end(dst, mark)
	if f.meta.ConversationID != "" && !f.ev.beta {
		dst, mark = f.ev.begin(dst, "conversation.item.done")
		dst = append(dst, `,"previous_item_id":`...)
		dst = appendStringOrNull(dst, f.meta.PreviousItemID)
		dst = append(dst, `,"item":`...)
		dst = f.appendItem(dst, &it, true)
		dst = f.ev.end(dst, mark)
	}
	return dst
}

// AppendEnd appends response.done: completed, or incomplete when the
// response ran out of tokens (status_details.reason "max_output_tokens").
func (f *RealtimeFormatter) AppendEnd(dst []byte, res *engine.Result) []byte {
	status := RealtimeCompleted
	if len(res.Choices) > 0 && res.Choices[0].FinishReason == engine.FinishLength {
		status = RealtimeIncomplete
	}
	dst = f.closeItem(dst, status)
	return f.appendDone(dst, status, &res.Usage, nil)
}

// AppendError appends response.done with status failed and the error in
// status_details.
func (f *RealtimeFormatter) AppendError(dst []byte, err *engine.Error) []byte {
	dst = f.closeItem(dst, RealtimeIncomplete)
	return f.appendDone(dst, RealtimeFailed, nil, err)
}

// AppendCancelled appends the end of a response the client cancelled: the
// open item's .done events (status incomplete) and response.done with
// status cancelled (status_details.reason "client_cancelled") and the
// usage so far. The session calls it after the engine's final delivery.
func (f *RealtimeFormatter) AppendCancelled(dst []byte, u *engine.Usage) []byte {
	dst = f.closeItem(dst, RealtimeIncomplete)
	return f.appendDone(dst, RealtimeCancelled, u, nil)
}

// AppendFailed appends a response.done with status failed and no output,
// for a response the session must end itself (code the engine ran for it
// panicked): it touches none of the formatter's item state.
func (f *RealtimeFormatter) AppendFailed(dst []byte, err *engine.Error) []byte {
	dst, mark := f.ev.begin(dst, "response.done")
	dst = append(dst, `,"response":`...)
	f.opened, f.done = false, true
	dst = f.appendResponse(dst, RealtimeFailed, nil, err)
	return f.ev.end(dst, mark)
}

// appendDone appends response.done with the final response.
func (f *RealtimeFormatter) appendDone(dst []byte, status string, u *engine.Usage, err *engine.Error) []byte {
	f.done = true
	dst, mark := f.ev.begin(dst, "response.done")
	dst = append(dst, `,"response":`...)
	dst = f.appendResponse(dst, status, u, err)
	return f.ev.end(dst, mark)
}

// appendResponse appends the response object: its output is the item once
// added, usage null until the end.
func (f *RealtimeFormatter) appendResponse(dst []byte, status string, u *engine.Usage, err *engine.Error) []byte {
	dst = append(dst, `{"object":"realtime.response","id":`...)
	dst = codegen.AppendJSONStringS(dst, f.meta.ID)
	dst = append(dst, `,"status":"`...)
	dst = append(dst, status...)
	dst = append(dst, `","status_details":`...)
	switch status {
	case RealtimeIncomplete:
		dst = append(dst, `{"type":"incomplete","reason":"max_output_tokens"}`...)
	case RealtimeCancelled:
		dst = append(dst, `{"type":"cancelled","reason":"client_cancelled"}`...)
	case RealtimeFailed:
		ae := FromEngineError(err, "")
		dst = append(dst, `{"type":"failed","error":{"type":`...)
		dst = codegen.AppendJSONStringS(dst, ae.Kind.Type())
		dst = append(dst, `,"code":`...)
		dst = appendStringOrNull(dst, ae.code())
		dst = append(dst, `,"message":`...)
		dst = codegen.AppendJSONStringS(dst, ae.Message)
		dst = append(dst, "}}"...)
	default:
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"output":[`...)
	if f.opened && status != RealtimeInProgress {
		it := f.item(f.status)
		if it.Status == "" {
			it.Status = RealtimeIncomplete
		}
		dst = f.appendItem(dst, &it, true)
	}
	dst = append(dst, `],"conversation_id":`...)
	dst = appendStringOrNull(dst, f.meta.ConversationID)
	if f.ev.beta {
		dst = append(dst, `,"modalities":["text"],"temperature":`...)
		dst = strconv.AppendFloat(dst, f.meta.Temperature, 'g', -1, 64)
		dst = append(dst, `,"max_output_tokens":`...)
	} else {
		dst = append(dst, `,"output_modalities":["text"],"max_output_tokens":`...)
	}
	dst = appendMaxTokens(dst, f.meta.MaxOutputTokens)
	dst = append(dst, `,"usage":`...)
	if u == nil {
		dst = append(dst, "null"...)
	} else {
		dst = appendRealtimeUsage(dst, u)
	}
	return append(dst, `,"metadata":null}`...)
}

// appendRealtimeUsage appends a response's usage: all of it text.
func appendRealtimeUsage(dst []byte, u *engine.Usage) []byte {
	dst = append(dst, `{"total_tokens":`...)
	dst = codegen.AppendInt(dst, int64(u.TotalTokens()))
	dst = append(dst, `,"input_tokens":`...)
	dst = codegen.AppendInt(dst, int64(u.PromptTokens))
	dst = append(dst, `,"output_tokens":`...)
	dst = codegen.AppendInt(dst, int64(u.CompletionTokens))
	dst = append(dst, `,"input_token_details":{"text_tokens":`...)
	dst = codegen.AppendInt(dst, int64(u.PromptTokens))
	dst = append(dst, `,"audio_tokens":0,"image_tokens":0,"cached_tokens":`...)
	dst = codegen.AppendInt(dst, int64(u.CachedTokens))
	dst = append(dst, `,"cached_tokens_details":{"text_tokens":`...)
	dst = codegen.AppendInt(dst, int64(u.CachedTokens))
	dst = append(dst, `,"audio_tokens":0,"image_tokens":0}},"output_token_details":{"text_tokens":`...)
	dst = codegen.AppendInt(dst, int64(u.CompletionTokens))
	return append(dst, `,"audio_tokens":0}}`...)
}

// RealtimeTranscriptionFormatter writes the events of one transcription
// of committed input audio, framed on the engine side: one
// conversation.item.input_audio_transcription.delta per step, then
// .completed with the whole transcript and the usage (input audio tokens,
// output text tokens), or .failed.
type RealtimeTranscriptionFormatter struct {
	ev     RealtimeEvents
	itemID string
}

var _ engine.Formatter = (*RealtimeTranscriptionFormatter)(nil)

// Reset readies f for the transcription of item itemID.
func (f *RealtimeTranscriptionFormatter) Reset(itemID string, prefix []byte, framing codegen.Framing, beta bool) {
	f.itemID = itemID
	f.ev.Reset(prefix, framing, beta)
}

// ItemID returns the id of the item being transcribed.
func (f *RealtimeTranscriptionFormatter) ItemID() string { return f.itemID }

// AppendStart writes nothing: the item was announced at commit.
func (f *RealtimeTranscriptionFormatter) AppendStart(dst []byte, _ *engine.Start) []byte { return dst }

// AppendChoiceEnd writes nothing: .completed ends a transcription.
func (f *RealtimeTranscriptionFormatter) AppendChoiceEnd(dst []byte, _ *engine.ChoiceEnd) []byte {
	return dst
}

func (f *RealtimeTranscriptionFormatter) appendItemRef(dst []byte) []byte {
	dst = append(dst, `,"item_id":`...)
	dst = codegen.AppendJSONStringS(dst, f.itemID)
	return append(dst, `,"content_index":0`...)
}

// AppendDelta appends one step's transcript text.
func (f *RealtimeTranscriptionFormatter) AppendDelta(dst []byte, d *engine.Delta) []byte {
	if d.Kind != engine.DeltaText || len(d.Text) == 0 {
		return dst
	}
	dst, mark := f.ev.begin(dst, "conversation.item.input_audio_transcription.delta")
	dst = f.appendItemRef(dst)
	dst = append(dst, `,"delta":`...)
	dst = codegen.AppendJSONString(dst, d.Text)
	return f.ev.end(dst, mark)
}

// AppendEnd appends .completed with the transcript and the usage.
func (f *RealtimeTranscriptionFormatter) AppendEnd(dst []byte, res *engine.Result) []byte {
	var text string
	if len(res.Choices) > 0 {
		text = res.Choices[0].Text
	}
	u := &res.Usage
	dst, mark := f.ev.begin(dst, "conversation.item.input_audio_transcription.completed")
	dst = f.appendItemRef(dst)
	dst = append(dst, `,"transcript":`...)
	dst = codegen.AppendJSONStringS(dst, text)
	dst = append(dst, `,"usage":{"type":"tokens","total_tokens":`...)
	dst = codegen.AppendInt(dst, int64(u.TotalTokens()))
	dst = append(dst, `,"input_tokens":`...)
	dst = codegen.AppendInt(dst, int64(u.PromptTokens))
	dst = append(dst, `,"input_token_details":{"text_tokens":0,"audio_tokens":`...)
	dst = codegen.AppendInt(dst, int64(u.PromptTokens))
	dst = append(dst, `},"output_tokens":`...)
	dst = codegen.AppendInt(dst, int64(u.CompletionTokens))
	dst = append(dst, '}')
	return f.ev.end(dst, mark)
}

// AppendError appends .failed with the error.
func (f *RealtimeTranscriptionFormatter) AppendError(dst []byte, err *engine.Error) []byte {
	ae := FromEngineError(err, "")
	dst, mark := f.ev.begin(dst, "conversation.item.input_audio_transcription.failed")
	dst = f.appendItemRef(dst)
	dst = append(dst, `,"error":{"type":`...)
	dst = codegen.AppendJSONStringS(dst, ae.Kind.Type())
	dst = append(dst, `,"code":`...)
	dst = appendStringOrNull(dst, ae.code())
	dst = append(dst, `,"message":`...)
	dst = codegen.AppendJSONStringS(dst, ae.Message)
	dst = append(dst, `,"param":`...)
	dst = appendStringOrNull(dst, ae.Param)
	dst = append(dst, '}')
	return f.ev.end(dst, mark)
}
