package actors

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/sim"
	"github.com/vajra-go/vajra/internal/eventually"
)

// These tests drive a real Realtime session actor over the embedded engine
// through a fake WSConn that records the frames the session sends; the
// end-to-end tests over the real WebSocket transport and the official
// client are in integration/.

// rtFakeWS is a WSConn that decodes and records every frame sent.
type rtFakeWS struct {
	t      *testing.T
	mu     sync.Mutex
	events []rtEv
	code   int // close code, 0 while open
	wake   chan struct{}
}

type rtEv struct {
	Type    string `json:"type"`
	EventID string `json:"event_id"`
	Delta   string `json:"delta"`
	Text    string `json:"text"`
	ItemID  string `json:"item_id"`
	Error   *struct {
		Type, Code, Message, Param string
		EventID                    string `json:"event_id"`
	} `json:"error"`
	Response *struct {
		ID            string          `json:"id"`
		Status        string          `json:"status"`
		StatusDetails json.RawMessage `json:"status_details"`
		Usage         *struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	} `json:"response"`
	Session    json.RawMessage `json:"session"`
	Transcript string          `json:"transcript"`
	raw        string
}

func newRTFakeWS(t *testing.T) *rtFakeWS { return &rtFakeWS{t: t, wake: make(chan struct{}, 1)} }

func (c *rtFakeWS) Send(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(p) > 0 {
		if p[0] != 0x81 {
			c.t.Errorf("not a text frame: % x", p[:min(8, len(p))])
			return
		}
		n, h := int(p[1]), 2
		switch n {
		case 126:
			n, h = int(binary.BigEndian.Uint16(p[2:])), 4
		case 127:
			n, h = int(binary.BigEndian.Uint64(p[2:])), 10
		}
		var e rtEv
		if err := json.Unmarshal(p[h:h+n], &e); err != nil {
			c.t.Errorf("event is not JSON: %v: %s", err, p[h:h+n])
		}
		e.raw = string(p[h : h+n])
		c.events = append(c.events, e)
		p = p[h+n:]
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *rtFakeWS) Close(code int, _ string) {
	c.mu.Lock()
	c.code = code
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// waitFor waits until an event of type typ arrived after the first from
// events, and returns the events from `from` up to and including it. It
// fails when the session stalls, 10 s without an event, or after 2 min in
// all: a session still working through thousands of queued messages
// (under the race detector, on a loaded machine) is not stalled.
func (c *rtFakeWS) waitFor(from int, typ string) []rtEv {
	c.t.Helper()
	stall := time.NewTimer(10 * time.Second)
	defer stall.Stop()
	limit := time.After(2 * time.Minute)
	for scanned := from; ; {
		c.mu.Lock()
		for i := scanned; i < len(c.events); i++ {
			if c.events[i].Type == typ {
				out := append([]rtEv(nil), c.events[from:i+1]...)
				c.mu.Unlock()
				return out
			}
		}
		scanned = max(scanned, len(c.events))
		c.mu.Unlock()
		select {
		case <-c.wake:
			stall.Reset(10 * time.Second)
			continue
		case <-stall.C:
		case <-limit:
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.t.Fatalf("no %s event (10 s without any, or 2 min in all); got %d events: %v", typ, len(c.events), types(c.events))
	}
}

func (c *rtFakeWS) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events)
}

func types(evs []rtEv) []string {
	var s []string
	for _, e := range evs {
		s = append(s, e.Type)
	}
	return s
}

// rtServer is a Sessions over the embedded engine.
func rtServer(t *testing.T, itl time.Duration) (*Sessions, *sim.Engine) {
	return rtServerLen(t, itl, 0)
}

func rtServerLen(t *testing.T, itl time.Duration, maxModelLen int) (*Sessions, *sim.Engine) {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.ITL, cfg.PrefillTPS = itl, 0
	if maxModelLen > 0 {
		cfg.MaxModelLen = maxModelLen
	}
	eng, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSessions(Config{Engine: eng, Models: []string{"vajra-sim"}, Logger: zap.NewNop(), Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		eng.Close()
		s.Close()
	})
	return s, eng
}

// rtDial starts a realtime session on a fake connection.
func rtDial(t *testing.T, s *Sessions, query string, beta bool) (*rtFakeWS, WSHandle) {
	c := newRTFakeWS(t)
	h := s.StartWS(c, &WSRequest{Endpoint: EndpointRealtime, RequestID: "req1", Query: query, Beta: beta, Arrival: time.Now()})
	return c, h
}

func TestRealtimeSessionConversation(t *testing.T) {
	s, _ := rtServer(t, 0)
	c, h := rtDial(t, s, "model=vajra-sim", false)
	defer h.ConnClosed()
	c.waitFor(0, "session.created")
	h.Message([]byte(`{"type":"session.update","event_id":"u1","session":{"type":"realtime","instructions":"Be brief.","max_output_tokens":5,"temperature":0}}`))
	up := c.waitFor(1, "session.updated")
	if !strings.Contains(up[0].raw, `"instructions":"Be brief."`) || !strings.Contains(up[0].raw, `"max_output_tokens":5`) {
		t.Fatalf("session.updated: %s", up[0].raw)
	}
	h.Message([]byte(`{"type":"conversation.item.create","event_id":"c1","item":{"id":"u_1","type":"message","role":"user","content":[{"type":"input_text","text":"Tell me about the sea."}]}}`))
	n := c.count()
	c.waitFor(n-1, "conversation.item.done")
	n = c.count()
	h.Message([]byte(`{"type":"response.create","event_id":"r1"}`))
	evs := c.waitFor(n, "response.done")
	var text string
	for _, e := range evs {
		if e.Type == "response.output_text.delta" {
			text += e.Delta
		}
	}
	done := evs[len(evs)-1].Response
	if done.Status != "incomplete" || done.Usage == nil || done.Usage.OutputTokens != 5 || text == "" {
		t.Fatalf("response: %v\n%s", types(evs), evs[len(evs)-1].raw)
	}
	// The assistant item joined the conversation: a second response
	// sees it (a longer prompt).
	n = c.count()
	h.Message([]byte(`{"type":"response.create"}`))
	evs2 := c.waitFor(n, "response.done")
	if u := evs2[len(evs2)-1].Response.Usage; u.InputTokens <= done.Usage.InputTokens {
		t.Fatalf("second response's prompt %d tokens, first %d: the assistant item is not in the conversation", u.InputTokens, done.Usage.InputTokens)
	}
	// Event ids are unique across the session.
	seen := map[string]bool{}
	for _, e := range append(evs, evs2...) {
		if e.EventID == "" || seen[e.EventID] {
			t.Fatalf("event_id %q missing or repeated", e.EventID)
		}
		seen[e.EventID] = true
	}
}

func TestRealtimeSessionErrors(t *testing.T) {
	s, _ := rtServer(t, 0)
	c, h := rtDial(t, s, "model=vajra-sim", false)
	defer h.ConnClosed()
	c.waitFor(0, "session.created")
	for _, tc := range []struct{ msg, code, param, eventID string }{
		{`{"type":"nope","event_id":"e1"}`, "invalid_value", "type", "e1"},
		{`{"type":`, "invalid_json", "", ""},
		{`{"event_id":"e2","type":"session.update","session":{"output_modalities":["audio"]}}`, "unsupported_value", "session.output_modalities", "e2"},
		{`{"event_id":"e3","type":"session.update","session":{"temperature":9}}`, "invalid_value", "session.temperature", "e3"},
		{`{"event_id":"e4","type":"conversation.item.delete","item_id":"missing"}`, "item_not_found", "item_id", "e4"},
		{`{"event_id":"e5","type":"response.cancel"}`, "response_cancel_not_active", "response_id", "e5"},
		{`{"event_id":"e6","type":"conversation.item.create","previous_item_id":"zz","item":{"type":"message","role":"user","content":[]}}`, "item_not_found", "previous_item_id", "e6"},
		{`{"event_id":"e7","type":"input_audio_buffer.commit"}`, "unsupported_parameter", "type", "e7"},
	} {
		n := c.count()
		h.Message([]byte(tc.msg))
		e := c.waitFor(n, "error")[0]
		if e.Error == nil || e.Error.Code != tc.code || e.Error.Param != tc.param || e.Error.EventID != tc.eventID {
			t.Errorf("%s: got %s", tc.msg, e.raw)
		}
	}
}

func TestRealtimeSessionUnknownModel(t *testing.T) {
	s, _ := rtServer(t, 0)
	c, h := rtDial(t, s, "model=gpt-nope", false)
	defer h.ConnClosed()
	e := c.waitFor(0, "error")[0]
	if e.Error.Code != "model_not_found" || e.Error.Param != "model" {
		t.Fatalf("error: %s", e.raw)
	}
	deadline := time.After(5 * time.Second)
	for {
		c.mu.Lock()
		code := c.code
		c.mu.Unlock()
		if code == 1008 {
			return
		}
		select {
		case <-c.wake:
		case <-deadline:
			t.Fatalf("close code %d, want 1008", code)
		}
	}
}

// rtWaitRunning polls the engine's running count until it is want.
func rtWaitRunning(t *testing.T, eng engine.Engine, want int) {
	t.Helper()
	eventually.True(t, fmt.Sprintf("engine running %d", want), func() bool { return eng.Stats().Running == want })
}

func TestRealtimeSessionCancelAndDisconnect(t *testing.T) {
	s, eng := rtServer(t, 5*time.Millisecond)
	c, h := rtDial(t, s, "model=vajra-sim", false)
	c.waitFor(0, "session.created")
	h.Message([]byte(`{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"Go on."}]}}`))
	h.Message([]byte(`{"type":"response.create","response":{"max_output_tokens":"inf"}}`))
	c.waitFor(0, "response.output_text.delta")
	n := c.count()
	h.Message([]byte(`{"type":"response.create","event_id":"again"}`))
	if e := c.waitFor(n, "error"); e[len(e)-1].Error.Code != "conversation_already_has_active_response" {
		t.Fatalf("second response.create: %s", e[len(e)-1].raw)
	}
	h.Message([]byte(`{"type":"response.cancel"}`))
	evs := c.waitFor(n, "response.done")
	d := evs[len(evs)-1]
	if d.Response.Status != "cancelled" || !strings.Contains(string(d.Response.StatusDetails), "client_cancelled") {
		t.Fatalf("cancelled: %s", d.raw)
	}
	rtWaitRunning(t, eng, 0)
	// A disconnect mid-response frees the engine slot.
	n = c.count()
	h.Message([]byte(`{"type":"response.create","response":{"max_output_tokens":"inf"}}`))
	c.waitFor(n, "response.output_text.delta")
	rtWaitRunning(t, eng, 1)
	h.ConnClosed()
	rtWaitRunning(t, eng, 0)
	ctxWait(t, s)
}

// ctxWait waits until every session ended.
func ctxWait(t *testing.T, s *Sessions) {
	t.Helper()
	eventually.True(t, "every session ended", func() bool { return s.Active() == 0 })
}

func TestRealtimeSessionTranscription(t *testing.T) {
	s, _ := rtServer(t, 0)
	c, h := rtDial(t, s, "intent=transcription", true)
	defer h.ConnClosed()
	created := c.waitFor(0, "transcription_session.created")[0]
	if !strings.Contains(created.raw, `"object":"realtime.transcription_session"`) {
		t.Fatalf("session.created: %s", created.raw)
	}
	h.Message([]byte(`{"type":"transcription_session.update","session":{"input_audio_format":"pcm16","input_audio_transcription":{"model":"vajra-sim"}}}`))
	if u := c.waitFor(1, "transcription_session.updated")[0]; !strings.Contains(u.raw, `"input_audio_transcription":{"model":"vajra-sim"`) {
		t.Fatalf("transcription_session.updated: %s", u.raw)
	}
	n := c.count()
	h.Message([]byte(`{"type":"input_audio_buffer.commit","event_id":"c0"}`))
	if e := c.waitFor(n, "error")[0]; e.Error.Code != "input_audio_buffer_commit_empty" {
		t.Fatalf("empty commit: %s", e.raw)
	}
	n = c.count()
	h.Message([]byte(`{"type":"input_audio_buffer.append","audio":"!!not base64"}`))
	if e := c.waitFor(n, "error")[0]; e.Error.Param != "audio" {
		t.Fatalf("bad base64: %s", e.raw)
	}
	pcm := make([]byte, 2*24000) // one second
	for i := range pcm {
		pcm[i] = byte(i * 7)
	}
	chunk := base64.StdEncoding.EncodeToString(pcm[:len(pcm)/2])
	h.Message([]byte(`{"type":"input_audio_buffer.append","audio":"` + chunk + `"}`))
	h.Message([]byte(`{"type":"input_audio_buffer.append","audio":"` + base64.StdEncoding.EncodeToString(pcm[len(pcm)/2:]) + `"}`))
	n = c.count()
	h.Message([]byte(`{"type":"input_audio_buffer.commit"}`))
	evs := c.waitFor(n, "conversation.item.input_audio_transcription.completed")
	if evs[0].Type != "input_audio_buffer.committed" || evs[1].Type != "conversation.item.created" {
		t.Fatalf("commit events: %v", types(evs))
	}
	var text string
	for _, e := range evs {
		if e.Type == "conversation.item.input_audio_transcription.delta" {
			text += e.Delta
		}
	}
	last := evs[len(evs)-1]
	if last.Transcript == "" || last.Transcript != text || last.ItemID != evs[0].ItemID {
		t.Fatalf("transcript %q, deltas %q: %s", last.Transcript, text, last.raw)
	}
	n = c.count()
	h.Message([]byte(`{"type":"input_audio_buffer.clear"}`))
	c.waitFor(n, "input_audio_buffer.cleared")
}

// TestRealtimeSessionTruncation: a conversation longer than the context
// is truncated for the prompt, oldest messages first, as the API's "auto"
// truncation does; a single message too long for the context is refused.
func TestRealtimeSessionTruncation(t *testing.T) {
	s, _ := rtServerLen(t, 0, 512)
	c, h := rtDial(t, s, "model=vajra-sim", false)
	defer h.ConnClosed()
	c.waitFor(0, "session.created")
	h.Message([]byte(`{"type":"session.update","session":{"instructions":"Be brief.","max_output_tokens":16}}`))
	c.waitFor(0, "session.updated")
	long := strings.Repeat("The sea is wide and deep. ", 20) // about 140 tokens
	for i := 0; i < 8; i++ {
		h.Message([]byte(`{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"` + long + `"}]}}`))
	}
	n := c.count()
	h.Message([]byte(`{"type":"response.create"}`))
	evs := c.waitFor(n, "response.done")
	d := evs[len(evs)-1].Response
	if d.Usage == nil || d.Usage.InputTokens+16 > 512 || d.Usage.InputTokens < 140 {
		t.Fatalf("truncated response: %s", evs[len(evs)-1].raw)
	}
	n = c.count()
	huge := strings.Repeat("wave ", 600)
	h.Message([]byte(`{"type":"response.create","event_id":"big","response":{"conversation":"none","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"` + huge + `"}]}]}}`))
	if e := c.waitFor(n, "error")[0]; e.Error.Code != "context_length_exceeded" || e.Error.EventID != "big" {
		t.Fatalf("too long: %s", e.raw)
	}
}

// overloadedEngine refuses every Start, as a full engine queue does.
type overloadedEngine struct{ engine.Engine }

func (overloadedEngine) Start(*engine.Request, engine.Sink) (engine.Session, error) {
	return nil, &engine.Error{Kind: engine.KindOverloaded, Message: "the engine's waiting queue is full"}
}

// TestRealtimeSessionEngineRefuses: a response the engine refuses to start
// ends at once with response.done status failed, so that the client is not
// left waiting; a refused transcription ends with .failed.
func TestRealtimeSessionEngineRefuses(t *testing.T) {
	_, eng := rtServer(t, 0)
	s, err := NewSessions(Config{Engine: overloadedEngine{eng}, Models: []string{"vajra-sim"}, Logger: zap.NewNop(), Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, h := rtDial(t, s, "model=vajra-sim", false)
	defer h.ConnClosed()
	c.waitFor(0, "session.created")
	h.Message([]byte(`{"type":"response.create"}`))
	evs := c.waitFor(1, "response.done")
	if types(evs)[0] != "response.created" || evs[len(evs)-1].Response.Status != "failed" ||
		!strings.Contains(evs[len(evs)-1].raw, `"code":"engine_overloaded"`) {
		t.Fatalf("refused response: %v %s", types(evs), evs[len(evs)-1].raw)
	}
	// The session is free for the next response.
	n := c.count()
	h.Message([]byte(`{"type":"response.create"}`))
	c.waitFor(n, "response.done")

	tc, th := rtDial(t, s, "intent=transcription", false)
	defer th.ConnClosed()
	tc.waitFor(0, "session.created")
	th.Message([]byte(`{"type":"input_audio_buffer.append","audio":"` + base64.StdEncoding.EncodeToString(make([]byte, 9600)) + `"}`))
	th.Message([]byte(`{"type":"input_audio_buffer.commit"}`))
	if e := tc.waitFor(1, "conversation.item.input_audio_transcription.failed"); !strings.Contains(e[len(e)-1].raw, "engine_overloaded") {
		t.Fatalf("refused transcription: %s", e[len(e)-1].raw)
	}
}

// panickyEngine wraps each request's Formatter with one that panics on
// its third delta: code the engine runs for one request fails.
type panickyEngine struct{ *sim.Engine }

type panicThird struct {
	engine.Formatter
	n int
}

func (f *panicThird) AppendDelta(dst []byte, d *engine.Delta) []byte {
	if f.n++; f.n == 3 {
		panic("formatter bug")
	}
	return f.Formatter.AppendDelta(dst, d)
}

func (e panickyEngine) Start(req *engine.Request, sink engine.Sink) (engine.Session, error) {
	req.Formatter = &panicThird{Formatter: req.Formatter}
	return e.Engine.Start(req, sink)
}

// TestRealtimeSessionFormatterPanic: a response whose formatter panics on
// the engine's goroutine ends with response.done failed, written by the
// session; the session and the engine go on.
func TestRealtimeSessionFormatterPanic(t *testing.T) {
	_, eng := rtServer(t, 0)
	s, err := NewSessions(Config{Engine: panickyEngine{eng}, Models: []string{"vajra-sim"}, Logger: zap.NewNop(), Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, h := rtDial(t, s, "model=vajra-sim", false)
	defer h.ConnClosed()
	c.waitFor(0, "session.created")
	h.Message([]byte(`{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"Hi."}]}}`))
	h.Message([]byte(`{"type":"response.create","response":{"max_output_tokens":20}}`))
	evs := c.waitFor(0, "response.done")
	d := evs[len(evs)-1]
	if d.Response.Status != "failed" || !strings.Contains(d.raw, `"type":"failed"`) {
		t.Fatalf("panicked response: %v %s", types(evs), d.raw)
	}
	deltas := 0
	for _, e := range evs {
		if e.Type == "response.output_text.delta" {
			deltas++
		}
	}
	if deltas != 2 || s.Panics() != 1 {
		t.Fatalf("%d deltas before the panic (want 2), %d panics counted", deltas, s.Panics())
	}
	n := c.count()
	h.Message([]byte(`{"type":"conversation.item.retrieve","item_id":"` + firstItemID(t, evs) + `"}`))
	if r := c.waitFor(n, "conversation.item.retrieved")[0]; !strings.Contains(r.raw, `"status":"incomplete"`) {
		t.Fatalf("the failed response's item: %s", r.raw)
	}
}

// firstItemID returns the assistant item id of a response's events.
func firstItemID(t *testing.T, evs []rtEv) string {
	t.Helper()
	for _, e := range evs {
		if e.ItemID != "" {
			return e.ItemID
		}
	}
	t.Fatal("no item_id in the response's events")
	return ""
}

// textOnlyEngine refuses transcription in Prepare, as engine/llama does.
type textOnlyEngine struct{ engine.Engine }

func (e textOnlyEngine) Prepare(req *engine.Request) error {
	if len(req.Audio.PCM) > 0 {
		return &engine.Error{Kind: engine.KindInvalid, Param: "audio", Message: "this engine does not transcribe audio"}
	}
	return e.Engine.Prepare(req)
}

// TestRealtimeSessionTranscriptionRefused: committed audio an engine
// cannot transcribe gets its item's .failed event, with the engine's
// reason.
func TestRealtimeSessionTranscriptionRefused(t *testing.T) {
	_, eng := rtServer(t, 0)
	s, err := NewSessions(Config{Engine: textOnlyEngine{eng}, Models: []string{"vajra-sim"}, Logger: zap.NewNop(), Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, h := rtDial(t, s, "intent=transcription", false)
	defer h.ConnClosed()
	c.waitFor(0, "session.created")
	h.Message([]byte(`{"type":"input_audio_buffer.append","audio":"` + base64.StdEncoding.EncodeToString(make([]byte, 9600)) + `"}`))
	h.Message([]byte(`{"type":"input_audio_buffer.commit"}`))
	evs := c.waitFor(1, "conversation.item.input_audio_transcription.failed")
	f := evs[len(evs)-1]
	if f.ItemID != evs[0].ItemID || !strings.Contains(f.raw, "does not transcribe audio") || !strings.Contains(f.raw, `"param":"audio"`) {
		t.Fatalf("refused transcription: %v %s", types(evs), f.raw)
	}
}

// TestRealtimeSessionOutOfBand: a response with conversation "none"
// neither joins the conversation nor announces an item in it, and reads
// only its own input.
func TestRealtimeSessionOutOfBand(t *testing.T) {
	s, _ := rtServer(t, 0)
	c, h := rtDial(t, s, "model=vajra-sim", false)
	defer h.ConnClosed()
	c.waitFor(0, "session.created")
	h.Message([]byte(`{"type":"conversation.item.create","item":{"id":"u1","type":"message","role":"user","content":[{"type":"input_text","text":"A long question about the sea and its tides, its waves and its depths."}]}}`))
	c.waitFor(0, "conversation.item.done")
	n := c.count()
	h.Message([]byte(`{"type":"response.create","response":{"conversation":"none","max_output_tokens":4,
		"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Hi."}]}]}}`))
	evs := c.waitFor(n, "response.done")
	for _, e := range evs {
		if strings.HasPrefix(e.Type, "conversation.") {
			t.Fatalf("out-of-band response sent %s", e.raw)
		}
	}
	if d := evs[len(evs)-1]; !strings.Contains(d.raw, `"conversation_id":null`) {
		t.Fatalf("out-of-band response.done: %s", d.raw)
	}
	// The conversation still ends with the user's item.
	n = c.count()
	h.Message([]byte(`{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"And?"}]}}`))
	if a := c.waitFor(n, "conversation.item.added")[0]; !strings.Contains(a.raw, `"previous_item_id":"u1"`) {
		t.Fatalf("the out-of-band response joined the conversation: %s", a.raw)
	}
}

// TestRealtimeSessionConversationBound: a full conversation refuses another
// item and a response whose item would join it (conversation_full), until
// an item is deleted.
func TestRealtimeSessionConversationBound(t *testing.T) {
	s, _ := rtServer(t, 0)
	c, h := rtDial(t, s, "model=vajra-sim", false)
	defer h.ConnClosed()
	c.waitFor(0, "session.created")
	for i := range maxRealtimeItems {
		h.Message([]byte(`{"type":"conversation.item.create","item":{"id":"it` + strconv.Itoa(i) +
			`","type":"message","role":"user","content":[{"type":"input_text","text":"x"}]}}`))
	}
	refused := func(msg, param string) {
		t.Helper()
		n := c.count()
		h.Message([]byte(msg))
		evs := c.waitFor(n, "error")
		if e := evs[len(evs)-1]; e.Error == nil || e.Error.Code != "conversation_full" || e.Error.Param != param {
			t.Fatalf("%s: %s", msg, e.raw)
		}
	}
	refused(`{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"y"}]}}`, "item")
	refused(`{"type":"response.create"}`, "")
	n := c.count()
	h.Message([]byte(`{"type":"conversation.item.delete","item_id":"it0"}`))
	h.Message([]byte(`{"type":"response.create"}`))
	c.waitFor(n, "response.done")
}
