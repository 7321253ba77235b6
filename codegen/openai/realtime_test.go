package openai

import (
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/realtime"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// wsPayloads splits server WebSocket frames (unmasked, final text frames,
// as codegen.FramingWebSocket writes them) into their payloads.
func wsPayloads(t testing.TB, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 2 || b[0] != 0x81 || b[1]&0x80 != 0 {
			t.Fatalf("not a final unmasked text frame: % x", b[:min(len(b), 16)])
		}
		n, h := int(b[1]), 2
		switch n {
		case 126:
			n, h = int(binary.BigEndian.Uint16(b[2:])), 4
		case 127:
			n, h = int(binary.BigEndian.Uint64(b[2:])), 10
		}
		if len(b) < h+n {
			t.Fatalf("frame of %d bytes cut at %d", n, len(b)-h)
		}
		out = append(out, b[h:h+n])
		b = b[h+n:]
	}
	return out
}

// rtEvent is what the tests read of every server event.
type rtEvent struct {
	Type    string `json:"type"`
	EventID string `json:"event_id"`
	raw     []byte
}

func rtEvents(t testing.TB, b []byte) []rtEvent {
	t.Helper()
	var evs []rtEvent
	for _, p := range wsPayloads(t, b) {
		var e rtEvent
		if err := json.Unmarshal(p, &e); err != nil {
			t.Fatalf("event is not JSON: %v: %s", err, p)
		}
		e.raw = p
		evs = append(evs, e)
	}
	return evs
}

// sdkDecode decodes a server event with the SDK's own type for it.
func sdkDecode(t testing.TB, raw []byte, v json.Unmarshaler) {
	t.Helper()
	if err := v.UnmarshalJSON(raw); err != nil {
		t.Fatalf("the SDK rejects %s: %v", raw, err)
	}
}

func rtTypes(evs []rtEvent) string {
	var s []string
	for _, e := range evs {
		s = append(s, e.Type)
	}
	return strings.Join(s, " ")
}

var rtMeta = RealtimeResponseMeta{ID: "resp_1", ConversationID: "conv_1", ItemID: "item_2", PreviousItemID: "item_1", Temperature: 0.8}

// driveRealtime runs a response through f as an engine does.
func driveRealtime(f *RealtimeFormatter, deltas []string, finish engine.FinishReason) []byte {
	b := f.AppendCreated(nil)
	b = f.AppendStart(b, &engine.Start{PromptTokens: 5})
	u := engine.Usage{PromptTokens: 5, CachedTokens: 2}
	for i, d := range deltas {
		u.CompletionTokens++
		b = f.AppendDelta(b, &engine.Delta{Kind: engine.DeltaText, First: i == 0, Text: []byte(d), Usage: &u})
	}
	b = f.AppendChoiceEnd(b, &engine.ChoiceEnd{FinishReason: finish, StopTokenID: -1, Usage: &u})
	return f.AppendEnd(b, &engine.Result{Choices: []engine.Choice{{Text: strings.Join(deltas, ""), FinishReason: finish}}, Usage: u})
}

func TestRealtimeFormatterGA(t *testing.T) {
	var f RealtimeFormatter
	f.Reset(rtMeta, []byte("event_s1r1_"), codegen.FramingWebSocket, false)
	evs := rtEvents(t, driveRealtime(&f, []string{"Hello", ", \"sea\"\n"}, engine.FinishStop))
	want := "response.created response.output_item.added conversation.item.added response.content_part.added " +
		"response.output_text.delta response.output_text.delta response.output_text.done response.content_part.done " +
		"response.output_item.done conversation.item.done response.done"
	if got := rtTypes(evs); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	seen := map[string]bool{}
	var text string
	for _, e := range evs {
		if !strings.HasPrefix(e.EventID, "event_s1r1_") || seen[e.EventID] {
			t.Fatalf("event_id %q not unique under the prefix", e.EventID)
		}
		seen[e.EventID] = true
		// The SDK decodes every event into its typed event.
		switch e.Type {
		case "response.output_text.delta":
			var d realtime.ResponseTextDeltaEvent
			sdkDecode(t, e.raw, &d)
			if d.ResponseID != "resp_1" || d.ItemID != "item_2" {
				t.Fatalf("delta refs: %s", e.raw)
			}
			text += d.Delta
		case "response.output_text.done":
			var d realtime.ResponseTextDoneEvent
			if sdkDecode(t, e.raw, &d); d.Text != text {
				t.Fatalf("done text %q, deltas %q", d.Text, text)
			}
		case "conversation.item.added":
			var a realtime.ConversationItemAdded
			sdkDecode(t, e.raw, &a)
			if a.PreviousItemID != "item_1" || a.Item.AsRealtimeConversationItemAssistantMessage().ID != "item_2" {
				t.Fatalf("item added: %s", e.raw)
			}
		case "response.done":
			var d realtime.ResponseDoneEvent
			sdkDecode(t, e.raw, &d)
			r := d.Response
			if r.Status != "completed" || r.Usage.InputTokens != 5 || r.Usage.OutputTokens != 2 ||
				r.Usage.TotalTokens != 7 || r.Usage.InputTokenDetails.CachedTokens != 2 {
				t.Fatalf("response.done: %s", e.raw)
			}
			it := r.Output[0].AsRealtimeConversationItemAssistantMessage()
			if len(r.Output) != 1 || it.ID != "item_2" {
				t.Fatalf("response.done output: %s", e.raw)
			}
			if got := it.Content[0].Text; got != text {
				t.Fatalf("response.done text %q, want %q", got, text)
			}
		}
	}
	if text != "Hello, \"sea\"\n" {
		t.Fatalf("deltas: %q", text)
	}
}

func TestRealtimeFormatterBeta(t *testing.T) {
	var f RealtimeFormatter
	f.Reset(rtMeta, []byte("event_b_"), codegen.FramingWebSocket, true)
	evs := rtEvents(t, driveRealtime(&f, []string{"a", "b"}, engine.FinishLength))
	want := "response.created response.output_item.added conversation.item.created response.content_part.added " +
		"response.text.delta response.text.delta response.text.done response.content_part.done " +
		"response.output_item.done response.done"
	if got := rtTypes(evs); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	done := string(evs[len(evs)-1].raw)
	for _, s := range []string{`"status":"incomplete"`, `"reason":"max_output_tokens"`, `"modalities":["text"]`, `{"type":"text","text":"ab"}`} {
		if !strings.Contains(done, s) {
			t.Errorf("beta response.done lacks %s: %s", s, done)
		}
	}
}

func TestRealtimeFormatterCancelledAndOutOfBand(t *testing.T) {
	var f RealtimeFormatter
	m := rtMeta
	m.ConversationID = ""
	f.Reset(m, []byte("e_"), codegen.FramingWebSocket, false)
	b := f.AppendCreated(nil)
	b = f.AppendStart(b, &engine.Start{})
	b = f.AppendDelta(b, &engine.Delta{Kind: engine.DeltaText, Text: []byte("par")})
	b = f.AppendCancelled(b, &engine.Usage{PromptTokens: 3, CompletionTokens: 1})
	evs := rtEvents(t, b)
	want := "response.created response.output_item.added response.content_part.added response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done response.done"
	if got := rtTypes(evs); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	var d realtime.ResponseDoneEvent
	sdkDecode(t, evs[len(evs)-1].raw, &d)
	r := d.Response
	if r.Status != "cancelled" || r.ConversationID != "" || r.Output[0].AsRealtimeConversationItemAssistantMessage().Status != "incomplete" ||
		!strings.Contains(string(evs[len(evs)-1].raw), `"status_details":{"type":"cancelled","reason":"client_cancelled"}`) {
		t.Fatalf("cancelled response.done: %s", evs[len(evs)-1].raw)
	}
}

func TestRealtimeEventsSessionAndErrors(t *testing.T) {
	var w RealtimeEvents
	w.Reset([]byte("event_s_"), codegen.FramingWebSocket, false)
	mt := RealtimeMaxTokens{}
	s := RealtimeSessionObject{Type: "realtime", Object: "realtime.session", ID: "sess_1", Model: "vajra-sim",
		OutputModalities: []string{"text"}, MaxOutputTokens: &mt, ToolChoice: "auto", Tools: []struct{}{}}
	b := w.AppendSession(nil, "session.created", &s)
	b = w.AppendError(b, "invalid_request_error", "unknown_event", `Unknown event type "x".`, "type", "ev_9")
	b = w.AppendItemCreated(b, "", &RealtimeItem{ID: "item_1", Role: "user", Text: "hi", Status: "completed"})
	b = w.AppendItemDeleted(b, "item_1")
	b = w.AppendCommitted(b, "", "item_2")
	b = w.AppendCleared(b)
	evs := rtEvents(t, b)
	if got, want := rtTypes(evs), "session.created error conversation.item.added conversation.item.done conversation.item.deleted input_audio_buffer.committed input_audio_buffer.cleared"; got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	for _, e := range evs {
		switch e.Type {
		case "session.created":
			var c realtime.SessionCreatedEvent
			sdkDecode(t, e.raw, &c)
			sess := c.Session.AsRealtimeSessionCreateRequest()
			if sess.Model != "vajra-sim" || len(sess.OutputModalities) != 1 || sess.MaxOutputTokens.OfInf != "inf" {
				t.Fatalf("session: %s", e.raw)
			}
		case "error":
			var x realtime.RealtimeErrorEvent
			sdkDecode(t, e.raw, &x)
			er := x.Error
			if er.EventID != "ev_9" || er.Code != "unknown_event" || er.Param != "type" {
				t.Fatalf("error: %s", e.raw)
			}
		}
	}
}

func TestRealtimeTranscriptionFormatter(t *testing.T) {
	var f RealtimeTranscriptionFormatter
	f.Reset("item_3", []byte("event_t_"), codegen.FramingWebSocket, false)
	b := f.AppendStart(nil, &engine.Start{})
	b = f.AppendDelta(b, &engine.Delta{Kind: engine.DeltaText, Text: []byte("one")})
	b = f.AppendDelta(b, &engine.Delta{Kind: engine.DeltaText, Text: []byte(" two")})
	b = f.AppendChoiceEnd(b, &engine.ChoiceEnd{})
	b = f.AppendEnd(b, &engine.Result{Choices: []engine.Choice{{Text: "one two"}}, Usage: engine.Usage{PromptTokens: 10, CompletionTokens: 2}})
	evs := rtEvents(t, b)
	var c realtime.ConversationItemInputAudioTranscriptionCompletedEvent
	sdkDecode(t, evs[2].raw, &c)
	u := c.Usage.AsConversationItemInputAudioTranscriptionCompletedEventUsageTranscriptTextUsageTokens()
	if c.Transcript != "one two" || c.ItemID != "item_3" || u.InputTokens != 10 || u.OutputTokens != 2 ||
		u.InputTokenDetails.AudioTokens != 10 {
		t.Fatalf("completed: %s", evs[2].raw)
	}
}

func TestDecodeRealtimeClientEvent(t *testing.T) {
	var ev RealtimeClientEvent
	if err := DecodeRealtimeClientEvent([]byte(`{"type":"session.update","event_id":"e1","session":{"type":"realtime",
		"instructions":"Be brief.","output_modalities":["text"],"max_output_tokens":"inf","audio":{"input":{"format":{"type":"audio/pcm","rate":24000}}},
		"voice":"alloy","tools":[]}}`), &ev); err != nil {
		t.Fatal(err)
	}
	c := RealtimeConfig{MaxOutputTokens: 9, Temperature: RealtimeDefaultTemperature}
	if _, pe := ev.Session.Apply(&c, false); pe != nil || c.Instructions != "Be brief." || c.MaxOutputTokens != 0 {
		t.Fatalf("apply: %v %+v", pe, c)
	}
	for _, bad := range []struct{ body, param string }{
		{`{"type":"session.update","session":{"output_modalities":["audio"]}}`, "session.output_modalities"},
		{`{"type":"session.update","session":{"max_output_tokens":0}}`, "session.max_output_tokens"},
		{`{"type":"session.update","session":{"max_response_output_tokens":"lots"}}`, "session.max_response_output_tokens"},
		{`{"type":"session.update","session":{"temperature":3}}`, "session.temperature"},
		{`{"type":"session.update","session":{"type":"transcription"}}`, "session.type"},
		{`{"type":"session.update","session":{"audio":{"input":{"format":{"type":"audio/pcmu"}}}}}`, "session.audio.input.format.type"},
	} {
		if err := DecodeRealtimeClientEvent([]byte(bad.body), &ev); err != nil {
			t.Fatalf("%s: %v", bad.body, err)
		}
		c := RealtimeConfig{}
		if _, pe := ev.Session.Apply(&c, false); pe == nil || pe.Param != bad.param {
			t.Errorf("%s: got %v, want an error on %s", bad.body, pe, bad.param)
		}
	}
	if err := DecodeRealtimeClientEvent([]byte(`{"type":"conversation.item.create","item":{"type":"message","role":"user",
		"content":[{"type":"input_text","text":"Hi "},{"type":"input_text","text":"there"}]}}`), &ev); err != nil {
		t.Fatal(err)
	}
	if m, pe := ev.Item.Message("item"); pe != nil || m.Role != "user" || m.Text != "Hi there" {
		t.Fatalf("message: %+v %v", m, pe)
	}
	if err := DecodeRealtimeClientEvent([]byte(`{"type":"conversation.item.create","item":{"type":"function_call"}}`), &ev); err != nil {
		t.Fatal(err)
	}
	if _, pe := ev.Item.Message("item"); pe == nil || pe.Param != "item.type" {
		t.Fatalf("function_call item: %v", pe)
	}
	if err := DecodeRealtimeClientEvent([]byte(`{"type":`), &ev); err == nil {
		t.Fatal("truncated JSON decoded")
	}
}

// TestRealtimeDeltaAllocs: a text delta costs no allocation once the
// formatter's buffers have grown.
func TestRealtimeDeltaAllocs(t *testing.T) {
	var f RealtimeFormatter
	f.Reset(rtMeta, []byte("event_s1r1_"), codegen.FramingWebSocket, false)
	buf := f.AppendStart(f.AppendCreated(nil), &engine.Start{})
	d := engine.Delta{Kind: engine.DeltaText, Text: []byte(" token")}
	for range 64 {
		buf = f.AppendDelta(buf[:0], &d)
	}
	f.text = make([]byte, 0, 1<<20)
	if n := testing.AllocsPerRun(1000, func() { buf = f.AppendDelta(buf[:0], &d) }); n != 0 {
		t.Fatalf("AppendDelta: %v allocations per delta", n)
	}
}

func BenchmarkRealtimeDelta(b *testing.B) {
	var f RealtimeFormatter
	f.Reset(rtMeta, []byte("event_s1r1_"), codegen.FramingWebSocket, false)
	buf := f.AppendStart(f.AppendCreated(nil), &engine.Start{})
	d := engine.Delta{Kind: engine.DeltaText, Text: []byte(" token")}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%4096 == 0 {
			f.text = f.text[:0]
		}
		buf = f.AppendDelta(buf[:0], &d)
	}
}
