package actors

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
)

// storeClient is a test actor that asks the store and hands replies to a
// channel.
type storeClient struct{ replies chan *storedResponse }

func (c *storeClient) Receive(ctx actor.Context) {
	if r, ok := ctx.Message().(*storeReply); ok {
		c.replies <- r.rec
	}
}

func newTestStore(t *testing.T, cfg StoreConfig) (*ResponseStore, func(op storeOp, id string) *storedResponse) {
	t.Helper()
	system := NewActorSystem(zap.NewNop())
	pool := NewWorkerPool(2)
	st, err := newResponseStore(system, cfg, pool.Producer(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	c := &storeClient{replies: make(chan *storedResponse, 1)}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return c }))
	t.Cleanup(func() { st.stop(); system.Shutdown() })
	ask := func(op storeOp, id string) *storedResponse {
		st.ask(&storeRequest{op: op, id: id, replyTo: pid})
		select {
		case rec := <-c.replies:
			return rec
		case <-time.After(5 * time.Second):
			t.Fatal("no reply from the store")
			return nil
		}
	}
	return st, ask
}

func record(id string, body string) *storedResponse {
	rec := &storedResponse{id: id, body: []byte(body)}
	rec.size = recordSize(rec)
	return rec
}

func TestStoreEvictsLeastRecentlyUsedByCount(t *testing.T) {
	st, ask := newTestStore(t, StoreConfig{MaxResponses: 2})
	st.put(record("a", "{}"), nil)
	st.put(record("b", "{}"), nil)
	if ask(storeGet, "a") == nil { // a is now the most recently used
		t.Fatal("a missing")
	}
	st.put(record("c", "{}"), nil) // evicts b
	if ask(storeGet, "b") != nil {
		t.Fatal("b not evicted")
	}
	if ask(storeGet, "a") == nil || ask(storeGet, "c") == nil {
		t.Fatal("a or c evicted")
	}
	s := st.Stats()
	if s.Stored != 3 || s.Evicted != 1 || s.Count != 2 || s.Bytes != record("a", "{}").size*2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestStoreEvictsByBytesAndDeletes(t *testing.T) {
	one := record("a", string(make([]byte, 1000))).size
	st, ask := newTestStore(t, StoreConfig{MaxBytes: 2*one + one/2})
	for _, id := range []string{"a", "b", "c"} {
		st.put(record(id, string(make([]byte, 1000))), nil)
	}
	if ask(storeGet, "a") != nil || ask(storeGet, "b") == nil {
		t.Fatal("byte bound: a should be evicted, b kept")
	}
	if ask(storeDelete, "b") == nil || ask(storeGet, "b") != nil || ask(storeDelete, "b") != nil {
		t.Fatal("delete")
	}
	if s := st.Stats(); s.Count != 1 || s.Deleted != 1 || s.Evicted != 1 || s.Bytes != one {
		t.Fatalf("stats %+v", s)
	}
	// A record alone over the bound is kept (the newest is never evicted).
	st.put(record("big", string(make([]byte, 10*1000))), nil)
	if ask(storeGet, "big") == nil || ask(storeGet, "c") != nil {
		t.Fatal("big record")
	}
}

// liveSession stands for a background response's session: it takes the
// requests the store forwards and the store's storeFinish acknowledgement.
type liveSession struct {
	forwarded chan *storeRequest
	finished  chan *storeFinish
}

func (l *liveSession) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *storeRequest:
		l.forwarded <- m
	case *storeFinish:
		l.finished <- m
	}
}

// TestStoreLiveEntries: a live (background, running) response is answered
// by its session for GET and cancel, by its queued record for lookups and
// deletes (kept, marked live); it is never evicted; its storeFinish puts
// the final record in its place and comes back to the session.
func TestStoreLiveEntries(t *testing.T) {
	system := NewActorSystem(zap.NewNop())
	pool := NewWorkerPool(2)
	st, err := newResponseStore(system, StoreConfig{MaxResponses: 1}, pool.Producer(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.stop(); system.Shutdown() })
	replies := make(chan storeReply, 4)
	asker := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return actorFunc(func(ctx actor.Context) {
			if r, ok := ctx.Message().(*storeReply); ok {
				replies <- *r
			}
		})
	}))
	ls := &liveSession{forwarded: make(chan *storeRequest, 4), finished: make(chan *storeFinish, 1)}
	live := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return ls }))
	wait := func(what string) storeReply {
		t.Helper()
		select {
		case r := <-replies:
			return r
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no reply", what)
			return storeReply{}
		}
	}

	queued := record("bg", `{"status":"queued"}`)
	queued.status, queued.background = "queued", true
	st.send(&storeLive{rec: queued, pid: live})
	st.put(record("x", "{}"), nil)
	st.put(record("y", "{}"), nil) // the count bound (1) evicts x, never the live entry
	for _, op := range []storeOp{storeGet, storeCancel} {
		st.ask(&storeRequest{op: op, id: "bg", replyTo: asker})
		select {
		case m := <-ls.forwarded:
			if m.op != op || m.replyTo != asker {
				t.Fatalf("forwarded %+v", m)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("op %d not forwarded to the live session", op)
		}
	}
	for _, op := range []storeOp{storeLookup, storeDelete} {
		st.ask(&storeRequest{op: op, id: "bg", replyTo: asker})
		if r := wait("lookup"); r.rec != queued || !r.live {
			t.Fatalf("op %d on a live response: %+v", op, r)
		}
	}
	if s := st.Stats(); s.Live != 1 || s.Count != 1 {
		t.Fatalf("stats with a live entry %+v", s)
	}

	final := record("bg", `{"status":"completed"}`)
	final.status, final.background = "completed", true
	fin := &storeFinish{rec: final, pid: live}
	st.send(fin)
	select {
	case m := <-ls.finished:
		if m != fin {
			t.Fatal("another storeFinish came back")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("storeFinish did not come back")
	}
	st.ask(&storeRequest{op: storeGet, id: "bg", replyTo: asker})
	if r := wait("get"); r.rec != final || r.live {
		t.Fatalf("after finish: %+v", r)
	}
	if s := st.Stats(); s.Live != 0 || s.Count != 1 {
		t.Fatalf("stats after finish %+v", s)
	}
}

// actorFunc is an actor made of a function.
type actorFunc func(actor.Context)

func (f actorFunc) Receive(ctx actor.Context) { f(ctx) }
