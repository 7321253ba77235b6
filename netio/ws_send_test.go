package netio

import (
	"testing"

	"github.com/panjf2000/gnet/v2"

	"github.com/vajra-go/vajra/netio/wsproto"
)

// newSendConn returns a WebSocket connection on a loop that is never run:
// its doorbell counts as rung, so Send measures the append and the ready
// list alone (the loop's flush, which swaps the pending buffers, is
// simulated by reset).
func newSendConn() (*wsConn, func()) {
	l := &loop{el: &fakeLoop{}}
	l.bell.Store(-1)
	l.rung.Store(true) // rung and not yet answered: ready never rings
	c := &conn{loop: l}
	w := &wsConn{c: c}
	c.ws = w
	reset := func() {
		c.out.mu.Lock()
		c.out.pending, c.spare = c.spare[:0], c.out.pending
		c.out.mu.Unlock()
	}
	return w, reset
}

// wsEvent is a typical server event: one text frame of a Realtime delta.
var wsEvent = wsproto.AppendFrame(nil, wsproto.OpText,
	[]byte(`{"type":"response.output_text.delta","event_id":"event_123","response_id":"resp_1","item_id":"item_1","output_index":0,"content_index":0,"delta":"sea "}`))

// TestWSSendAllocs: WSConn.Send allocates nothing once the pending
// buffers have grown to the connection's usual batch.
func TestWSSendAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	w, reset := newSendConn()
	for i := 0; i < 64; i++ { // warm both halves of the pending buffer
		w.Send(wsEvent)
		if i%8 == 7 {
			reset()
		}
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		w.Send(wsEvent)
		if i++; i%8 == 0 {
			reset()
		}
	})
	if allocs != 0 {
		t.Fatalf("WSConn.Send: %.1f allocations per call, want 0", allocs)
	}
}

// BenchmarkWSSend measures WSConn.Send of one event frame, the flush
// simulated every 8 frames (an engine step's batch).
func BenchmarkWSSend(b *testing.B) {
	w, reset := newSendConn()
	b.SetBytes(int64(len(wsEvent)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w.Send(wsEvent)
		if i++; i%8 == 0 {
			reset()
		}
	}
}

// writeConn is the gnet.Conn of flush tests: it takes every write whole.
type writeConn struct {
	gnet.Conn
	written int
}

func (w *writeConn) Write(p []byte) (int, error) { w.written += len(p); return len(p), nil }
func (w *writeConn) OutboundBuffered() int       { return 0 }

// TestFlushDropsBigBuffer: after a batch bigger than maxKeptPending is
// written, the connection does not keep its buffer; small batches keep
// theirs.
func TestFlushDropsBigBuffer(t *testing.T) {
	w, _ := newSendConn()
	gc := &writeConn{}
	w.c.gc = gc
	w.c.srv = &Server{opts: Options{MaxOutboundBytes: DefaultMaxOutboundBytes}}
	w.Send(make([]byte, 2<<20))
	w.c.flushOutbox()
	if gc.written != 2<<20 || cap(w.c.spare) != 0 {
		t.Fatalf("wrote %d; kept a %d-byte buffer after a 2 MiB batch", gc.written, cap(w.c.spare))
	}
	w.Send(wsEvent)
	w.c.flushOutbox()
	if cap(w.c.spare) == 0 {
		t.Fatal("a small batch's buffer was not kept")
	}
}
