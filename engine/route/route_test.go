package route

import (
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine/remote"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ ns atomic.Int64 }

func newClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Add(d time.Duration)     { c.ns.Add(int64(d)) }
func (c *fakeClock) nano() int64             { return c.ns.Load() }
func (c *fakeClock) since(t time.Time) int64 { return c.ns.Load() - t.UnixNano() }

func workers(n, slots int) []*remote.Worker {
	ws := make([]*remote.Worker, n)
	for i := range ws {
		ws[i] = remote.NewTestWorker("llama-server://w"+strconv.Itoa(i), &remote.Info{Slots: slots})
	}
	return ws
}

func newRouter(t testing.TB, cfg Config) (*Router, *fakeClock) {
	t.Helper()
	clk := newClock()
	if cfg.Now == nil {
		cfg.Now = clk.Now
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r, clk
}

// tokens returns n token ids from seed (distinct seeds: distinct prompts).
func tokens(seed uint64, n int) []int32 {
	rng := rand.New(rand.NewPCG(seed, 7))
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(32000))
	}
	return out
}

// pick routes q and ends the request at once (as a finished request).
func pick(r *Router, ws []*remote.Worker, q *remote.Query) remote.Selection {
	sel := r.Route(ws, q)
	r.Done(sel, q, remote.Outcome{})
	return sel
}

func index(ws []*remote.Worker, w *remote.Worker) int {
	for i, x := range ws {
		if x == w {
			return i
		}
	}
	return -1
}

// TestCacheAwareKeepsConversations: follow-ups of a conversation (its
// prompt grown by the answer and a new message) land where it started,
// and new conversations spread over the workers.
func TestCacheAwareKeepsConversations(t *testing.T) {
	r, _ := newRouter(t, Config{})
	ws := workers(3, 4)
	first := make([]int, 30)
	perWorker := make([]int, 3)
	for c := range first {
		p := tokens(uint64(c), 600)
		sel := pick(r, ws, &remote.Query{Prompt: p, N: 1})
		first[c] = index(ws, sel.Decode)
		perWorker[first[c]]++
		if sel.Matched != 0 {
			t.Fatalf("conversation %d: a new prompt matched %d tokens", c, sel.Matched)
		}
	}
	for i, n := range perWorker {
		if n < 5 {
			t.Fatalf("worker %d got %d of 30 new conversations: %v", i, n, perWorker)
		}
	}
	for turn := 1; turn <= 4; turn++ {
		for c := range first {
			p := append(tokens(uint64(c), 600), tokens(uint64(1000+c*10+turn), 100*turn)...)
			sel := pick(r, ws, &remote.Query{Prompt: p, N: 1})
			if got := index(ws, sel.Decode); got != first[c] {
				t.Fatalf("conversation %d turn %d went to worker %d, started on %d", c, turn, got, first[c])
			}
			if sel.Matched < 576 {
				t.Fatalf("conversation %d turn %d: matched %d tokens, want >= 576", c, turn, sel.Matched)
			}
		}
	}
	st := r.Stats(ws)
	for _, s := range st {
		if s.EstimatedHitTokens == 0 || s.EstimatedHitTokens >= s.PromptTokens {
			t.Fatalf("stats: %+v", s)
		}
	}
}

// TestCacheAwareSalt: vLLM's cache_salt keeps a prompt's prefix cache
// apart from other salts' (the worker hashes the salt into its first
// block): the router matches a prompt only against prompts with the same
// salt, and the same salt follows its conversation.
func TestCacheAwareSalt(t *testing.T) {
	r, _ := newRouter(t, Config{})
	ws := workers(2, 4)
	p := tokens(1, 600)
	sel := pick(r, ws, &remote.Query{Prompt: p, N: 1, Salt: "tenant-a"})
	home := index(ws, sel.Decode)
	for _, c := range []struct {
		salt  string
		match bool
	}{{"tenant-a", true}, {"tenant-b", false}, {"", false}} {
		sel := pick(r, ws, &remote.Query{Prompt: p, N: 1, Salt: c.salt})
		if got := sel.Matched > 0; got != c.match {
			t.Fatalf("salt %q after tenant-a's prompt: matched %d tokens", c.salt, sel.Matched)
		}
		if c.match && index(ws, sel.Decode) != home {
			t.Fatalf("salt %q: went to worker %d, its prefix is on %d", c.salt, index(ws, sel.Decode), home)
		}
	}
	// Salted and unsalted hashes differ from the first block on, and the
	// salt changes every block after it.
	var a, b [maxBlocks]uint64
	ha, hb := hashBlocks(a[:0], p, 16, "tenant-a"), hashBlocks(b[:0], p, 16, "")
	for i := range ha {
		if ha[i] == hb[i] {
			t.Fatalf("block %d: the salted hash equals the unsalted one", i)
		}
	}
}

// TestCacheAwareSpreadsWhenSaturated: one hot prefix stays on its worker
// until that worker's slots are full, then spills to the others.
func TestCacheAwareSpreadsWhenSaturated(t *testing.T) {
	r, _ := newRouter(t, Config{})
	ws := workers(3, 2)
	hot := tokens(1, 800)
	got := make([]int, 3)
	var running []remote.Selection
	for i := 0; i < 6; i++ {
		sel := r.Route(ws, &remote.Query{Prompt: hot, N: 1}) // the request runs on
		running = append(running, sel)
		got[index(ws, sel.Decode)]++
	}
	for i, n := range got {
		if n != 2 {
			t.Fatalf("6 requests of one prefix over 3 workers of 2 slots: %v (worker %d)", got, i)
		}
	}
	// With the slots free again, the prefix goes back to a holder.
	for _, sel := range running {
		r.Done(sel, &remote.Query{}, remote.Outcome{})
	}
	sel := pick(r, ws, &remote.Query{Prompt: hot, N: 1})
	if sel.Matched < 768 {
		t.Fatalf("matched %d after the spill, want a holder (>= 768)", sel.Matched)
	}
}

// TestCacheAwareImbalance: a worker far more loaded than the others (no
// slots known) loses its prefix's requests to the least loaded.
func TestCacheAwareImbalance(t *testing.T) {
	r, _ := newRouter(t, Config{BalanceAbs: 8, BalanceRel: 1.5})
	ws := workers(2, 0)
	p := tokens(3, 300)
	sel := pick(r, ws, &remote.Query{Prompt: p, N: 1})
	holder := sel.Decode
	holder.TestAddInFlight(8)
	if sel = pick(r, ws, &remote.Query{Prompt: p, N: 1}); sel.Decode != holder {
		t.Fatal("a difference of 8 (not above BalanceAbs) moved the prefix")
	}
	holder.TestAddInFlight(1)
	if sel = pick(r, ws, &remote.Query{Prompt: p, N: 1}); sel.Decode == holder {
		t.Fatal("a difference of 9 > BalanceAbs and 9 > 1.5*0 kept the prefix on its loaded worker")
	}
}

// TestCacheAwareThreshold: a match below CacheThreshold of the prompt
// does not decide; load does.
func TestCacheAwareThreshold(t *testing.T) {
	r, _ := newRouter(t, Config{CacheThreshold: 0.5})
	ws := workers(2, 0)
	sys := tokens(4, 128)
	sel := pick(r, ws, &remote.Query{Prompt: sys})
	holder := sel.Decode
	holder.TestAddInFlight(1)
	// 128 of 192 held (2/3): the holder, though busier.
	mid := append(append([]int32{}, sys...), tokens(6, 64)...)
	if sel = pick(r, ws, &remote.Query{Prompt: mid}); sel.Decode != holder {
		t.Fatal("two thirds of the prompt held lost to load 1 against 0")
	}
	// 128 of 384 tokens held (1/3 < 0.5): the idle worker.
	long := append(append([]int32{}, sys...), tokens(5, 256)...)
	if sel = pick(r, ws, &remote.Query{Prompt: long}); sel.Decode == holder {
		t.Fatal("a third of the prompt held beat the threshold of 0.5")
	}
}

// TestCacheAgesOut: a prefix not sent for CacheTTL no longer counts.
func TestCacheAgesOut(t *testing.T) {
	r, clk := newRouter(t, Config{CacheTTL: time.Minute})
	ws := workers(2, 0)
	p := tokens(7, 256)
	sel := pick(r, ws, &remote.Query{Prompt: p})
	clk.Add(59 * time.Second)
	if s := pick(r, ws, &remote.Query{Prompt: p}); s.Matched != 256 || s.Decode != sel.Decode {
		t.Fatalf("within the TTL: matched %d", s.Matched)
	}
	clk.Add(61 * time.Second)
	if s := pick(r, ws, &remote.Query{Prompt: p}); s.Matched != 0 {
		t.Fatalf("past the TTL: matched %d, want 0", s.Matched)
	}
}

// TestPrefixCacheBounded: the cache never holds more than its capacity,
// keeps the most recent prompts, and its binary search agrees with a
// block-by-block scan after many evictions.
func TestPrefixCacheBounded(t *testing.T) {
	c := newPrefixCache(100, 0)
	var hb [maxBlocks]uint64
	now := int64(1)
	for i := 0; i < 500; i++ {
		hs := hashBlocks(hb[:0], tokens(uint64(i%60), 16*(1+i%13)), 16, "")
		c.insert(hs, now)
		now++
		if c.size() > 100 {
			t.Fatalf("size %d > capacity 100", c.size())
		}
		// Every prompt's leading run of held blocks is what match says.
		for j := 0; j < 60; j += 7 {
			hs := hashBlocks(hb[:0], tokens(uint64(j), 16*13), 16, "")
			scan := 0
			for scan < len(hs) && c.has(hs[scan], now) {
				scan++
			}
			for k := scan; k < len(hs); k++ {
				if c.has(hs[k], now) {
					t.Fatalf("prompt %d: block %d held after a miss at %d", j, k, scan)
				}
			}
			if m := c.match(hs, now); m != scan {
				t.Fatalf("prompt %d: match %d, scan %d", j, m, scan)
			}
		}
	}
	last := hashBlocks(hb[:0], tokens(uint64(499%60), 16*(1+499%13)), 16, "")
	if m := c.match(last, now); m != len(last) {
		t.Fatalf("the last prompt: %d of %d blocks held", m, len(last))
	}
}

// TestLeastLoad counts Vajra's requests in flight and the worker's own
// report while it is fresh.
func TestLeastLoad(t *testing.T) {
	r, clk := newRouter(t, Config{Policy: LeastLoad, LoadFresh: 2 * time.Second})
	ws := workers(3, 0)
	ws[0].TestAddInFlight(2)
	ws[1].TestAddInFlight(1)
	ws[2].TestAddInFlight(1)
	ws[2].TestSetLoad(remote.Load{Running: 3, Waiting: 2}, clk.Now())
	for i := 0; i < 10; i++ {
		if w := pick(r, ws, &remote.Query{}).Decode; w != ws[1] {
			t.Fatalf("picked %s, want w1 (loads 2, 1, 5)", w.URL())
		}
	}
	clk.Add(3 * time.Second) // w2's report is stale: load 1, ties with w1
	seen := map[*remote.Worker]int{}
	for i := 0; i < 10; i++ {
		seen[pick(r, ws, &remote.Query{}).Decode]++
	}
	if seen[ws[0]] != 0 || seen[ws[1]] == 0 || seen[ws[2]] == 0 {
		t.Fatalf("after the report aged: %v", seen)
	}
}

// TestPowerOfTwo never picks the worker more loaded than both others.
func TestPowerOfTwo(t *testing.T) {
	r, _ := newRouter(t, Config{Policy: PowerOfTwo})
	ws := workers(3, 0)
	ws[0].TestAddInFlight(10)
	seen := map[*remote.Worker]int{}
	for i := 0; i < 300; i++ {
		seen[pick(r, ws, &remote.Query{}).Decode]++
	}
	if seen[ws[0]] != 0 || seen[ws[1]] < 50 || seen[ws[2]] < 50 {
		t.Fatalf("power of two over loads 10, 0, 0: %v", seen)
	}
}

// TestRoundRobin takes the workers in turn.
func TestRoundRobin(t *testing.T) {
	r, _ := newRouter(t, Config{Policy: RoundRobin})
	ws := workers(3, 0)
	ws[0].TestAddInFlight(100) // load does not matter
	got := make([]int, 3)
	for i := 0; i < 30; i++ {
		got[index(ws, pick(r, ws, &remote.Query{Prompt: tokens(1, 200)}).Decode)]++
	}
	if got[0] != 10 || got[1] != 10 || got[2] != 10 {
		t.Fatalf("round robin: %v", got)
	}
}

// TestBreaker: open after Failures consecutive failures, closed to new
// requests during the cool-down, one trial after it, reopened by a failed
// trial and closed by a good one.
func TestBreaker(t *testing.T) {
	clk := newClock()
	b := &breaker{cfg: BreakerConfig{Failures: 3, CoolDown: 5 * time.Second}}
	for i := 0; i < 2; i++ {
		b.record(clk.nano(), false, false)
	}
	b.record(clk.nano(), true, false) // a success resets the count
	for i := 0; i < 2; i++ {
		b.record(clk.nano(), false, false)
	}
	if !b.available(clk.nano()) || b.State(clk.nano()) != Closed {
		t.Fatal("open after 2 consecutive failures")
	}
	b.record(clk.nano(), false, false)
	if b.available(clk.nano()) || b.State(clk.nano()) != Open {
		t.Fatal("not open after 3 consecutive failures")
	}
	clk.Add(4 * time.Second)
	if b.available(clk.nano()) {
		t.Fatal("available within the cool-down")
	}
	clk.Add(time.Second)
	if !b.available(clk.nano()) || !b.acquire(clk.nano()) {
		t.Fatal("no trial after the cool-down")
	}
	if b.available(clk.nano()) {
		t.Fatal("a second trial while one runs")
	}
	b.record(clk.nano(), false, false)
	if b.State(clk.nano()) != Open || b.available(clk.nano()) {
		t.Fatal("a failed trial did not reopen the circuit")
	}
	clk.Add(5 * time.Second)
	b.acquire(clk.nano())
	b.record(clk.nano(), false, true) // canceled: frees the slot, decides nothing
	if b.State(clk.nano()) != HalfOpen || !b.available(clk.nano()) {
		t.Fatalf("after a canceled trial: %v", b.State(clk.nano()))
	}
	b.acquire(clk.nano())
	b.record(clk.nano(), true, false)
	if b.State(clk.nano()) != Closed || !b.available(clk.nano()) {
		t.Fatal("a good trial did not close the circuit")
	}
}

// TestRouterCircuit: a worker whose requests fail gets none while its
// circuit is open, and traffic again once a trial succeeds.
func TestRouterCircuit(t *testing.T) {
	r, clk := newRouter(t, Config{Policy: RoundRobin, Breaker: BreakerConfig{Failures: 2, CoolDown: time.Second}})
	ws := workers(2, 0)
	fail := remote.Outcome{Result: remote.OutcomeFailed, Status: 500}
	r.Done(remote.Selection{Decode: ws[0]}, &remote.Query{}, fail)
	r.Done(remote.Selection{Decode: ws[0]}, &remote.Query{}, fail)
	for i := 0; i < 10; i++ {
		if w := r.Route(ws, &remote.Query{}).Decode; w != ws[1] {
			t.Fatal("a request went to the open circuit")
		}
	}
	if s := r.Stats(ws)[0]; s.Circuit != "open" || s.Errors != 2 {
		t.Fatalf("stats: %+v", s)
	}
	// Both open: the request is refused.
	r.Done(remote.Selection{Decode: ws[1]}, &remote.Query{}, fail)
	r.Done(remote.Selection{Decode: ws[1]}, &remote.Query{}, fail)
	if sel := r.Route(ws, &remote.Query{}); sel.Decode != nil {
		t.Fatal("a request routed with every circuit open")
	}
	clk.Add(time.Second)
	sel := r.Route(ws, &remote.Query{})
	if sel.Decode == nil {
		t.Fatal("no trial after the cool-down")
	}
	r.Done(sel, &remote.Query{}, remote.Outcome{})
	seen := map[*remote.Worker]bool{}
	for i := 0; i < 4; i++ {
		s := r.Route(ws, &remote.Query{})
		if s.Decode != nil {
			seen[s.Decode] = true
			if s.Decode == sel.Decode {
				continue
			}
			r.Done(s, &remote.Query{}, remote.Outcome{})
		}
	}
	if !seen[sel.Decode] {
		t.Fatal("the recovered worker got no traffic")
	}
}

// TestRetry: at most Max retries, within the budget, each after a
// jittered back-off in the upper half of its doubling step.
func TestRetry(t *testing.T) {
	r, clk := newRouter(t, Config{Retry: RetryConfig{Max: 2, Backoff: 10 * time.Millisecond,
		MaxBackoff: 15 * time.Millisecond, Ratio: 0.5, MinPerSecond: 1}})
	q := &remote.Query{}
	for i := 0; i < 50; i++ {
		d, ok := r.Retry(q, 1)
		if i == 0 && (!ok || d < 5*time.Millisecond || d > 10*time.Millisecond) {
			t.Fatalf("first retry: %v %v", d, ok)
		}
		if i > 0 && ok {
			t.Fatalf("retry %d past the budget (1 per second, no requests)", i)
		}
	}
	if d, ok := r.Retry(q, 3); ok {
		t.Fatalf("a third retry with Max 2 (%v)", d)
	}
	ws := workers(1, 0)
	for i := 0; i < 10; i++ {
		pick(r, ws, &remote.Query{})
	}
	n := 0
	for i := 0; i < 10; i++ {
		if d, ok := r.Retry(q, 2); ok {
			n++
			if d < 7500*time.Microsecond || d > 15*time.Millisecond {
				t.Fatalf("second retry's back-off %v, want 7.5..15 ms (capped)", d)
			}
		}
	}
	if n != 5 {
		t.Fatalf("10 requests at ratio 0.5 bought %d retries, want 5", n)
	}
	clk.Add(2 * time.Second)
	if _, ok := r.Retry(q, 1); !ok {
		t.Fatal("no retry after 2 s at 1 per second")
	}
}

// TestRouteAllocs: a cache-aware pick allocates nothing.
func TestRouteAllocs(t *testing.T) {
	r, _ := newRouter(t, Config{})
	ws := workers(3, 0)
	p := tokens(9, 2048)
	q := &remote.Query{Prompt: p}
	pick(r, ws, q)
	if a := testing.AllocsPerRun(200, func() { pick(r, ws, q) }); a != 0 {
		t.Fatalf("%v allocations per cache-aware pick", a)
	}
}

func TestBadPolicy(t *testing.T) {
	if _, err := New(Config{Policy: "random"}); err == nil {
		t.Fatal("an unknown policy accepted")
	}
}

// BenchmarkRoute: one pick over 3 workers holding 10,000 cached prefixes
// (of 512 tokens each) for a 1,024-token prompt whose first half is one
// of them.
func BenchmarkRoute(b *testing.B) {
	for _, pol := range Policies {
		b.Run(pol, func(b *testing.B) {
			r, _ := newRouter(b, Config{Policy: pol, CacheBlocks: 1 << 16})
			ws := workers(3, 0)
			const prefixes = 10000
			prompts := make([][]int32, 64)
			for i := 0; i < prefixes; i++ {
				pick(r, ws, &remote.Query{Prompt: tokens(uint64(i), 512)})
			}
			for i := range prompts {
				prompts[i] = append(tokens(uint64(i*97), 512), tokens(uint64(prefixes+i), 512)...)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				q := &remote.Query{Prompt: prompts[i%len(prompts)]}
				r.Done(r.Route(ws, q), q, remote.Outcome{})
			}
		})
	}
}
