package actors

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// TestRedisStoreFailureRightAfterRecovery: a command that fails the moment
// the prober has marked the store up (Redis lost again at once) must leave
// a prober running, so that the store comes back when Redis does. Before,
// the prober reset its flag only after marking the store up: the failure
// in between marked the store down with no prober left, and every request
// was refused until the process restarted.
func TestRedisStoreFailureRightAfterRecovery(t *testing.T) {
	f := newRedisFixture(t, StoreConfig{})
	var once atomic.Bool
	f.st.upHook = func() {
		if once.CompareAndSwap(false, true) {
			// What a worker does when its command fails on a lost server.
			f.st.done(opGet, errors.New("dial tcp: connection refused"), time.Now())
		}
	}
	f.srv.Stop()
	if r := f.ask(storeGet, "resp_1"); !errors.Is(r.err, errStoreUnavailable) {
		t.Fatalf("get with Redis down: %+v", r)
	}
	f.srv.Restart()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := f.ask(storeGet, "resp_1")
		if r.err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis has been back for 5 s and the store still refuses: %v (up %v, probing %v)",
				r.err, f.st.up.Load(), f.st.probing.Load())
		}
		time.Sleep(probeInterval / 5) // polling the store's answer, bounded
	}
	if !once.Load() {
		t.Fatal("the hook never ran: the test proved nothing")
	}
}

// TestRedisStoreFlappingUnderLoad: Redis stopped and started several
// times within a second while sessions save and read; within a few
// seconds of its last return every store request succeeds.
func TestRedisStoreFlappingUnderLoad(t *testing.T) {
	f := newRedisFixture(t, StoreConfig{})
	const workers = 8
	var stop atomic.Bool
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		c := &replyClient{replies: make(chan storeReply, 1)}
		pid := f.st.root.Spawn(actor.PropsFromProducer(func() actor.Actor { return c }))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1_000_000 && !stop.Load(); i++ {
				id := "resp_" + strconv.Itoa(w) + "_" + strconv.Itoa(i)
				if i%2 == 0 {
					f.st.put(record(id, "{}"), &storeRequest{replyTo: pid})
				} else {
					f.st.ask(&storeRequest{op: storeGet, id: id, replyTo: pid})
				}
				select {
				case r := <-c.replies:
					if r.err != nil {
						failed.Add(1)
					} else {
						ok.Add(1)
					}
				case <-time.After(15 * time.Second):
					t.Error("a store request got no answer")
					return
				}
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()
	t0 := time.Now()
	for range 5 {
		f.srv.Stop()
		f.srv.Restart()
	}
	t.Logf("5 stops and restarts in %v; %d answered, %d refused so far", time.Since(t0), ok.Load(), failed.Load())
	// Within a few seconds every request succeeds: a window of 200 in a row.
	deadline := time.Now().Add(5 * time.Second)
	for {
		before := failed.Load()
		base := ok.Load()
		for ok.Load() < base+200 && failed.Load() == before && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond) // polling the counters, bounded
		}
		if failed.Load() == before && ok.Load() >= base+200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis has been back 5 s and requests still fail (up %v, probing %v; %d refused)",
				f.st.up.Load(), f.st.probing.Load(), failed.Load())
		}
	}
}
