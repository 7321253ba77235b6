package store

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
)

// storeClient is a test actor that asks the store and hands replies to a
// channel.
type storeClient struct{ replies chan *Record }

func (c *storeClient) Receive(ctx actor.Context) {
	if r, ok := ctx.Message().(*Reply); ok {
		c.replies <- r.Rec
	}
}

func newTestStore(t *testing.T, cfg Config) (*actorStore, func(op Op, id string) *Record) {
	t.Helper()
	system := newSystem()
	st, err := spawn(system, cfg, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	c := &storeClient{replies: make(chan *Record, 1)}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return c }))
	t.Cleanup(func() { st.Stop(); system.Shutdown() })
	ask := func(op Op, id string) *Record {
		st.Ask(&Request{Op: op, ID: id, ReplyTo: pid})
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

func record(id string, body string) *Record {
	rec := &Record{ID: id, Body: []byte(body)}
	rec.Size = RecordSize(rec)
	return rec
}

func TestStoreEvictsLeastRecentlyUsedByCount(t *testing.T) {
	st, ask := newTestStore(t, Config{MaxResponses: 2})
	st.Put(record("a", "{}"), nil)
	st.Put(record("b", "{}"), nil)
	if ask(Get, "a") == nil { // a is now the most recently used
		t.Fatal("a missing")
	}
	st.Put(record("c", "{}"), nil) // evicts b
	if ask(Get, "b") != nil {
		t.Fatal("b not evicted")
	}
	if ask(Get, "a") == nil || ask(Get, "c") == nil {
		t.Fatal("a or c evicted")
	}
	s := st.Stats()
	if s.Stored != 3 || s.Evicted != 1 || s.Count != 2 || s.Bytes != record("a", "{}").Size*2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestStoreEvictsByBytesAndDeletes(t *testing.T) {
	one := record("a", string(make([]byte, 1000))).Size
	st, ask := newTestStore(t, Config{MaxBytes: 2*one + one/2})
	for _, id := range []string{"a", "b", "c"} {
		st.Put(record(id, string(make([]byte, 1000))), nil)
	}
	if ask(Get, "a") != nil || ask(Get, "b") == nil {
		t.Fatal("byte bound: a should be evicted, b kept")
	}
	if ask(Delete, "b") == nil || ask(Get, "b") != nil || ask(Delete, "b") != nil {
		t.Fatal("delete")
	}
	if s := st.Stats(); s.Count != 1 || s.Deleted != 1 || s.Evicted != 1 || s.Bytes != one {
		t.Fatalf("stats %+v", s)
	}
	// A record alone over the bound is kept (the newest is never evicted).
	st.Put(record("big", string(make([]byte, 10*1000))), nil)
	if ask(Get, "big") == nil || ask(Get, "c") != nil {
		t.Fatal("big record")
	}
}

// liveSession stands for a background response's session: it takes the
// requests the store forwards and the store's Finish acknowledgement.
type liveSession struct {
	forwarded chan *Request
	finished  chan *Finish
	notes     chan *note
}

// note is a message for a live response's owner (Store.Forward).
type note struct{ text string }

func (l *liveSession) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Request:
		l.forwarded <- m
	case *Finish:
		l.finished <- m
	case *note:
		l.notes <- m
	}
}

// TestStoreLiveEntries: a live (background, running) response is answered
// by its session for GET and cancel, by its queued record for lookups and
// deletes (kept, marked live); Forward reaches it; it is never evicted; its
// Finish puts the final record in its place and comes back to the
// session.
func TestStoreLiveEntries(t *testing.T) {
	system := newSystem()
	st, err := spawn(system, Config{MaxResponses: 1}, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Stop(); system.Shutdown() })
	replies := make(chan Reply, 4)
	asker := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return actorFunc(func(ctx actor.Context) {
			if r, ok := ctx.Message().(*Reply); ok {
				replies <- *r
			}
		})
	}))
	ls := &liveSession{forwarded: make(chan *Request, 4), finished: make(chan *Finish, 1), notes: make(chan *note, 1)}
	live := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return ls }))
	wait := func(what string) Reply {
		t.Helper()
		select {
		case r := <-replies:
			return r
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no reply", what)
			return Reply{}
		}
	}

	queued := record("bg", `{"status":"queued"}`)
	queued.Status, queued.Background = "queued", true
	st.Live(&Live{Rec: queued, Owner: live})
	st.Put(record("x", "{}"), nil)
	st.Put(record("y", "{}"), nil) // the count bound (1) evicts x, never the live entry
	for _, op := range []Op{Get, Cancel} {
		st.Ask(&Request{Op: op, ID: "bg", ReplyTo: asker})
		select {
		case m := <-ls.forwarded:
			if m.Op != op || m.ReplyTo != asker {
				t.Fatalf("forwarded %+v", m)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("op %d not forwarded to the live session", op)
		}
	}
	n := &note{text: "the follower's client left"}
	st.Forward("bg", n)
	select {
	case m := <-ls.notes:
		if m != n {
			t.Fatalf("forwarded %+v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Forward did not reach the live response's owner")
	}
	for _, op := range []Op{Lookup, Delete} {
		st.Ask(&Request{Op: op, ID: "bg", ReplyTo: asker})
		if r := wait("lookup"); r.Rec != queued || !r.Live {
			t.Fatalf("op %d on a live response: %+v", op, r)
		}
	}
	if s := st.Stats(); s.Live != 1 || s.Count != 1 {
		t.Fatalf("stats with a live entry %+v", s)
	}

	final := record("bg", `{"status":"completed"}`)
	final.Status, final.Background = "completed", true
	fin := &Finish{Rec: final, Owner: live}
	st.Finish(fin)
	select {
	case m := <-ls.finished:
		if m != fin {
			t.Fatal("another Finish came back")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Finish did not come back")
	}
	st.Ask(&Request{Op: Get, ID: "bg", ReplyTo: asker})
	if r := wait("get"); r.Rec != final || r.Live {
		t.Fatalf("after finish: %+v", r)
	}
	if s := st.Stats(); s.Live != 0 || s.Count != 1 {
		t.Fatalf("stats after finish %+v", s)
	}
}

// actorFunc is an actor made of a function.
type actorFunc func(actor.Context)

func (f actorFunc) Receive(ctx actor.Context) { f(ctx) }

// newSystem is an actor system whose own log lines are dropped.
func newSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
}
