package actors

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/sim"
)

// The Responses API over WebSocket, driven through its WSHandle with a fake
// WSConn over the simulated engine: what netio's WebSocket layer does,
// without the socket.

// respFakeWS is a WSConn that splits what it is sent into frames, checks each
// is one whole final text frame, and hands their payloads to the test.
type respFakeWS struct {
	t      *testing.T
	events chan string
	// closes, when not nil, gets the code of each Close; otherwise a
	// Close fails the test.
	closes chan int
}

func newRespFakeWS(t *testing.T) *respFakeWS {
	return &respFakeWS{t: t, events: make(chan string, 1<<14)}
}

func (c *respFakeWS) Send(p []byte) {
	for len(p) > 0 {
		payload, rest, ok := cutTextFrame(p)
		if !ok {
			c.t.Errorf("Send: not whole text frames: %q", p)
			return
		}
		c.events <- string(payload)
		p = rest
	}
}

func (c *respFakeWS) Close(code int, reason string) {
	if c.closes != nil {
		c.closes <- code
		return
	}
	c.t.Errorf("Close(%d, %q): the session must not close its connection", code, reason)
}

// wsEvent is what the tests read of a server event.
type wsEvent struct {
	Type           string `json:"type"`
	StreamID       string `json:"stream_id"`
	SequenceNumber *int   `json:"sequence_number"`
	Status         int    `json:"status"`
	Delta          string `json:"delta"`
	Error          *struct {
		Type, Code, Param, Message string
	} `json:"error"`
	Response *struct {
		ID       string `json:"id"`
		Status   string `json:"status"`
		Previous string `json:"previous_response_id"`
		Output   []struct {
			Type    string `json:"type"`
			Content []struct {
				Type, Text string
			} `json:"content"`
		} `json:"output"`
		Usage *struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	} `json:"response"`
	raw string
}

func (c *respFakeWS) next(t *testing.T) wsEvent {
	t.Helper()
	select {
	case s := <-c.events:
		var ev wsEvent
		if err := json.Unmarshal([]byte(s), &ev); err != nil {
			t.Fatalf("event is not JSON: %v: %s", err, s)
		}
		ev.raw = s
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	panic("unreachable")
}

// untilEnd reads one response's events up to its terminal event and checks
// their order and numbering. It returns them.
func (c *respFakeWS) untilEnd(t *testing.T) []wsEvent {
	t.Helper()
	var evs []wsEvent
	for range 100000 {
		ev := c.next(t)
		evs = append(evs, ev)
		if terminal(ev.Type) || ev.Type == "error" {
			return evs
		}
	}
	t.Fatal("no terminal event")
	return nil
}

func terminal(typ string) bool {
	return typ == "response.completed" || typ == "response.incomplete" || typ == "response.failed"
}

// finals is an Observer that passes on every final Result.
type finals chan engine.Result

func (f finals) RequestDone(_ Endpoint, _ string, res *engine.Result) { f <- *res }

func newWSTest(t *testing.T, itl time.Duration) (*Sessions, *sim.Engine, finals) {
	t.Helper()
	sc := sim.DefaultConfig()
	sc.ITL = itl
	eng, err := sim.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	obs := make(finals, 64)
	s, err := NewSessions(Config{Engine: eng, Models: []string{"vajra-sim"}, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = eng.Close()
		s.Close()
	})
	return s, eng, obs
}

func dialWS(t *testing.T, s *Sessions) (*respFakeWS, WSHandle) {
	c := newRespFakeWS(t)
	h := s.StartWS(c, &WSRequest{Endpoint: EndpointResponsesWS, RequestID: "req-ws", Arrival: time.Now()})
	return c, h
}

// checkStream checks one response's events: numbered from 0 in order,
// response.created first, deltas whose concatenation is the final
// response's text, usage at the end (completed, or incomplete when
// max_output_tokens cut it). It returns the final response's id.
func checkStream(t *testing.T, evs []wsEvent, streamID string) (id string, inputTokens int) {
	t.Helper()
	if evs[0].Type != "response.created" || evs[0].Response == nil {
		t.Fatalf("first event %s", evs[0].raw)
	}
	var text strings.Builder
	for i, ev := range evs {
		if ev.SequenceNumber == nil || *ev.SequenceNumber != i {
			t.Fatalf("event %d has sequence_number %v: %s", i, ev.SequenceNumber, ev.raw)
		}
		if ev.StreamID != streamID {
			t.Fatalf("event %d stream_id %q, want %q: %s", i, ev.StreamID, streamID, ev.raw)
		}
		if ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
	}
	last := evs[len(evs)-1]
	if (last.Type != "response.completed" && last.Type != "response.incomplete") || last.Response == nil || last.Response.Usage == nil || last.Response.Usage.OutputTokens == 0 {
		t.Fatalf("last event %s", last.raw)
	}
	var out strings.Builder
	for _, o := range last.Response.Output {
		for _, c := range o.Content {
			if c.Type == "output_text" {
				out.WriteString(c.Text)
			}
		}
	}
	if out.String() == "" || out.String() != text.String() {
		t.Fatalf("deltas %q, completed text %q", text.String(), out.String())
	}
	if last.Response.ID != evs[0].Response.ID {
		t.Fatalf("ids %q, %q", evs[0].Response.ID, last.Response.ID)
	}
	return last.Response.ID, last.Response.Usage.InputTokens
}

func TestResponsesWSStreamsAndChains(t *testing.T) {
	s, _, _ := newWSTest(t, 0)
	c, h := dialWS(t, s)
	h.Message([]byte(`{"type":"response.create","model":"vajra-sim","input":"Say hello.","max_output_tokens":24}`))
	first, in1 := checkStream(t, c.untilEnd(t), "")

	// The second sees the first's conversation: its prompt holds the
	// first's input and answer, so it is longer than the first's prompt.
	h.Message([]byte(`{"type":"response.create","model":"vajra-sim","input":"And again.","previous_response_id":"` + first + `","max_output_tokens":24}`))
	evs := c.untilEnd(t)
	second, in2 := checkStream(t, evs, "")
	if second == first || evs[len(evs)-1].Response.Previous != first {
		t.Fatalf("second response %s", evs[len(evs)-1].raw)
	}
	if in2 <= in1 {
		t.Fatalf("chained prompt has %d tokens, the first had %d: history not carried", in2, in1)
	}

	// store: false: the connection keeps the response to chain from (and
	// the one chained from it, unstored too), no other connection sees it.
	h.Message([]byte(`{"type":"response.create","model":"vajra-sim","input":"x","store":false,"max_output_tokens":4}`))
	unstored, in3 := checkStream(t, c.untilEnd(t), "")
	h.Message([]byte(`{"type":"response.create","model":"vajra-sim","input":"y","store":false,"previous_response_id":"` + unstored + `","max_output_tokens":4}`))
	again, in4 := checkStream(t, c.untilEnd(t), "")
	h.Message([]byte(`{"type":"response.create","model":"vajra-sim","input":"z","store":false,"previous_response_id":"` + again + `","max_output_tokens":4}`))
	_, in5 := checkStream(t, c.untilEnd(t), "")
	if in4 <= in3 || in5 <= in4 {
		t.Fatalf("unstored chain's prompts %d, %d, %d tokens: history not carried", in3, in4, in5)
	}
	other, h2 := dialWS(t, s)
	h2.Message([]byte(`{"type":"response.create","model":"vajra-sim","input":"y","previous_response_id":"` + unstored + `"}`))
	ev := other.next(t)
	if ev.Type != "error" || ev.Status != 400 || ev.Error == nil || ev.Error.Code != "previous_response_not_found" {
		t.Fatalf("another connection chained to an unstored response: %s", ev.raw)
	}
	h2.ConnClosed()
	h.ConnClosed()
}

func TestResponsesWSLanes(t *testing.T) {
	s, _, _ := newWSTest(t, time.Millisecond)
	c, h := dialWS(t, s)
	// Two lanes at once, two creates queued in lane a.
	h.Message([]byte(`{"type":"response.create","stream_id":"a","model":"vajra-sim","input":"one","max_output_tokens":12}`))
	h.Message([]byte(`{"type":"response.create","stream_id":"b.2","model":"vajra-sim","input":"two","max_output_tokens":12}`))
	h.Message([]byte(`{"type":"response.create","stream_id":"a","model":"vajra-sim","input":"three","max_output_tokens":12}`))
	byLane := map[string][]wsEvent{}
	done := 0
	for done < 3 {
		ev := c.next(t)
		byLane[ev.StreamID] = append(byLane[ev.StreamID], ev)
		if terminal(ev.Type) {
			done++
		}
	}
	if len(byLane) != 2 {
		t.Fatalf("lanes %v", len(byLane))
	}
	checkStream(t, byLane["b.2"], "b.2")
	// Lane a ran its two creates one after the other: the first's events
	// end before the second's begin.
	a := byLane["a"]
	for i, ev := range a {
		if terminal(ev.Type) {
			checkStream(t, a[:i+1], "a")
			checkStream(t, a[i+1:], "a")
			break
		}
	}
	h.ConnClosed()
}

func TestResponsesWSBadEventsKeepTheSocket(t *testing.T) {
	s, _, _ := newWSTest(t, 0)
	c, h := dialWS(t, s)
	for _, tc := range []struct{ msg, code, param, streamID string }{
		{`{"type":"response.create",`, "invalid_json", "", ""},
		{`[1,2]`, "invalid_json", "", ""},
		{`{"model":"vajra-sim"}`, "missing_required_parameter", "type", ""},
		{`{"type":"response.frobnicate","stream_id":"l"}`, "unknown_event_type", "type", "l"},
		{`{"type":"response.steer","previous_response_id":"resp_x","input":"hi"}`, "unsupported_event_type", "type", ""},
		{`{"type":"response.create","stream_id":"bad id!","model":"vajra-sim","input":"hi"}`, "invalid_stream_id", "stream_id", ""},
		{`{"type":"response.create","model":"vajra-sim","input":"hi","background":true}`, "unsupported_parameter", "background", ""},
		{`{"type":"response.create","model":"vajra-sim","input":"hi","generate":false}`, "unsupported_parameter", "generate", ""},
		{`{"type":"response.create","stream_id":"z","model":"vajra-sim","input":"hi","temperature":9}`, "", "temperature", "z"},
		{`{"type":"response.create","model":"nope","input":"hi"}`, "model_not_found", "model", ""},
	} {
		h.Message([]byte(tc.msg))
		ev := c.next(t)
		if ev.Type != "error" || ev.Error == nil || ev.Status < 400 || ev.Error.Param != tc.param || ev.StreamID != tc.streamID ||
			(tc.code != "" && ev.Error.Code != tc.code) || ev.Error.Message == "" {
			t.Errorf("%s: got %s", tc.msg, ev.raw)
		}
	}
	h.Message([]byte(`{"type":"response.create","model":"vajra-sim","input":"still here?","max_output_tokens":8,"stream":false}`))
	checkStream(t, c.untilEnd(t), "")
	h.ConnClosed()
}

func TestResponsesWSCloseAbortsTheEngine(t *testing.T) {
	s, eng, obs := newWSTest(t, 5*time.Millisecond)
	c, h := dialWS(t, s)
	// Two lanes running long responses and one queued behind them.
	long := `"model":"vajra-sim","input":"Think hard.","reasoning":{"effort":"high"},"max_output_tokens":4000}`
	h.Message([]byte(`{"type":"response.create","stream_id":"a",` + long))
	h.Message([]byte(`{"type":"response.create","stream_id":"b",` + long))
	h.Message([]byte(`{"type":"response.create","stream_id":"a",` + long))
	deltas := map[string]bool{}
	for len(deltas) < 2 {
		if ev := c.next(t); strings.HasSuffix(ev.Type, ".delta") {
			deltas[ev.StreamID] = true
		}
	}
	if got := eng.Stats().Running; got != 2 {
		t.Fatalf("running mid-stream %d, want 2", got)
	}
	closedAt := time.Now()
	h.ConnClosed()
	for range 2 {
		select {
		case res := <-obs:
			if res.Err == nil || res.Err.Kind != engine.KindAborted {
				t.Fatalf("final after close: %+v", res.Err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("engine session not aborted after the close")
		}
	}
	rtWaitRunning(t, eng, 0)
	t.Logf("engine slots freed %v after the close", time.Since(closedAt))
	waitSessions(t, s)
	select {
	case res := <-obs:
		t.Fatalf("the queued create ran after the close: %+v", res)
	default:
	}
}

// waitRunning waits, bounded, for the engine's published running count
// (the sim publishes it once per scheduler pass, right after the finals).
func waitSessions(t *testing.T, s *Sessions) {
	t.Helper()
	ctx, cancel := contextWithTimeout(5 * time.Second)
	defer cancel()
	if err := s.Wait(ctx); err != nil {
		t.Fatalf("sessions still live: %d", s.Active())
	}
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// A panic in the connection's actor stops it: its running responses are
// aborted and the client gets a 1011 close, the server goes on.
func TestResponsesWSPanicClosesTheConnection(t *testing.T) {
	s, eng, obs := newWSTest(t, 5*time.Millisecond)
	c, h := dialWS(t, s)
	c.closes = make(chan int, 1)
	h.Message([]byte(`{"type":"response.create","model":"vajra-sim","input":"Think.","reasoning":{"effort":"high"},"max_output_tokens":4000}`))
	for ev := c.next(t); !strings.HasSuffix(ev.Type, ".delta"); ev = c.next(t) {
	}
	ws := h.(*responsesWS)
	s.root.Send(ws.pid, &wsExchangeEnded{}) // no exchange: a nil dereference in the actor
	select {
	case code := <-c.closes:
		if code != 1011 {
			t.Fatalf("close code %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no close after the panic")
	}
	select {
	case res := <-obs:
		if res.Err == nil || res.Err.Kind != engine.KindAborted {
			t.Fatalf("final %+v", res.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("running response not aborted")
	}
	rtWaitRunning(t, eng, 0)
	if s.Panics() != 1 {
		t.Fatalf("panics %d", s.Panics())
	}
}

// A connection holds at most maxWSPending creates, running or queued; one
// more is refused with a 429 error event on its lane, and the close drops
// the queued ones without running them.
func TestResponsesWSPendingBound(t *testing.T) {
	s, eng, obs := newWSTest(t, 5*time.Millisecond)
	c, h := dialWS(t, s)
	create := []byte(`{"type":"response.create","stream_id":"q","model":"vajra-sim","input":"Think.","reasoning":{"effort":"high"},"max_output_tokens":4000}`)
	for range maxWSPending + 1 {
		h.Message(create)
	}
	for {
		ev := c.next(t)
		if ev.Type == "error" {
			if ev.Status != 429 || ev.StreamID != "q" || ev.Error.Code != "rate_limit_exceeded" {
				t.Fatalf("refusal %s", ev.raw)
			}
			break
		}
		if terminal(ev.Type) {
			t.Fatalf("the first response ended before the refusal: %s", ev.raw)
		}
	}
	h.ConnClosed()
	select {
	case res := <-obs:
		if res.Err == nil || res.Err.Kind != engine.KindAborted {
			t.Fatalf("final %+v", res.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("running response not aborted")
	}
	rtWaitRunning(t, eng, 0)
	waitSessions(t, s)
	if len(obs) != 0 {
		t.Fatalf("%d queued creates ran after the close", len(obs))
	}
}

// The bodies queued behind a running create are bounded in bytes too.
func TestResponsesWSQueuedBytesBound(t *testing.T) {
	s, eng, _ := newWSTest(t, 5*time.Millisecond)
	c, h := dialWS(t, s)
	h.Message([]byte(`{"type":"response.create","model":"vajra-sim","input":"Think.","reasoning":{"effort":"high"},"max_output_tokens":4000}`))
	big := []byte(`{"type":"response.create","model":"vajra-sim","input":"` + strings.Repeat("a", 2<<20) + `"}`)
	fit := maxWSQueuedBytes / len(big) // bodies are a little shorter than their messages
	for range fit + 1 {
		h.Message(big)
	}
	for {
		ev := c.next(t)
		if ev.Type == "error" {
			if ev.Status != 429 || !strings.Contains(ev.Error.Message, "bytes") {
				t.Fatalf("refusal %s", ev.raw)
			}
			break
		}
		if terminal(ev.Type) {
			t.Fatalf("the first response ended before the refusal: %s", ev.raw)
		}
	}
	h.ConnClosed()
	rtWaitRunning(t, eng, 0)
	waitSessions(t, s)
}

// The actor reports a backlog (netio then stops reading the connection)
// while more than maxInboxMessages client messages wait for it, and none
// once it handled them.
func TestResponsesWSBacklog(t *testing.T) {
	s, _, _ := newWSTest(t, 0)
	// An actor that never runs: its messages stay unhandled.
	stuck := new(responsesWS)
	stuck.owner, stuck.pid = s, s.system.NewLocalPID("nobody")
	for i := range maxInboxMessages + 1 {
		if stuck.Backlogged() {
			t.Fatalf("backlogged after %d messages", i)
		}
		stuck.Message([]byte(`{}`))
	}
	if !stuck.Backlogged() {
		t.Fatal("no backlog past the bound")
	}

	c, h := dialWS(t, s)
	for range 4 * maxInboxMessages {
		h.Message([]byte(`{}`))
	}
	for range 4 * maxInboxMessages {
		if ev := c.next(t); ev.Type != "error" {
			t.Fatalf("event %s", ev.raw)
		}
	}
	if h.(WSBacklog).Backlogged() {
		t.Fatal("backlog after every message was handled")
	}
	h.ConnClosed()
}

func TestWSRecentsBound(t *testing.T) {
	var c wsRecents
	for i := range maxWSPending + 1 {
		c.put(strconv.Itoa(i), &wsRecent{id: "resp_" + strconv.Itoa(i)})
	}
	if c.find("resp_0") != nil || c.find("resp_1") == nil || c.find("resp_64") == nil || len(c.byLane) != maxWSPending {
		t.Fatalf("kept %d; resp_0 %v", len(c.byLane), c.find("resp_0"))
	}
	c.put("1", &wsRecent{id: "resp_x"}) // a lane keeps its latest only
	if c.find("resp_1") != nil || c.find("resp_x") == nil || c.find("") != nil {
		t.Fatal("lane 1 not replaced")
	}
}

// A create queued behind the unstored response it continues (sent once
// response.created named it) finds it: previous_response_id is resolved
// when the create runs, after the response it names ended.
func TestResponsesWSQueuedChainResolvesAtRun(t *testing.T) {
	s, _, _ := newWSTest(t, 5*time.Millisecond) // the first runs 200 ms: the second waits behind it
	c, h := dialWS(t, s)
	h.Message([]byte(`{"type":"response.create","model":"vajra-sim","input":"one","store":false,"max_output_tokens":40}`))
	created := c.next(t)
	if created.Type != "response.created" {
		t.Fatalf("first event %s", created.raw)
	}
	h.Message([]byte(`{"type":"response.create","model":"vajra-sim","input":"two","store":false,"max_output_tokens":4,"previous_response_id":"` + created.Response.ID + `"}`))
	first := append([]wsEvent{created}, c.untilEnd(t)...)
	_, in1 := checkStream(t, first, "")
	evs := c.untilEnd(t)
	_, in2 := checkStream(t, evs, "")
	if evs[len(evs)-1].Response.Previous != created.Response.ID || in2 <= in1 {
		t.Fatalf("queued chained response %s", evs[len(evs)-1].raw)
	}
	h.ConnClosed()
}
