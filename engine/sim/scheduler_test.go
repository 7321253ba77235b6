package sim

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/internal/eventually"
)

func TestTimingModel(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test")
	}
	e := newEngine(t, func(c *Config) { c.ITL = 10 * time.Millisecond; c.TTFT = 80 * time.Millisecond })
	req := chatReq("Timing.", 10)
	req.Sampling.IgnoreEOS = true
	t0 := time.Now()
	res, _, sink := run(t, e, req, true)
	total := time.Since(t0)
	if res.FirstToken < 80*time.Millisecond {
		t.Fatalf("first token after %s, below the TTFT floor", res.FirstToken)
	}
	// 9 steps after the first token.
	if gap := res.EndToEnd - res.FirstToken; gap < 85*time.Millisecond || total > 2*time.Second {
		t.Fatalf("10 tokens at 10ms ITL: %s after the first token", gap)
	}
	if sink.delivers != 10 {
		t.Fatalf("%d deliveries for 10 steps", sink.delivers)
	}

	// Prefill: 2,000 tokens at 10,000 tokens/s is 200ms.
	e2 := newEngine(t, func(c *Config) { c.PrefillTPS = 10000; c.ITL = time.Millisecond })
	req = &engine.Request{PromptTokens: make([]int32, 2000), Sampling: engine.Sampling{MaxTokens: 2}}
	res, _, _ = run(t, e2, req, false)
	if res.FirstToken < 190*time.Millisecond || res.FirstToken > 2*time.Second { // the upper bound: a stall detector, 10x
		t.Fatalf("prefill of 2000 tokens at 10k/s took %s", res.FirstToken)
	}
	// The same prompt again is served from the prefix cache: only its last
	// partial block (16 tokens) is prefilled. What is asserted is what was
	// prefilled, from the engine's counters, not how long it took: the
	// first token's time is only checked for a stall.
	req = &engine.Request{PromptTokens: make([]int32, 2000), Sampling: engine.Sampling{MaxTokens: 2}}
	res, _, _ = run(t, e2, req, false)
	if res.Usage.CachedTokens != 1984 || res.FirstToken > 2*time.Second {
		t.Fatalf("cached %d tokens, first token after %s", res.Usage.CachedTokens, res.FirstToken)
	}
	if st := e2.Stats(); st.PromptTokens != 4000 || st.PrefixHits != 1984 {
		t.Fatalf("prompt tokens %d, prefix hits %d: want 4000 and 1984 (16 of the second prompt prefilled)", st.PromptTokens, st.PrefixHits)
	}
}

func TestPrefixCacheHits(t *testing.T) {
	e := newEngine(t, nil)
	long := strings.Repeat("The river runs past the mill and the wheel turns. ", 20)
	first, _, _ := run(t, e, chatReq(long+"First question?", 5), false)
	if first.Usage.CachedTokens != 0 {
		t.Fatalf("cold cache hit %d tokens", first.Usage.CachedTokens)
	}
	second, f, _ := run(t, e, chatReq(long+"Second question?", 5), true)
	c := second.Usage.CachedTokens
	if c == 0 || c%BlockSize != 0 || c >= second.Usage.PromptTokens || c < second.Usage.PromptTokens-3*BlockSize {
		t.Fatalf("cached %d of %d prompt tokens", c, second.Usage.PromptTokens)
	}
	if f.start.CachedTokens != c {
		t.Fatalf("Start.CachedTokens %d", f.start.CachedTokens)
	}
	st := e.Stats()
	if st.PrefixHits != uint64(c) || st.PrefixQueries != uint64(first.Usage.PromptTokens+second.Usage.PromptTokens) {
		t.Fatalf("stats %+v", st)
	}
	if st.KVBlocksUsed != 0 || st.PromptTokens != st.PrefixQueries {
		t.Fatalf("blocks still held or prompt tokens miscounted: %+v", st)
	}
}

func TestKVCacheLRU(t *testing.T) {
	kv := newKVCache(4)
	a, b := kv.alloc(), kv.alloc()
	kv.register(a, 1)
	kv.register(b, 2)
	kv.release(a)
	kv.release(b)
	if kv.free() != 4 || kv.used != 0 {
		t.Fatalf("free %d used %d", kv.free(), kv.used)
	}
	if hits, free := kv.lookup([]uint64{1, 2, 3}); hits != 2 || free != 2 {
		t.Fatalf("lookup: %d hits, %d free", hits, free)
	}
	kv.acquire(kv.table[2]) // 2 is in use again; 1 stays evictable
	kv.alloc()
	kv.alloc() // the two never-cached blocks
	c := kv.alloc()
	if c != a || kv.free() != 0 {
		t.Fatalf("evicted %d, want the LRU block %d", c, a)
	}
	if hits, _ := kv.lookup([]uint64{1}); hits != 0 {
		t.Fatal("evicted hash still found")
	}
}

func TestPreemption(t *testing.T) {
	// 64 blocks of 16 tokens; 8 requests of about 30+200 tokens need 15
	// blocks each, so they cannot all run at once.
	// A 1ms step lets all 8 be admitted before any finishes.
	cfg := func(c *Config) { c.KVCacheTokens = 64 * BlockSize; c.MaxModelLen = 512; c.ITL = time.Millisecond }
	e := newEngine(t, cfg)
	const n = 8
	var reqs [n]*engine.Request
	var sinks [n]*recSink
	var fmts [n]*recFormatter
	for i := range n {
		reqs[i] = chatReq("Preempt me number "+itoaT(i)+".", 200)
		reqs[i].Sampling.IgnoreEOS = true
		fmts[i] = &recFormatter{}
		reqs[i].Stream, reqs[i].Formatter = true, fmts[i]
		sinks[i] = newSink()
		if _, err := e.Start(reqs[i], sinks[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		res := sinks[i].wait(t)
		c := res.Choices[0]
		if res.Err != nil || len(c.TokenIDs) != 200 || fmts[i].text(0, engine.DeltaText) != c.Text || fmts[i].starts != 1 {
			t.Fatalf("request %d: err %v, %d tokens, stream matches %v", i, res.Err, len(c.TokenIDs),
				fmts[i].text(0, engine.DeltaText) == c.Text)
		}
		// Same output as without memory pressure.
		ref := newEngineShared(t)
		want, _, _ := run(t, ref, func() *engine.Request {
			r := chatReq("Preempt me number "+itoaT(i)+".", 200)
			r.Sampling.IgnoreEOS = true
			return r
		}(), false)
		if want.Choices[0].Text != c.Text {
			t.Fatalf("request %d: output changed by preemption", i)
		}
	}
	st := e.Stats()
	if st.Preemptions == 0 {
		t.Fatal("no preemption under KV pressure")
	}
	if st.Running != 0 || st.KVBlocksUsed != 0 || st.Waiting != 0 {
		t.Fatalf("after the run: %+v", st)
	}
	t.Logf("preemptions: %d", st.Preemptions)
}

var sharedRef *Engine

// newEngineShared is one roomy engine shared by reference runs.
func newEngineShared(t *testing.T) *Engine {
	if sharedRef == nil {
		e, err := New(Config{ITL: 0, Config: engine.Config{MaxModelLen: 512, KVCacheTokens: 1 << 16}})
		if err != nil {
			t.Fatal(err)
		}
		sharedRef = e
	}
	return sharedRef
}

func TestAbortUnderLoad(t *testing.T) {
	e := newEngine(t, func(c *Config) { c.ITL = 5 * time.Millisecond; c.MaxNumSeqs = 16 })
	const n = 40 // 16 run, 24 wait
	sessions := make([]engine.Session, n)
	sinks := make([]*recSink, n)
	for i := range n {
		req := chatReq("Abort me.", 5000)
		req.Sampling.IgnoreEOS = true
		req.Stream, req.Formatter = true, &recFormatter{noStore: true}
		sinks[i] = newSink()
		s, err := e.Start(req, sinks[i])
		if err != nil {
			t.Fatal(err)
		}
		sessions[i] = s
	}
	// Wait until the first request streams.
	eventually.True(t, "the first request streams", func() bool {
		sinks[0].mu.Lock()
		defer sinks[0].mu.Unlock()
		return sinks[0].delivers > 1
	})
	for i, s := range sessions {
		s.Abort()
		if i%2 == 0 {
			go s.Abort() // idempotent, from any goroutine
		}
	}
	for i := range n {
		res := sinks[i].wait(t)
		if !errors.Is(res.Err, engine.ErrAborted) || res.Choices[0].FinishReason != engine.FinishAbort {
			t.Fatalf("request %d: err %v finish %q", i, res.Err, res.Choices[0].FinishReason)
		}
	}
	st := e.Stats()
	if st.Running != 0 || st.Waiting != 0 || st.KVBlocksUsed != 0 {
		t.Fatalf("after aborts: %+v", st)
	}
	sessions[0].Abort() // after the end: no-op
}

func TestOverloadAndClose(t *testing.T) {
	e := newEngine(t, func(c *Config) { c.ITL = time.Hour; c.MaxNumSeqs = 1; c.MaxWaiting = 2 })
	start := func() (*recSink, error) {
		s := newSink()
		_, err := e.Start(chatReq("Queue me.", 100), s)
		return s, err
	}
	first, err := start()
	if err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the first request runs", func() bool { return e.Stats().Running == 1 })
	var queued []*recSink
	for range 2 {
		s, err := start()
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, s)
	}
	if _, err := start(); !errors.Is(err, engine.ErrOverloaded) {
		t.Fatalf("third waiting request: %v", err)
	}
	if st := e.Stats(); st.Waiting != 2 || st.Running != 1 || !st.Healthy {
		t.Fatalf("stats %+v", st)
	}
	e.Close()
	for _, s := range append(queued, first) {
		if res := s.wait(t); !errors.Is(res.Err, engine.ErrAborted) {
			t.Fatalf("on close: %v", res.Err)
		}
	}
	if _, err := start(); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	if e.Stats().Healthy || e.Close() != nil {
		t.Fatal("closed engine healthy, or second Close failed")
	}
}

func TestCloseStreamsError(t *testing.T) {
	e := newEngine(t, func(c *Config) { c.ITL = time.Hour })
	req := chatReq("Close me.", 10)
	f := &recFormatter{}
	req.Stream, req.Formatter = true, f
	sink := newSink()
	if _, err := e.Start(req, sink); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the request runs", func() bool { return e.Stats().Running == 1 })
	e.Close()
	sink.wait(t)
	if len(f.errs) != 1 || !strings.HasSuffix(string(sink.frames), "ERR\n") {
		t.Fatalf("no in-stream error on shutdown: %q", sink.frames)
	}
}

// TestQueueDrainsWithoutArrivals: when the last running request finishes in
// a pass, the waiting one behind it is admitted without a new Start.
func TestQueueDrainsWithoutArrivals(t *testing.T) {
	e := newEngine(t, func(c *Config) { c.MaxNumSeqs = 1; c.ITL = time.Millisecond })
	var sinks []*recSink
	for range 3 {
		s := newSink()
		req := chatReq("Queue.", 3)
		req.Sampling.IgnoreEOS = true
		if _, err := e.Start(req, s); err != nil {
			t.Fatal(err)
		}
		sinks = append(sinks, s)
	}
	for _, s := range sinks {
		if res := s.wait(t); res.Err != nil || len(res.Choices[0].TokenIDs) != 3 {
			t.Fatalf("result %+v", res)
		}
	}
}

func TestLoadFactor(t *testing.T) {
	e, err := newEngineNoLoop(Config{Config: engine.Config{MaxNumSeqs: 4}, ITL: 10 * time.Millisecond, LoadFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	f := func(running int, want time.Duration) {
		t.Helper()
		e.runningSeqs = running
		if got := e.stepDur(); got != want {
			t.Errorf("%d running: step %s, want %s", running, got, want)
		}
	}
	f(0, 10*time.Millisecond)
	f(2, 15*time.Millisecond)
	f(4, 20*time.Millisecond)
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{
		{ITL: -1}, {Mode: "poetry"}, {PrefillTPS: -1}, {Config: engine.Config{MaxModelLen: 4096, KVCacheTokens: 1024}},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
	// Settings of a real model the simulator cannot honour are refused,
	// never ignored.
	for _, c := range []engine.Config{{ChatTemplate: "{{ x }}"}, {ReasoningParser: "qwen3"}, {ToolCallParser: "hermes"}} {
		if _, err := New(Config{Config: c}); !errors.Is(err, engine.ErrUnsupportedSetting) {
			t.Errorf("New with %+v: %v, want engine.ErrUnsupportedSetting", c, err)
		}
	}
}
