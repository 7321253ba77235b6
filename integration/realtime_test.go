package integration_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/realtime"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/internal/eventually"
)

// The Realtime API (GET /v1/realtime) through the real server and its
// WebSocket transport: the official client (openai-go's
// client.Realtime.Connect) for conversations, cancellation, transcription
// and errors; a raw coder/websocket client for the beta names, the golden
// bytes and disconnects; a hand-written client that allocates nothing for
// the per-delta allocation claim.

func rtConnect(t *testing.T, base string, query ...string) *realtime.RealtimeConnection {
	t.Helper()
	client := newClient(base)
	var opts []option.RequestOption
	for i := 0; i+1 < len(query); i += 2 {
		opts = append(opts, option.WithQuery(query[i], query[i+1]))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := client.Realtime.Connect(ctx, realtime.RealtimeConnectionOptions{}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Abort() })
	return conn
}

// rtRecv receives events until one of type typ (within 10 s) and returns
// all of them, typ's last.
func rtRecv(t *testing.T, conn *realtime.RealtimeConnection, typ string) []realtime.RealtimeServerEventUnion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var evs []realtime.RealtimeServerEventUnion
	for {
		ev, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("waiting for %s after %v: %v", typ, rtTypes(evs), err)
		}
		evs = append(evs, ev)
		if ev.Type == typ {
			return evs
		}
	}
}

func rtTypes(evs []realtime.RealtimeServerEventUnion) string {
	var s []string
	for _, e := range evs {
		s = append(s, e.Type)
	}
	return strings.Join(s, " ")
}

func rtSend(t *testing.T, conn *realtime.RealtimeConnection, ev realtime.RealtimeClientEventUnionParam) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := conn.Send(ctx, ev); err != nil {
		t.Fatal(err)
	}
}

func rtSendRaw(t *testing.T, conn *realtime.RealtimeConnection, raw string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := conn.SendRaw(ctx, json.RawMessage(raw)); err != nil {
		t.Fatal(err)
	}
}

func userItem(text string) realtime.RealtimeClientEventUnionParam {
	return realtime.RealtimeClientEventUnionParam{OfConversationItemCreate: &realtime.ConversationItemCreateEventParam{
		Item: realtime.ConversationItemUnionParam{OfRealtimeUserMessageItem: &realtime.RealtimeConversationItemUserMessageParam{
			Content: []realtime.RealtimeConversationItemUserMessageContentParam{{Type: "input_text", Text: param.NewOpt(text)}},
		}},
	}}
}

func responseCreate(maxTokens int64) realtime.RealtimeClientEventUnionParam {
	p := realtime.RealtimeResponseCreateParams{OutputModalities: []string{"text"}}
	if maxTokens > 0 {
		p.MaxOutputTokens.OfInt = param.NewOpt(maxTokens)
	} else {
		p.MaxOutputTokens.OfInf = "inf"
	}
	return realtime.RealtimeClientEventUnionParam{OfResponseCreate: &realtime.ResponseCreateEventParam{Response: p}}
}

func TestRealtimeSDKConversation(t *testing.T) {
	_, _, base := startServer(t, nil)
	conn := rtConnect(t, base, "model", "vajra-sim")
	created := rtRecv(t, conn, "session.created")[0]
	sess := created.OfSessionCreatedEvent.Session.AsRealtimeSessionCreateRequest()
	if sess.Model != "vajra-sim" || sess.Type != "realtime" || len(sess.OutputModalities) != 1 || sess.OutputModalities[0] != "text" {
		t.Fatalf("session.created: %s", created.RawJSON())
	}
	rtSend(t, conn, realtime.RealtimeClientEventUnionParam{OfSessionUpdate: &realtime.SessionUpdateEventParam{
		Session: realtime.SessionUpdateEventSessionUnionParam{OfRealtime: &realtime.RealtimeSessionCreateRequestParam{
			Instructions: param.NewOpt("Be brief."), OutputModalities: []string{"text"},
		}},
	}})
	up := rtRecv(t, conn, "session.updated")
	if got := up[0].OfSessionUpdatedEvent.Session.AsRealtimeSessionCreateRequest().Instructions; got != "Be brief." {
		t.Fatalf("session.updated instructions %q: %s", got, up[0].RawJSON())
	}
	rtSend(t, conn, userItem("Tell me about the sea."))
	items := rtRecv(t, conn, "conversation.item.done")
	if rtTypes(items) != "conversation.item.added conversation.item.done" {
		t.Fatalf("item events: %s", rtTypes(items))
	}
	userID := items[0].OfConversationItemAdded.Item.AsRealtimeConversationItemUserMessage().ID
	rtSend(t, conn, responseCreate(12))
	evs := rtRecv(t, conn, "response.done")
	var head, tail []string
	var text string
	for _, e := range evs {
		switch e.Type {
		case "response.output_text.delta":
			text += e.OfResponseTextDeltaEvent.Delta
		case "response.output_text.done":
			if e.OfResponseTextDoneEvent.Text != text {
				t.Fatalf("output_text.done %q, deltas %q", e.OfResponseTextDoneEvent.Text, text)
			}
			tail = append(tail, e.Type)
		default:
			if text == "" {
				head = append(head, e.Type)
			} else {
				tail = append(tail, e.Type)
			}
		}
	}
	if got, want := strings.Join(head, " "), "response.created response.output_item.added conversation.item.added response.content_part.added"; got != want {
		t.Fatalf("response opens with %s, want %s", got, want)
	}
	if got, want := strings.Join(tail, " "), "response.output_text.done response.content_part.done response.output_item.done conversation.item.done response.done"; got != want {
		t.Fatalf("response ends with %s, want %s", got, want)
	}
	done := evs[len(evs)-1].OfResponseDoneEvent.Response
	out := done.Output[0].AsRealtimeConversationItemAssistantMessage()
	if text == "" || out.Content[0].Text != text || done.Usage.OutputTokens == 0 || done.Usage.OutputTokens > 12 ||
		done.Usage.InputTokens == 0 || done.Usage.TotalTokens != done.Usage.InputTokens+done.Usage.OutputTokens {
		t.Fatalf("response.done: %s", evs[len(evs)-1].RawJSON())
	}
	if st := string(done.Status); st != "completed" && st != "incomplete" {
		t.Fatalf("status %s", st)
	}
	added := evs[2].OfConversationItemAdded
	if added.PreviousItemID != userID || added.Item.AsRealtimeConversationItemAssistantMessage().ID != out.ID {
		t.Fatalf("assistant item added after %q (want %q): %s", added.PreviousItemID, userID, evs[2].RawJSON())
	}
	// Every event has a unique event_id.
	seen := map[string]bool{}
	for _, e := range append(append(items, evs...), created) {
		id := gjsonEventID(e.RawJSON())
		if id == "" || seen[id] {
			t.Fatalf("event_id %q missing or repeated in %s", id, e.RawJSON())
		}
		seen[id] = true
	}
	// The assistant item is in the conversation: the next response reads
	// it, and a user item can be inserted before it.
	rtSend(t, conn, realtime.RealtimeClientEventUnionParam{OfConversationItemDelete: &realtime.ConversationItemDeleteEventParam{ItemID: out.ID}})
	if del := rtRecv(t, conn, "conversation.item.deleted"); del[0].OfConversationItemDeletedEvent.ItemID != out.ID {
		t.Fatalf("deleted: %s", del[0].RawJSON())
	}
}

func gjsonEventID(raw string) string {
	var v struct {
		EventID string `json:"event_id"`
	}
	_ = json.Unmarshal([]byte(raw), &v)
	return v.EventID
}

// TestRealtimeSDKCancel: response.cancel aborts the engine session; the
// response ends with response.done status cancelled.
func TestRealtimeSDKCancel(t *testing.T) {
	_, obs, base := startServer(t, func(c *vajra.Config) { c.Sim.ITL = 5 * time.Millisecond })
	conn := rtConnect(t, base, "model", "vajra-sim")
	rtRecv(t, conn, "session.created")
	rtSendRaw(t, conn, `{"type":"response.cancel","event_id":"c0"}`)
	if e := rtRecv(t, conn, "error")[0].OfRealtimeErrorEvent.Error; e.Code != "response_cancel_not_active" || e.EventID != "c0" {
		t.Fatalf("cancel with nothing active: %+v", e)
	}
	rtSend(t, conn, userItem("Go on and on."))
	rtSend(t, conn, responseCreate(0))
	rtRecv(t, conn, "response.output_text.delta")
	rtSendRaw(t, conn, `{"type":"response.create","event_id":"second"}`)
	if e := rtRecv(t, conn, "error"); e[len(e)-1].OfRealtimeErrorEvent.Error.Code != "conversation_already_has_active_response" ||
		e[len(e)-1].OfRealtimeErrorEvent.Error.EventID != "second" {
		t.Fatalf("second response.create: %s", e[len(e)-1].RawJSON())
	}
	rtSend(t, conn, realtime.RealtimeClientEventUnionParam{OfResponseCancel: &realtime.ResponseCancelEventParam{}})
	evs := rtRecv(t, conn, "response.done")
	d := evs[len(evs)-1]
	if d.OfResponseDoneEvent.Response.Status != "cancelled" || !strings.Contains(d.RawJSON(), `"reason":"client_cancelled"`) {
		t.Fatalf("cancelled response: %s", d.RawJSON())
	}
	waitEngineIdle(t, obs)
}

// waitEngineIdle polls the engine's running count until it drops to 0.
func waitEngineIdle(t *testing.T, eng engine.Engine) {
	t.Helper()
	eventually.True(t, "the engine runs no session", func() bool { return eng.Stats().Running == 0 })
}

func TestRealtimeSDKTranscription(t *testing.T) {
	_, _, base := startServer(t, nil)
	conn := rtConnect(t, base, "intent", "transcription")
	created := rtRecv(t, conn, "session.created")[0]
	ts := created.OfSessionCreatedEvent.Session.AsRealtimeTranscriptionSessionCreateRequest()
	if ts.Type != "transcription" || ts.Audio.Input.Format.Rate != 24000 {
		t.Fatalf("session.created: %s", created.RawJSON())
	}
	rtSend(t, conn, realtime.RealtimeClientEventUnionParam{OfInputAudioBufferCommit: &realtime.InputAudioBufferCommitEventParam{EventID: param.NewOpt("empty")}})
	if e := rtRecv(t, conn, "error")[0].OfRealtimeErrorEvent.Error; e.Code != "input_audio_buffer_commit_empty" || e.EventID != "empty" {
		t.Fatalf("empty commit: %+v", e)
	}
	pcm := make([]byte, 2*24000*2) // 2 s of PCM16
	for i := range pcm {
		pcm[i] = byte(i*31 + i/513)
	}
	for _, chunk := range [][]byte{pcm[:len(pcm)/3], pcm[len(pcm)/3:]} {
		rtSend(t, conn, realtime.RealtimeClientEventUnionParam{OfInputAudioBufferAppend: &realtime.InputAudioBufferAppendEventParam{
			Audio: base64.StdEncoding.EncodeToString(chunk)}})
	}
	rtSend(t, conn, realtime.RealtimeClientEventUnionParam{OfInputAudioBufferCommit: &realtime.InputAudioBufferCommitEventParam{}})
	evs := rtRecv(t, conn, "conversation.item.input_audio_transcription.completed")
	committed := evs[0].OfInputAudioBufferCommittedEvent
	if evs[0].Type != "input_audio_buffer.committed" || evs[1].Type != "conversation.item.added" || evs[2].Type != "conversation.item.done" {
		t.Fatalf("commit events: %s", rtTypes(evs))
	}
	var text string
	deltas := 0
	for _, e := range evs {
		if e.Type == "conversation.item.input_audio_transcription.delta" {
			text += e.OfConversationItemInputAudioTranscriptionDeltaEvent.Delta
			deltas++
		}
	}
	c := evs[len(evs)-1].OfConversationItemInputAudioTranscriptionCompletedEvent
	u := c.Usage.AsConversationItemInputAudioTranscriptionCompletedEventUsageTranscriptTextUsageTokens()
	// 2 s of audio: 8 transcript tokens (sim.TranscriptTokensPerSecond),
	// 20 audio tokens.
	if c.Transcript != text || c.ItemID != committed.ItemID || deltas < 2 || u.OutputTokens != 8 ||
		u.InputTokens != 20 || u.InputTokenDetails.AudioTokens != 20 {
		t.Fatalf("transcript %q over %d deltas (%q): %s", c.Transcript, deltas, text, evs[len(evs)-1].RawJSON())
	}
	rtSend(t, conn, realtime.RealtimeClientEventUnionParam{OfInputAudioBufferClear: &realtime.InputAudioBufferClearEventParam{}})
	rtRecv(t, conn, "input_audio_buffer.cleared")
}

// TestRealtimeSDKBadEvents: each bad client event gets an error event
// naming the offending event's event_id.
func TestRealtimeSDKBadEvents(t *testing.T) {
	_, _, base := startServer(t, nil)
	conn := rtConnect(t, base, "model", "vajra-sim")
	rtRecv(t, conn, "session.created")
	for _, tc := range []struct{ raw, code, param, id string }{
		{`{"type":"no.such.event","event_id":"e1"}`, "invalid_value", "type", "e1"},
		{`{"event_id":"e2","type":"session.update","session":{"output_modalities":["audio"]}}`, "unsupported_value", "session.output_modalities", "e2"},
		{`{"event_id":"e3","type":"session.update","session":{"max_output_tokens":-1}}`, "invalid_value", "session.max_output_tokens", "e3"},
		{`{"event_id":"e4","type":"conversation.item.create","item":{"type":"function_call","name":"f"}}`, "unsupported_value", "item.type", "e4"},
		{`{"event_id":"e5","type":"response.create","response":{"conversation":"sideways"}}`, "invalid_value", "response.conversation", "e5"},
		{`{"event_id":"e6","type":"conversation.item.delete","item_id":"nope"}`, "item_not_found", "item_id", "e6"},
		{`{"event_id":"e7","type":"session.update","session":{"temperature":"hot"}}`, "invalid_type", "session.temperature", "e7"},
	} {
		rtSendRaw(t, conn, tc.raw)
		e := rtRecv(t, conn, "error")[0].OfRealtimeErrorEvent.Error
		if e.Code != tc.code || e.Param != tc.param || e.EventID != tc.id || e.Type != "invalid_request_error" {
			t.Errorf("%s: got %+v", tc.raw, e)
		}
	}
}

// rawRT is a coder/websocket client of the Realtime endpoint.
type rawRT struct {
	t *testing.T
	c *websocket.Conn
}

func rawRealtime(t *testing.T, base, query string, beta bool) *rawRT {
	t.Helper()
	h := http.Header{}
	if beta {
		h.Set("OpenAI-Beta", "realtime=v1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(base, "http://", "ws://", 1)+"/v1/realtime?"+query, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(1 << 20)
	t.Cleanup(func() { _ = c.CloseNow() })
	return &rawRT{t, c}
}

func (r *rawRT) send(msg string) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		r.t.Fatal(err)
	}
}

// until reads messages up to and including the first of type typ.
func (r *rawRT) until(typ string) [][]byte {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out [][]byte
	for {
		_, b, err := r.c.Read(ctx)
		if err != nil {
			r.t.Fatalf("waiting for %s: %v", typ, err)
		}
		out = append(out, b)
		var v struct{ Type string }
		if err := json.Unmarshal(b, &v); err != nil {
			r.t.Fatalf("not JSON: %s", b)
		}
		if v.Type == typ {
			return out
		}
	}
}

func typesOf(msgs [][]byte) string {
	var s []string
	for _, m := range msgs {
		var v struct{ Type string }
		_ = json.Unmarshal(m, &v)
		s = append(s, v.Type)
	}
	return strings.Join(s, " ")
}

func TestRealtimeBetaNames(t *testing.T) {
	_, _, base := startServer(t, nil)
	r := rawRealtime(t, base, "model=vajra-sim", true)
	created := r.until("session.created")[0]
	if !bytes.Contains(created, []byte(`"modalities":["text"]`)) || bytes.Contains(created, []byte(`"output_modalities"`)) {
		t.Fatalf("beta session.created: %s", created)
	}
	r.send(`{"type":"session.update","session":{"modalities":["text"],"max_response_output_tokens":4,"temperature":0.7}}`)
	up := r.until("session.updated")[0]
	if !bytes.Contains(up, []byte(`"max_response_output_tokens":4`)) || !bytes.Contains(up, []byte(`"temperature":0.7`)) {
		t.Fatalf("beta session.updated: %s", up)
	}
	r.send(`{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"Hi."}]}}`)
	if got := typesOf(r.until("conversation.item.created")); got != "conversation.item.created" {
		t.Fatalf("beta item events: %s", got)
	}
	r.send(`{"type":"response.create","response":{"modalities":["text"]}}`)
	got := typesOf(r.until("response.done"))
	want := regexp.MustCompile(`^response\.created response\.output_item\.added conversation\.item\.created response\.content_part\.added ` +
		`(response\.text\.delta )+response\.text\.done response\.content_part\.done response\.output_item\.done response\.done$`)
	if !want.MatchString(got) {
		t.Fatalf("beta response events: %s", got)
	}
}

// TestRealtimeDisconnectFreesSlot: a client that drops its TCP connection
// (or closes the WebSocket) mid-response gets its engine session aborted
// within milliseconds: the engine's final Result is an abort, not the
// response's end (which is at least 16 steps of 20 ms away), and the
// engine's running count drops to 0.
func TestRealtimeDisconnectFreesSlot(t *testing.T) {
	for _, how := range []string{"tcp", "close"} {
		t.Run(how, func(t *testing.T) {
			_, obs, base := startServer(t, func(c *vajra.Config) { c.Sim.ITL = 20 * time.Millisecond })
			r := rawRealtime(t, base, "model=vajra-sim", false)
			r.until("session.created")
			r.send(`{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"Talk."}]}}`)
			r.send(`{"type":"response.create","response":{"max_output_tokens":"inf"}}`)
			r.until("response.output_text.delta")
			if obs.Stats().Running != 1 {
				t.Fatalf("engine running %d, want 1", obs.Stats().Running)
			}
			start := time.Now()
			if how == "tcp" {
				_ = r.c.CloseNow()
			} else {
				go func() { _ = r.c.Close(websocket.StatusNormalClosure, "bye") }()
			}
			select {
			case final := <-obs.finals:
				if final.Err == nil || final.Err.Kind != engine.KindAborted {
					t.Fatalf("the response was not aborted: final %+v", final)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("no final Result within 2 s of the disconnect")
			}
			took := time.Since(start)
			waitEngineIdle(t, obs)
			t.Logf("engine session aborted %v after the disconnect", took)
			if took > 250*time.Millisecond {
				t.Errorf("the abort took %v", took)
			}
		})
	}
}

// goldenRealtimeIDs matches the per-session ids of a Realtime stream.
var goldenRealtimeIDs = regexp.MustCompile(`:"(event_|item_|resp_|conv_|sess_)[A-Za-z0-9_-]+"`)

// TestGoldenRealtime pins a fixed (temperature 0) Realtime response's
// events byte for byte, one event per line, ids normalised as the other
// golden streams'. Rewrite with -update.
func TestGoldenRealtime(t *testing.T) {
	_, _, base := startServer(t, nil)
	r := rawRealtime(t, base, "model=vajra-sim", false)
	var all [][]byte
	all = append(all, r.until("session.created")...)
	r.send(`{"type":"session.update","session":{"type":"realtime","instructions":"Be brief.","max_output_tokens":6,"temperature":0}}`)
	all = append(all, r.until("session.updated")...)
	r.send(`{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"Tell me about the sea."}]}}`)
	all = append(all, r.until("conversation.item.done")...)
	r.send(`{"type":"response.create"}`)
	all = append(all, r.until("response.done")...)
	got := goldenRealtimeIDs.ReplaceAll(bytes.Join(all, []byte("\n")), []byte(`:"${1}ID"`))
	got = append(got, '\n')
	path := filepath.Join("testdata", "golden", "realtime.jsonl")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("events differ from %s:\n got: %s\nwant: %s", path, got, want)
	}
}

// startRealtimeStream opens a Realtime response on a real server whose
// engine the caller plays (handEngine), over a hand-written WebSocket
// client that allocates nothing per frame, and returns step, which makes
// the engine format and deliver one text delta and waits until the client
// has read its frame, and frame, the last frame read.
func startRealtimeStream(tb testing.TB) (step func(), frame func() []byte) {
	tb.Helper()
	eng := &handEngine{started: make(chan handSession, 1)}
	conn := hotServer(tb, func(c *vajra.Config) { c.Engine = eng; c.KeepGOMAXPROCS = true })
	ws := upgradeRaw(tb, conn, "/v1/realtime?model=vajra-sim")
	readFrame := ws.read
	readUntil := func(typ string) {
		for {
			if f := readFrame(); bytes.HasPrefix(f, []byte(`{"type":"`+typ+`"`)) {
				return
			}
		}
	}
	readUntil("session.created")
	writeClientFrame(tb, conn, `{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}`)
	tok := []byte(" hello")
	ids := []int{42}
	var d engine.Delta // reused, as the engine does
	var hs handSession
	var last []byte
	frames := make([]byte, 0, 4096)
	first := true
	open := func() {
		writeClientFrame(tb, conn, `{"type":"response.create"}`)
		hs = <-eng.started
		readUntil("response.created")
		frames = hs.req.Formatter.AppendStart(frames[:0], &engine.Start{})
		hs.sink.Deliver(frames, nil)
		readUntil("response.content_part.added")
		first = true
	}
	end := func() {
		final := &engine.Result{Choices: []engine.Choice{{FinishReason: engine.FinishStop}}}
		frames = hs.req.Formatter.AppendEnd(frames[:0], final)
		hs.sink.Deliver(frames, final)
	}
	step = func() {
		d = engine.Delta{Text: tok, TokenIDs: ids, First: first}
		first = false
		frames = hs.req.Formatter.AppendDelta(frames[:0], &d)
		hs.sink.Deliver(frames, nil)
		for range countFrames(frames) {
			last = readFrame()
		}
	}
	frame = func() []byte { return last }
	// A first, long response grows the session's buffers (the
	// formatter's copy of the text among them) as a session's earlier
	// responses do; the caller's steps are the next response's, the
	// steady state of a session.
	open()
	for i := 0; i < 4000; i++ {
		step()
	}
	end()
	readUntil("response.done")
	open()
	tb.Cleanup(end)
	for i := 0; i < 101; i++ { // the first delta, then warm the buffers up
		step()
	}
	if !bytes.Contains(frame(), []byte(`"type":"response.output_text.delta"`)) || !bytes.Contains(frame(), []byte(`"delta":" hello"`)) {
		tb.Fatalf("unexpected frame %q", frame())
	}
	return step, frame
}

// writeClientFrame writes msg as one masked text frame (mask key 0: the
// payload goes as is).
func writeClientFrame(tb testing.TB, conn net.Conn, msg string) {
	tb.Helper()
	var hdr []byte
	switch n := len(msg); {
	case n < 126:
		hdr = []byte{0x81, 0x80 | byte(n)}
	default:
		hdr = []byte{0x81, 0x80 | 126, byte(n >> 8), byte(n)}
	}
	hdr = append(hdr, 0, 0, 0, 0)
	if _, err := conn.Write(append(hdr, msg...)); err != nil {
		tb.Fatal(err)
	}
}

// TestRealtimeDeltaAllocs holds the per-delta claim for the Realtime API:
// a text delta through the real server (the engine-side formatter with its
// event_id, the sink, the session actor, the WebSocket connection's outbox
// and write) allocates nothing in steady state.
func TestRealtimeDeltaAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates; make test runs the Allocs tests again without -race")
	}
	step, _ := startRealtimeStream(t)
	got := processAllocsPerRun(2000, step)
	t.Logf("%.4f allocations per delta", got)
	if got > maxTokenAllocs {
		t.Errorf("a Realtime delta allocates %.4f times, want 0 (at most %v)", got, maxTokenAllocs)
	}
}

// BenchmarkRealtimeDelta measures one Realtime text delta through the whole
// hot path of a real server (see TestRealtimeDeltaAllocs), until the client
// has read its frame.
func BenchmarkRealtimeDelta(b *testing.B) {
	step, frame := startRealtimeStream(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(frame())))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		step()
	}
	b.StopTimer()
}

// TestRealtimeUnknownModel: a session for a model the server does not
// serve is refused after the upgrade: an error event, then close 1008.
func TestRealtimeUnknownModel(t *testing.T) {
	_, _, base := startServer(t, nil)
	conn := rtConnect(t, base, "model", "gpt-nope")
	if e := rtRecv(t, conn, "error")[0].OfRealtimeErrorEvent.Error; e.Code != "model_not_found" || e.Param != "model" {
		t.Fatalf("error: %+v", e)
	}
	r := rawRealtime(t, base, "model=gpt-nope", false)
	r.until("error")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, err := r.c.Read(ctx)
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("after the error: %v, want a close with 1008", err)
	}
}
