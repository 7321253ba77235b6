package store

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/vajra-go/vajra/internal/eventually"
	"github.com/vajra-go/vajra/internal/redistest"
)

// replyClient hands every Reply it gets to a channel.
type replyClient struct{ replies chan Reply }

func (c *replyClient) Receive(ctx actor.Context) {
	if r, ok := ctx.Message().(*Reply); ok {
		c.replies <- *r
	}
}

type redisFixture struct {
	t     *testing.T
	srv   *redistest.Server
	st    *redisStore
	pid   *actor.PID
	reply chan Reply
}

func newRedisFixture(t *testing.T, cfg Config) *redisFixture {
	t.Helper()
	var srv *redistest.Server
	if cfg.URL == "" {
		srv = redistest.Start(t)
		// Short socket timeouts, so that a stopped server fails commands
		// quickly (go-redis reads them from the URL, as operators set them).
		cfg.URL = srv.URL() + "?dial_timeout=300ms&read_timeout=300ms&write_timeout=300ms"
	}
	system := newSystem()
	c := &replyClient{replies: make(chan Reply, 4)}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return c }))
	st, err := newRedisStore(system, cfg, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.stop(); system.Shutdown() })
	return &redisFixture{t: t, srv: srv, st: st, pid: pid, reply: c.replies}
}

func (f *redisFixture) wait() Reply {
	f.t.Helper()
	select {
	case r := <-f.reply:
		return r
	case <-time.After(10 * time.Second):
		f.t.Fatal("no reply from the Redis store")
		return Reply{}
	}
}

func (f *redisFixture) save(rec *Record) Reply {
	f.st.put(rec, &Request{ReplyTo: f.pid})
	return f.wait()
}

func (f *redisFixture) ask(op Op, id string) Reply {
	f.st.ask(&Request{Op: op, ID: id, ReplyTo: f.pid})
	return f.wait()
}

func fullRecord(id string) *Record {
	rec := &Record{
		ID:   id,
		Body: []byte(`{"id":"` + id + `","object":"response","status":"completed"}`),
		Input: []openai.ResponseItem{
			{Type: "message", ID: "msg_1", Status: "completed", Role: "user",
				Content: []openai.ResponsesContentPart{{Type: "input_text", Text: "Hi \u2603"}}},
			{Type: "function_call_output", ID: "fco_1", CallID: "call_1", Output: `{"ok":true}`},
		},
		History: []engine.Message{
			{Role: "user", Content: "Hi \u2603"},
			{Role: "assistant", Content: "Hello", Reasoning: "think",
				ToolCalls: []engine.ToolCall{{ID: "call_1", Name: "f", Arguments: `{"a":1}`}}},
			{Role: "tool", ToolCallID: "call_1", Content: `{"ok":true}`},
		},
	}
	rec.Size = RecordSize(rec)
	return rec
}

func TestRedisStoreRoundTrip(t *testing.T) {
	f := newRedisFixture(t, Config{TTL: time.Hour, KeyPrefix: "t1:"})
	want := fullRecord("resp_a")
	if r := f.save(want); r.Err != nil {
		t.Fatalf("save: %v", r.Err)
	}
	got := f.ask(Get, "resp_a")
	if got.Err != nil || got.Rec == nil {
		t.Fatalf("get: %+v", got)
	}
	if string(got.Rec.Body) != string(want.Body) || got.Rec.ID != want.ID || got.Rec.Size != want.Size {
		t.Fatalf("record changed: %+v", got.Rec)
	}
	if len(got.Rec.Input) != 2 || got.Rec.Input[0].Content[0].Text != "Hi \u2603" || got.Rec.Input[1].CallID != "call_1" {
		t.Fatalf("input items: %+v", got.Rec.Input)
	}
	h := got.Rec.History
	if len(h) != 3 || h[1].ToolCalls[0].Arguments != `{"a":1}` || h[1].Reasoning != "think" || h[2].ToolCallID != "call_1" {
		t.Fatalf("History: %+v", h)
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
	if r := f.ask(Get, "resp_nope"); r.Err != nil || r.Rec != nil {
		t.Fatalf("unknown ID: %+v", r)
	}
	if r := f.ask(Delete, "resp_a"); r.Err != nil || r.Rec == nil {
		t.Fatalf("delete: %+v", r)
	}
	if r := f.ask(Get, "resp_a"); r.Rec != nil {
		t.Fatal("deleted record still there")
	}
	st := f.st.Stats()
	if st.Stored != 1 || st.Deleted != 1 || st.Ops.Count[opPut][resultOK] != 1 || st.Ops.Count[opGet][resultOK] != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRedisStoreEntryCap(t *testing.T) {
	f := newRedisFixture(t, Config{MaxEntryBytes: 256})
	rec := record("resp_big", `{"text":"`+strings.Repeat("x", 1000)+`"}`)
	if r := f.save(rec); !errors.Is(r.Err, ErrTooLarge) {
		t.Fatalf("over the cap: err = %v", r.Err)
	}
	if r := f.ask(Get, "resp_big"); r.Rec != nil {
		t.Fatal("an entry over the cap was stored")
	}
	if st := f.st.Stats(); st.SaveFailures != 1 || st.Ops.Count[opPut][resultTooLarge] != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Redis lost mid-run: commands fail with ErrUnavailable (the session
// answers 503), and once Redis is back the same store serves again, with
// no restart.
func TestRedisStoreOutageAndRecovery(t *testing.T) {
	f := newRedisFixture(t, Config{})
	if r := f.save(record("resp_1", "{}")); r.Err != nil {
		t.Fatal(r.Err)
	}
	f.srv.Stop()
	if r := f.ask(Get, "resp_1"); !errors.Is(r.Err, ErrUnavailable) {
		t.Fatalf("get with Redis down: %+v", r)
	}
	if r := f.save(record("resp_2", "{}")); !errors.Is(r.Err, ErrUnavailable) {
		t.Fatalf("save with Redis down: %+v", r)
	}
	if f.st.up.Load() {
		t.Fatal("the store still thinks Redis is up")
	}
	// While Redis is known down, commands fail at once (no dial timeout
	// per request).
	start := time.Now()
	if r := f.ask(Get, "resp_1"); !errors.Is(r.Err, ErrUnavailable) || time.Since(start) > time.Second {
		t.Fatalf("get while known down: %+v after %v", r, time.Since(start))
	}
	f.srv.Restart() // empty: nothing was persisted
	// The prober finds it back within a few probe intervals.
	eventually.True(t, "the store notices Redis is back", f.st.up.Load)
	if r := f.save(record("resp_3", "{}")); r.Err != nil {
		t.Fatalf("save after recovery: %v", r.Err)
	}
	if r := f.ask(Get, "resp_3"); r.Err != nil || r.Rec == nil {
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
	system := newSystem()
	defer system.Shutdown()
	st, err := newRedisStore(system, Config{URL: url}, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.stop()
	c := &replyClient{replies: make(chan Reply, 1)}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return c }))
	st.ask(&Request{Op: Get, ID: "x", ReplyTo: pid})
	select {
	case r := <-c.replies:
		if !errors.Is(r.Err, ErrUnavailable) {
			t.Fatalf("reply %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reply")
	}
}

func TestRedisStoreBadURL(t *testing.T) {
	system := newSystem()
	defer system.Shutdown()
	if _, err := newRedisStore(system, Config{URL: "http://127.0.0.1:1"}, zap.NewNop(), nil); err == nil {
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
	for name, cfg := range map[string]Config{
		"rediss": {URL: tlsSrv.URL(), CAFile: tlsSrv.CAFile()},
		"unix":   {URL: plain.SocketURL()},
	} {
		t.Run(name, func(t *testing.T) {
			f := newRedisFixture(t, cfg)
			if !f.st.up.Load() {
				t.Fatal("not connected")
			}
			if r := f.save(fullRecord("resp_" + name)); r.Err != nil {
				t.Fatal(r.Err)
			}
			if r := f.ask(Get, "resp_"+name); r.Err != nil || r.Rec == nil {
				t.Fatalf("get: %+v", r)
			}
		})
	}
	// Without the CA the server's certificate is refused: the store is
	// down (and says so), not silently insecure.
	system := newSystem()
	defer system.Shutdown()
	st, err := newRedisStore(system, Config{URL: tlsSrv.URL() + "?dial_timeout=300ms"}, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.stop()
	if st.up.Load() {
		t.Fatal("a certificate from an unknown CA was accepted")
	}
	if _, err := newRedisStore(system, Config{URL: plain.URL(), CAFile: tlsSrv.CAFile()}, zap.NewNop(), nil); err == nil {
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
	f := newRedisFixture(t, Config{})
	var once atomic.Bool
	f.st.upHook = func() {
		if once.CompareAndSwap(false, true) {
			// What a worker does when its command fails on a lost server.
			f.st.done(opGet, errors.New("dial tcp: connection refused"), time.Now())
		}
	}
	f.srv.Stop()
	if r := f.ask(Get, "resp_1"); !errors.Is(r.Err, ErrUnavailable) {
		t.Fatalf("get with Redis down: %+v", r)
	}
	f.srv.Restart()
	var last error
	eventually.Report(t, "the store answers once Redis is back", func() bool {
		last = f.ask(Get, "resp_1").Err
		return last == nil
	}, func() string { return fmt.Sprintf("%v (up %v, probing %v)", last, f.st.up.Load(), f.st.probing.Load()) })
	if !once.Load() {
		t.Fatal("the hook never ran: the test proved nothing")
	}
}

// TestRedisStoreFlappingUnderLoad: Redis stopped and started several
// times within a second while sessions save and read; within a few
// seconds of its last return every store request succeeds.
func TestRedisStoreFlappingUnderLoad(t *testing.T) {
	f := newRedisFixture(t, Config{})
	const workers = 8
	var stop atomic.Bool
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		c := &replyClient{replies: make(chan Reply, 1)}
		pid := f.st.root.Spawn(actor.PropsFromProducer(func() actor.Actor { return c }))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1_000_000 && !stop.Load(); i++ {
				id := "resp_" + strconv.Itoa(w) + "_" + strconv.Itoa(i)
				if i%2 == 0 {
					f.st.put(record(id, "{}"), &Request{ReplyTo: pid})
				} else {
					f.st.ask(&Request{Op: Get, ID: id, ReplyTo: pid})
				}
				select {
				case r := <-c.replies:
					if r.Err != nil {
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
	// Then every request succeeds: a window of 200 in a row, with no
	// refusal since the window began.
	before, base := failed.Load(), ok.Load()
	eventually.Report(t, "200 requests in a row succeed once Redis is back", func() bool {
		if failed.Load() != before {
			before, base = failed.Load(), ok.Load() // a refusal: the window starts again
			return false
		}
		return ok.Load() >= base+200
	}, func() string {
		return fmt.Sprintf("up %v, probing %v; %d refused", f.st.up.Load(), f.st.probing.Load(), failed.Load())
	})
}

// sameQueue returns an id other than id that the store serves on id's
// worker.
func sameQueue(st *redisStore, id string) string {
	for i := 0; ; i++ {
		if o := "resp_q" + strconv.Itoa(i); st.queue(o) == st.queue(id) {
			return o
		}
	}
}

// TestRedisCancelElsewhereFreesTheWorker: a cancel relayed to another node
// waits for that node's answer off the store's worker, so the saves and
// reads queued behind it on the same worker are served at once (it held
// the worker for up to 5 s); and it is answered as soon as the owner saved
// the cancelled record, through the "ended" message.
func TestRedisCancelElsewhereFreesTheWorker(t *testing.T) {
	asker := newRedisFixture(t, Config{})
	owner := newRedisFixture(t, Config{URL: asker.srv.URL()})
	running := func(id, status string) *Record {
		rec := record(id, `{"id":"`+id+`","status":"`+status+`"}`)
		rec.Background, rec.Status = true, status
		return rec
	}
	// A response "another node" runs and never answers for.
	if r := owner.save(running("resp_orphan", "in_progress")); r.Err != nil {
		t.Fatal(r.Err)
	}
	asker.st.ask(&Request{Op: Cancel, ID: "resp_orphan", ReplyTo: asker.pid})
	other := sameQueue(asker.st, "resp_orphan")
	start := time.Now()
	// The save is answered before the cancel, which waits for the owner
	// up to cancelWait (5 s): had the save waited behind it on the worker,
	// the cancel's reply (resp_orphan's record) would come first. Order,
	// not a time bound, says so; the time is logged.
	if r := asker.save(record(other, "{}")); r.Err != nil || r.Rec == nil || r.Rec.ID != other {
		t.Fatalf("the first reply after a save queued behind a relayed cancel: %+v, want the save's", r)
	}
	t.Logf("a save queued behind a relayed cancel answered in %v", time.Since(start))
	// Answered at the bound: the record as it is then, still in progress,
	// or failed once the owner's lease (as long as the bound) lapsed.
	if r := asker.wait(); r.Err != nil || r.Rec == nil || (r.Rec.Status != "in_progress" && r.Rec.Status != "failed") {
		t.Fatalf("the cancel nobody answered: %+v, want the record in progress or lapsed", r)
	}

	// An owner that answers: it saves the cancelled record when the cancel
	// reaches it (here, a subscriber standing in for its session).
	if r := owner.save(running("resp_live", "in_progress")); r.Err != nil {
		t.Fatal(r.Err)
	}
	sub := redis.NewClient(&redis.Options{Addr: asker.srv.Addr()})
	defer sub.Close()
	ps := sub.Subscribe(context.Background(), DefaultKeyPrefix+"cancel")
	defer ps.Close()
	if _, err := ps.Receive(context.Background()); err != nil {
		t.Fatal(err)
	}
	go func() {
		for m := range ps.Channel() {
			if m.Payload == "resp_live" {
				owner.st.put(running("resp_live", "cancelled"), nil)
				return
			}
		}
	}()
	start = time.Now()
	r := asker.ask(Cancel, "resp_live")
	if r.Err != nil || r.Rec == nil || r.Rec.Status != "cancelled" {
		t.Fatalf("cancel answered %+v, want the cancelled record", r)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the cancel was answered %v after the owner saved it", d)
	}
}

// TestRedisRunningElsewhere: a background response another node runs (its
// record in Redis, in progress, its lease fresh) is answered from that
// record: GET shows its progress, input_items and previous_response_id
// (Lookup) and DELETE see it running (Live, and kept), and a stream GET is
// refused (Elsewhere: its events are in the owner's memory only).
func TestRedisRunningElsewhere(t *testing.T) {
	f := newRedisFixture(t, Config{})
	rec := record("resp_run", `{"id":"resp_run","status":"in_progress"}`)
	rec.Background, rec.Status = true, "in_progress"
	if r := f.save(rec); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := f.ask(Get, "resp_run"); r.Err != nil || r.Rec == nil || r.Rec.Status != "in_progress" || r.Elsewhere {
		t.Fatalf("get: %+v", r)
	}
	f.st.ask(&Request{Op: Get, ID: "resp_run", ReplyTo: f.pid, Stream: struct{}{}})
	if r := f.wait(); !r.Elsewhere || r.Rec != nil || r.Err != nil {
		t.Fatalf("stream get of a response running elsewhere: %+v", r)
	}
	for _, op := range []Op{Lookup, Delete} {
		if r := f.ask(op, "resp_run"); r.Err != nil || r.Rec == nil || !r.Live {
			t.Fatalf("op %d: %+v, want the running record, live", op, r)
		}
	}
	if r := f.ask(Get, "resp_run"); r.Rec == nil {
		t.Fatal("DELETE removed a response still running")
	}
}
