package actors

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/internal/redistest"
)

// replyClient hands every storeReply it gets to a channel.
type replyClient struct{ replies chan storeReply }

func (c *replyClient) Receive(ctx actor.Context) {
	if r, ok := ctx.Message().(*storeReply); ok {
		c.replies <- *r
	}
}

type redisFixture struct {
	t     *testing.T
	srv   *redistest.Server
	st    *redisStore
	pid   *actor.PID
	reply chan storeReply
}

func newRedisFixture(t *testing.T, cfg StoreConfig) *redisFixture {
	t.Helper()
	var srv *redistest.Server
	if cfg.URL == "" {
		srv = redistest.Start(t)
		// Short socket timeouts, so that a stopped server fails commands
		// quickly (go-redis reads them from the URL, as operators set them).
		cfg.URL = srv.URL() + "?dial_timeout=300ms&read_timeout=300ms&write_timeout=300ms"
	}
	system := NewActorSystem(zap.NewNop())
	c := &replyClient{replies: make(chan storeReply, 4)}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return c }))
	st, err := newRedisStore(system, cfg, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.stop(); system.Shutdown() })
	return &redisFixture{t: t, srv: srv, st: st, pid: pid, reply: c.replies}
}

func (f *redisFixture) wait() storeReply {
	f.t.Helper()
	select {
	case r := <-f.reply:
		return r
	case <-time.After(10 * time.Second):
		f.t.Fatal("no reply from the Redis store")
		return storeReply{}
	}
}

func (f *redisFixture) save(rec *storedResponse) storeReply {
	f.st.put(rec, &storeRequest{replyTo: f.pid})
	return f.wait()
}

func (f *redisFixture) ask(op storeOp, id string) storeReply {
	f.st.ask(&storeRequest{op: op, id: id, replyTo: f.pid})
	return f.wait()
}

func fullRecord(id string) *storedResponse {
	rec := &storedResponse{
		id:   id,
		body: []byte(`{"id":"` + id + `","object":"response","status":"completed"}`),
		input: []openai.ResponseItem{
			{Type: "message", ID: "msg_1", Status: "completed", Role: "user",
				Content: []openai.ResponsesContentPart{{Type: "input_text", Text: "Hi \u2603"}}},
			{Type: "function_call_output", ID: "fco_1", CallID: "call_1", Output: `{"ok":true}`},
		},
		history: []engine.Message{
			{Role: "user", Content: "Hi \u2603"},
			{Role: "assistant", Content: "Hello", Reasoning: "think",
				ToolCalls: []engine.ToolCall{{ID: "call_1", Name: "f", Arguments: `{"a":1}`}}},
			{Role: "tool", ToolCallID: "call_1", Content: `{"ok":true}`},
		},
	}
	rec.size = recordSize(rec)
	return rec
}

func TestRedisStoreRoundTrip(t *testing.T) {
	f := newRedisFixture(t, StoreConfig{TTL: time.Hour, KeyPrefix: "t1:"})
	want := fullRecord("resp_a")
	if r := f.save(want); r.err != nil {
		t.Fatalf("save: %v", r.err)
	}
	got := f.ask(storeGet, "resp_a")
	if got.err != nil || got.rec == nil {
		t.Fatalf("get: %+v", got)
	}
	if string(got.rec.body) != string(want.body) || got.rec.id != want.id || got.rec.size != want.size {
		t.Fatalf("record changed: %+v", got.rec)
	}
	if len(got.rec.input) != 2 || got.rec.input[0].Content[0].Text != "Hi \u2603" || got.rec.input[1].CallID != "call_1" {
		t.Fatalf("input items: %+v", got.rec.input)
	}
	h := got.rec.history
	if len(h) != 3 || h[1].ToolCalls[0].Arguments != `{"a":1}` || h[1].Reasoning != "think" || h[2].ToolCallID != "call_1" {
		t.Fatalf("history: %+v", h)
	}
	// The key carries the prefix and the TTL (Redis conventions: one
	// prefix, expiry set by the writer).
	rc := redis.NewClient(&redis.Options{Addr: f.srv.Addr()})
	defer rc.Close()
	ttl, err := rc.PTTL(context.Background(), "t1:resp:resp_a").Result()
	if err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("PTTL = %v, %v; want about 1h", ttl, err)
	}
	// Unknown ids are absent, not errors; delete answers the record once.
	if r := f.ask(storeGet, "resp_nope"); r.err != nil || r.rec != nil {
		t.Fatalf("unknown id: %+v", r)
	}
	if r := f.ask(storeDelete, "resp_a"); r.err != nil || r.rec == nil {
		t.Fatalf("delete: %+v", r)
	}
	if r := f.ask(storeGet, "resp_a"); r.rec != nil {
		t.Fatal("deleted record still there")
	}
	st := f.st.Stats()
	if st.Stored != 1 || st.Deleted != 1 || st.Ops.Count[opPut][resultOK] != 1 || st.Ops.Count[opGet][resultOK] != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRedisStoreEntryCap(t *testing.T) {
	f := newRedisFixture(t, StoreConfig{MaxEntryBytes: 256})
	rec := record("resp_big", `{"text":"`+strings.Repeat("x", 1000)+`"}`)
	if r := f.save(rec); !errors.Is(r.err, errStoreEntryTooLarge) {
		t.Fatalf("over the cap: err = %v", r.err)
	}
	if r := f.ask(storeGet, "resp_big"); r.rec != nil {
		t.Fatal("an entry over the cap was stored")
	}
	if st := f.st.Stats(); st.SaveFailures != 1 || st.Ops.Count[opPut][resultTooLarge] != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Redis lost mid-run: commands fail with errStoreUnavailable (the session
// answers 503), and once Redis is back the same store serves again, with
// no restart.
func TestRedisStoreOutageAndRecovery(t *testing.T) {
	f := newRedisFixture(t, StoreConfig{})
	if r := f.save(record("resp_1", "{}")); r.err != nil {
		t.Fatal(r.err)
	}
	f.srv.Stop()
	if r := f.ask(storeGet, "resp_1"); !errors.Is(r.err, errStoreUnavailable) {
		t.Fatalf("get with Redis down: %+v", r)
	}
	if r := f.save(record("resp_2", "{}")); !errors.Is(r.err, errStoreUnavailable) {
		t.Fatalf("save with Redis down: %+v", r)
	}
	if f.st.up.Load() {
		t.Fatal("the store still thinks Redis is up")
	}
	// While Redis is known down, commands fail at once (no dial timeout
	// per request).
	start := time.Now()
	if r := f.ask(storeGet, "resp_1"); !errors.Is(r.err, errStoreUnavailable) || time.Since(start) > time.Second {
		t.Fatalf("get while known down: %+v after %v", r, time.Since(start))
	}
	f.srv.Restart() // empty: nothing was persisted
	// The prober finds it back within a few probe intervals.
	deadline := time.Now().Add(10 * time.Second)
	for !f.st.up.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the store did not notice Redis is back")
		}
		time.Sleep(probeInterval / 5) // polling the prober's flag, bounded
	}
	if r := f.save(record("resp_3", "{}")); r.err != nil {
		t.Fatalf("save after recovery: %v", r.err)
	}
	if r := f.ask(storeGet, "resp_3"); r.err != nil || r.rec == nil {
		t.Fatalf("get after recovery: %+v", r)
	}
	st := f.st.Stats()
	if st.SaveFailures != 1 || st.Ops.Count[opGet][resultError] != 2 || st.Ops.Count[opPut][resultError] != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Redis down at start: the store is built (the node starts) and answers
// 503-worthy errors instead of blocking.
func TestRedisStoreDownAtStart(t *testing.T) {
	srv := redistest.Start(t)
	url := srv.URL() + "?dial_timeout=200ms&read_timeout=200ms"
	srv.Stop()
	system := NewActorSystem(zap.NewNop())
	defer system.Shutdown()
	st, err := newRedisStore(system, StoreConfig{URL: url}, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.stop()
	c := &replyClient{replies: make(chan storeReply, 1)}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return c }))
	st.ask(&storeRequest{op: storeGet, id: "x", replyTo: pid})
	select {
	case r := <-c.replies:
		if !errors.Is(r.err, errStoreUnavailable) {
			t.Fatalf("reply %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reply")
	}
}

func TestRedisStoreBadURL(t *testing.T) {
	system := NewActorSystem(zap.NewNop())
	defer system.Shutdown()
	if _, err := newRedisStore(system, StoreConfig{URL: "http://127.0.0.1:1"}, zap.NewNop(), nil); err == nil {
		t.Fatal("an http:// store URL was accepted")
	}
}

func TestRecordCodecRejectsOtherVersions(t *testing.T) {
	if _, err := decodeRecord([]byte(`{"v":2,"id":"x","body":{}}`)); err == nil {
		t.Fatal("a record of another version decoded")
	}
	if _, err := decodeRecord([]byte(`{`)); err == nil {
		t.Fatal("malformed record decoded")
	}
}

// The other URL forms: rediss:// (TLS, verified against the CA the test
// made, through --response-store-ca-file) and unix://.
func TestRedisStoreTLSAndUnixSocket(t *testing.T) {
	tlsSrv := redistest.StartTLS(t)
	plain := redistest.Start(t)
	for name, cfg := range map[string]StoreConfig{
		"rediss": {URL: tlsSrv.URL(), CAFile: tlsSrv.CAFile()},
		"unix":   {URL: plain.SocketURL()},
	} {
		t.Run(name, func(t *testing.T) {
			f := newRedisFixture(t, cfg)
			if !f.st.up.Load() {
				t.Fatal("not connected")
			}
			if r := f.save(fullRecord("resp_" + name)); r.err != nil {
				t.Fatal(r.err)
			}
			if r := f.ask(storeGet, "resp_"+name); r.err != nil || r.rec == nil {
				t.Fatalf("get: %+v", r)
			}
		})
	}
	// Without the CA the server's certificate is refused: the store is
	// down (and says so), not silently insecure.
	system := NewActorSystem(zap.NewNop())
	defer system.Shutdown()
	st, err := newRedisStore(system, StoreConfig{URL: tlsSrv.URL() + "?dial_timeout=300ms"}, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.stop()
	if st.up.Load() {
		t.Fatal("a certificate from an unknown CA was accepted")
	}
	if _, err := newRedisStore(system, StoreConfig{URL: plain.URL(), CAFile: tlsSrv.CAFile()}, zap.NewNop(), nil); err == nil {
		t.Fatal("a CA file with a redis:// URL was accepted")
	}
}
