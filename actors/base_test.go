package actors

import (
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/sim"
)

// prepPanicEngine panics in Prepare for a prompt that says "PANIC": code
// that runs in the session actor for a small request (on the prepare pool
// for a large one) fails.
type prepPanicEngine struct{ *sim.Engine }

func (e prepPanicEngine) Prepare(req *engine.Request) error {
	for _, m := range req.Messages {
		if strings.Contains(m.Content, "PANIC") {
			panic("prepare bug")
		}
	}
	return e.Engine.Prepare(req)
}

// TestEverySessionKindLogsAPanicOnce: a panic in the actor of each session
// kind (an HTTP request's, a Realtime connection's, a Responses WebSocket's,
// an in-process request's) is logged once, with the request id and the
// stack, and counted once; the session ends its response (or closes its
// connection) and stops.
func TestEverySessionKindLogsAPanicOnce(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.ITL, cfg.PrefillTPS = 0, 0
	eng, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.ErrorLevel)
	s, err := NewSessions(Config{Engine: prepPanicEngine{eng}, Models: []string{"vajra-sim"}, Logger: zap.New(core), Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		eng.Close()
		s.Close()
	})
	// logged checks that the panic was logged once, for request id, and
	// counted once, and that the session stopped.
	logged := func(kind, id string) {
		t.Helper()
		waitSessions(t, s)
		var n int
		for _, e := range logs.TakeAll() {
			if strings.Contains(e.Message, "panic") {
				n++
				if got := e.ContextMap()["request_id"]; got != id {
					t.Errorf("%s: panic logged for request %v, want %s", kind, got, id)
				}
				if _, ok := e.ContextMap()["stack"]; !ok {
					t.Errorf("%s: panic logged without its stack", kind)
				}
			}
		}
		if n != 1 {
			t.Errorf("%s: the panic was logged %d times, want once", kind, n)
		}
	}

	// An HTTP request: its 500.
	c := &answerConn{done: make(chan struct{})}
	s.Start(c, NewRequest(EndpointChatCompletions, "http-1", []byte(`{"model":"vajra-sim","messages":[{"role":"user","content":"PANIC"}]}`)))
	wait(t, c.done, "the 500")
	if c.status != 500 {
		t.Fatalf("HTTP request: status %d", c.status)
	}
	logged("http", "http-1")

	// A Realtime connection: closed with 1011.
	rc, rh := rtDial(t, s, "model=vajra-sim", false)
	rc.waitFor(0, "session.created")
	rh.Message([]byte(`{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"PANIC"}]}}`))
	rh.Message([]byte(`{"type":"response.create"}`))
	waitClose(t, rc, 1011)
	rh.ConnClosed()
	logged("realtime", "req1")

	// A Responses WebSocket connection: a nil exchange's end (as in
	// TestResponsesWSPanicClosesTheConnection).
	wc := newRTFakeWS(t)
	wh := s.StartWS(wc, &WSRequest{Endpoint: EndpointResponsesWS, RequestID: "ws-1", Arrival: time.Now()})
	s.root.Send(wh.(*responsesWS).pid, &wsExchangeEnded{})
	waitClose(t, wc, 1011)
	wh.ConnClosed()
	logged("responses websocket", "ws-1")

	// An in-process request: its final Output says it failed.
	finals := make(chan *engine.Result, 1)
	replyTo := s.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if o, ok := ctx.Message().(*Output); ok && o.Take() && o.Final != nil {
			finals <- o.Final
		}
	}))
	defer s.system.Root.Stop(replyTo)
	ended := make(chan struct{})
	g := &Generate{ID: "local-1", Messages: []engine.Message{{Role: "user", Content: "PANIC"}}}
	s.StartLocal(g, replyTo, time.Now(), func() { close(ended) })
	select {
	case res := <-finals:
		if res.Err == nil || res.Err.Kind != engine.KindInternal {
			t.Fatalf("in-process request: final %+v", res.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("in-process request: no final Output")
	}
	wait(t, ended, "onEnd")
	logged("in-process", "local-1")

	if n := s.Panics(); n != 4 {
		t.Fatalf("%d panics counted, want 4", n)
	}
}

// waitClose waits until the session closed c with code.
func waitClose(t *testing.T, c *rtFakeWS, code int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		got := c.code
		c.mu.Unlock()
		if got == code {
			return
		}
		if got != 0 || time.Now().After(deadline) {
			t.Fatalf("close code %d, want %d", got, code)
		}
		select {
		case <-c.wake:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestWSInboxBounds: both WebSocket session kinds report a backlog past
// maxInboxMessages client messages, or past maxInboxBytes of them, waiting
// for their actor, and copy each message into a buffer of its size class.
func TestWSInboxBounds(t *testing.T) {
	s, _ := rtServer(t, 0)
	kinds := map[string]func() (*wsBase, WSHandle){
		"realtime":  func() (*wsBase, WSHandle) { a := new(realtimeSession); return &a.wsBase, a },
		"responses": func() (*wsBase, WSHandle) { a := new(responsesWS); return &a.wsBase, a },
	}
	for name, kind := range kinds {
		// Actors that never run: their messages stay unhandled.
		w, h := kind()
		w.owner, w.pid = s, s.system.NewLocalPID("nobody")
		for i := range maxInboxMessages + 1 {
			if h.(WSBacklog).Backlogged() {
				t.Fatalf("%s: backlogged after %d messages", name, i)
			}
			h.Message([]byte(`{}`))
		}
		if !h.(WSBacklog).Backlogged() {
			t.Fatalf("%s: no backlog past %d messages", name, maxInboxMessages)
		}

		w, h = kind()
		w.owner, w.pid = s, s.system.NewLocalPID("nobody")
		big := make([]byte, maxInboxBytes/2)
		h.Message(big)
		h.Message(big)
		if h.(WSBacklog).Backlogged() {
			t.Fatalf("%s: backlogged at %d bytes", name, maxInboxBytes)
		}
		h.Message([]byte(`{}`))
		if !h.(WSBacklog).Backlogged() {
			t.Fatalf("%s: no backlog past %d bytes", name, maxInboxBytes)
		}
	}
	// The copies come from the request bodies' size classes: a 700-byte
	// message holds a 1 KiB buffer, not the largest one seen.
	p, bp := pooledCopy(make([]byte, 700))
	if cap(p) != 1024 || bp == nil {
		t.Fatalf("a 700-byte message's copy has capacity %d", cap(p))
	}
	releasePooled(bp)
}
