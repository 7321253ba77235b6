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
	st := newResponseStore(system, cfg, pool.Producer())
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
