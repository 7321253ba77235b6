// Package route chooses the worker of each request of the remote engine
// (engine/remote) among several: cache-aware (the worker that already
// holds the prompt's prefix, unless load says otherwise), least loaded,
// power of two choices, or round robin; with a circuit breaker per worker
// and a retry budget for requests refused before their first byte.
//
// A Router is an engine/remote.Router: the engine calls Route once per
// attempt, Done when the attempt's call ended, and Retry before trying
// another worker. The interface lives in engine/remote (the engine is its
// only caller, and the remote engine builds without this package); this
// package imports engine/remote for it and for the Worker's figures.
//
// Cost per request: hashing the prompt in blocks (about 1 ns per token,
// at most maxBlocks blocks), a binary search per worker in its block
// cache and one insert, each under that worker's own mutex; no
// allocation. Nothing here runs per token.
package route

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vajra-go/vajra/engine/remote"
)

// Policies.
const (
	CacheAware = "cache_aware"
	LeastLoad  = "least_load"
	PowerOfTwo = "power_of_two"
	RoundRobin = "round_robin"
)

// Policies lists the policy names, the default first.
var Policies = []string{CacheAware, LeastLoad, PowerOfTwo, RoundRobin}

// Defaults of Config; docs/configuration.md says why each.
const (
	DefaultBlockTokens    = 64
	DefaultCacheBlocks    = 16384 // per worker: 1 Mi tokens of 64
	DefaultCacheTTL       = 10 * time.Minute
	DefaultCacheThreshold = 0.3
	DefaultBalanceAbs     = 16
	DefaultBalanceRel     = 1.5
	DefaultLoadFresh      = 3 * time.Second

	DefaultBreakerFailures = 5
	DefaultBreakerCoolDown = 5 * time.Second
	DefaultMaxRetries      = 2
	DefaultRetryBackoff    = 20 * time.Millisecond
	DefaultRetryMaxBackoff = 500 * time.Millisecond
	DefaultRetryBudget     = 0.2
	DefaultRetryMinPerSec  = 10
)

// Config configures a Router. Zero fields take the defaults above.
type Config struct {
	// Policy is one of Policies ("" is cache_aware).
	Policy string
	// BlockTokens is the prefix block: prompts are compared by whole
	// blocks of this many tokens.
	BlockTokens int
	// CacheBlocks is the number of blocks remembered per worker (LRU).
	CacheBlocks int
	// CacheTTL ages a block out this long after it was last sent.
	CacheTTL time.Duration
	// CacheThreshold is the least fraction of the prompt a worker must
	// hold for cache_aware to prefer it to the least loaded worker.
	CacheThreshold float64
	// BalanceAbs and BalanceRel: when the most and least loaded workers
	// differ by more than BalanceAbs requests and by a factor above
	// BalanceRel, cache_aware routes by load alone.
	BalanceAbs int
	BalanceRel float64
	// LoadFresh is how old a worker's own load report may be to count.
	LoadFresh time.Duration
	// Breaker configures each worker's circuit breaker (zero fields: the
	// defaults; Failures < 0: no breaker).
	Breaker BreakerConfig
	// Retry bounds the retries of refused requests (zero fields: the
	// defaults; Max < 0: no retry).
	Retry RetryConfig
	// Now is the clock (nil: time.Now); tests pass a fake one.
	Now func() time.Time
}

func (c Config) withDefaults() (Config, error) {
	if c.Policy == "" {
		c.Policy = CacheAware
	}
	known := false
	for _, p := range Policies {
		known = known || p == c.Policy
	}
	if !known {
		return c, fmt.Errorf("--routing-policy %q: want one of %v", c.Policy, Policies)
	}
	if c.BlockTokens <= 0 {
		c.BlockTokens = DefaultBlockTokens
	}
	if c.CacheBlocks <= 0 {
		c.CacheBlocks = DefaultCacheBlocks
	}
	if c.CacheTTL == 0 {
		c.CacheTTL = DefaultCacheTTL
	}
	if c.CacheThreshold < 0 || c.CacheThreshold > 1 {
		return c, fmt.Errorf("--routing-cache-threshold %v: want 0..1", c.CacheThreshold)
	}
	if c.BalanceAbs <= 0 {
		c.BalanceAbs = DefaultBalanceAbs
	}
	if c.BalanceRel <= 0 {
		c.BalanceRel = DefaultBalanceRel
	}
	if c.LoadFresh <= 0 {
		c.LoadFresh = DefaultLoadFresh
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	b := &c.Breaker
	switch {
	case b.Failures == 0:
		b.Failures = DefaultBreakerFailures
	case b.Failures < 0:
		b.Failures = 0 // no breaker
	}
	if b.CoolDown <= 0 {
		b.CoolDown = DefaultBreakerCoolDown
	}
	rt := &c.Retry
	switch {
	case rt.Max == 0:
		rt.Max = DefaultMaxRetries
	case rt.Max < 0:
		rt.Max = 0
	}
	if rt.Backoff == 0 {
		rt.Backoff = DefaultRetryBackoff
	}
	if rt.MaxBackoff == 0 {
		rt.MaxBackoff = DefaultRetryMaxBackoff
	}
	if rt.Ratio == 0 {
		rt.Ratio = DefaultRetryBudget
	}
	if rt.MinPerSecond == 0 {
		rt.MinPerSecond = DefaultRetryMinPerSec
	}
	return c, nil
}

// Router implements remote.Router. Safe for concurrent use.
type Router struct {
	cfg    Config
	rr     atomic.Uint64
	budget *budget

	mu sync.Mutex // serializes adding a worker's state
	// pickMu serializes cache_aware's decisions (a few µs each): two
	// requests of one hot prefix routed at once see each other's load.
	pickMu sync.Mutex
	states atomic.Pointer[map[*remote.Worker]*wstate]
}

var _ remote.Router = (*Router)(nil)
var _ remote.Picker = (*Router)(nil)

// wstate is what the router keeps per worker.
type wstate struct {
	w     *remote.Worker
	br    breaker
	cache *prefixCache

	requests atomic.Uint64
	errors   atomic.Uint64
	// pending counts the requests routed here and not Done: the engine's
	// in-flight count trails it by the time from Route to the send.
	pending atomic.Int64
	// promptN and matchedN: prompt tokens routed here and how many of
	// them the router estimated the worker held; reportN and cachedN the
	// same as the worker reported them (cached_tokens).
	promptN, matchedN atomic.Uint64
	reportN, cachedN  atomic.Uint64
}

// New returns a Router for cfg.
func New(cfg Config) (*Router, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Router{cfg: cfg, budget: newBudget(cfg.Retry, cfg.Now().UnixNano())}
	r.states.Store(&map[*remote.Worker]*wstate{})
	return r, nil
}

// Policy is the router's policy name.
func (r *Router) Policy() string { return r.cfg.Policy }

func (r *Router) state(w *remote.Worker) *wstate {
	if st, ok := (*r.states.Load())[w]; ok {
		return st
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.states.Load()
	if st, ok := old[w]; ok {
		return st
	}
	m := make(map[*remote.Worker]*wstate, len(old)+1)
	for k, v := range old {
		if k.Draining() {
			continue // a removed worker's state goes with it
		}
		m[k] = v
	}
	st := &wstate{w: w, br: breaker{cfg: r.cfg.Breaker}}
	if r.cfg.Policy == CacheAware {
		st.cache = newPrefixCache(r.cfg.CacheBlocks, r.cfg.CacheTTL)
	}
	m[w] = st
	r.states.Store(&m)
	return st
}

// maxCand bounds the workers one pick considers on the stack; more are
// considered in slices of it (a pick among the first maxCand that pass).
const maxCand = 64

// Pick implements remote.Picker (no prompt: the load policies only).
func (r *Router) Pick(ws []*remote.Worker) *remote.Worker {
	return r.Route(ws, &remote.Query{N: 1}).Decode
}

// Route implements remote.Router: the workers whose circuit is open are
// left out, then the policy chooses.
func (r *Router) Route(ws []*remote.Worker, q *remote.Query) remote.Selection {
	now := r.cfg.Now()
	ns := now.UnixNano()
	if q.Attempt == 0 {
		r.budget.deposit()
	}
	var buf [maxCand]*wstate
	cand := buf[:0]
	for _, w := range ws {
		if len(cand) == maxCand {
			break
		}
		if st := r.state(w); st.br.available(ns) {
			cand = append(cand, st)
		}
	}
	if len(cand) == 0 {
		return remote.Selection{}
	}
	var pick *wstate
	matched := 0
	switch r.cfg.Policy {
	case RoundRobin:
		pick = cand[r.rr.Add(1)%uint64(len(cand))]
	case PowerOfTwo:
		pick = cand[0]
		if len(cand) > 1 {
			i := rand.N(len(cand))
			j := rand.N(len(cand) - 1)
			if j >= i {
				j++
			}
			pick = cand[i]
			if r.load(cand[j], now) < r.load(pick, now) {
				pick = cand[j]
			}
		}
	case LeastLoad:
		var loads [maxCand]int
		for i, st := range cand {
			loads[i] = r.load(st, now)
		}
		pick = cand[r.least(loads[:len(cand)], nil)]
	default:
		pick, matched = r.cacheAware(cand, q, now)
	}
	pick.br.acquire(ns)
	pick.requests.Add(1)
	if r.cfg.Policy != CacheAware {
		pick.pending.Add(1)
	}
	pick.promptN.Add(uint64(len(q.Prompt)))
	pick.matchedN.Add(uint64(matched))
	return remote.Selection{Decode: pick.w, Matched: matched}
}

// cacheAware is SGLang Model Gateway's rule with a saturation check:
// imbalanced load (max-min > BalanceAbs and max > BalanceRel*min) goes to
// the least loaded worker; otherwise to the worker holding the longest
// prefix when it covers CacheThreshold of the prompt and that worker is
// not saturated (load at its slots) while another is not; otherwise the
// least loaded. The prompt's blocks are then recorded on the chosen one.
func (r *Router) cacheAware(cand []*wstate, q *remote.Query, now time.Time) (*wstate, int) {
	ns := now.UnixNano()
	var hb [maxBlocks]uint64
	hs := hashBlocks(hb[:0], q.Prompt, r.cfg.BlockTokens, q.Salt)
	r.pickMu.Lock()
	defer r.pickMu.Unlock()
	var loads, own, caps, match [maxCand]int
	lo, hi := int(^uint(0)>>1), 0
	best := -1
	for i, st := range cand {
		l := r.load(st, now)
		loads[i], caps[i] = l, capacity(st.w)
		own[i] = max(st.w.InFlight(), int(st.pending.Load()))
		lo, hi = min(lo, l), max(hi, l)
		match[i] = st.cache.match(hs, ns)
		if match[i] > 0 && (best < 0 || match[i] > match[best] || match[i] == match[best] && l < loads[best]) {
			best = i
		}
	}
	n := len(cand)
	pick := -1
	imbalanced := hi-lo > r.cfg.BalanceAbs && float64(hi) > r.cfg.BalanceRel*float64(lo)
	if !imbalanced && best >= 0 && len(q.Prompt) > 0 &&
		float64(match[best]*r.cfg.BlockTokens) >= r.cfg.CacheThreshold*float64(len(q.Prompt)) {
		pick = best
		if caps[best] > 0 && own[best] >= caps[best] {
			// Saturated by Vajra's own requests (a worker's report lags:
			// it still counts requests that just ended): another worker
			// with a free slot takes it.
			for i := 0; i < n; i++ {
				if caps[i] > 0 && own[i] < caps[i] || caps[i] == 0 && own[i] < own[best] {
					pick = -1
					break
				}
			}
		}
	}
	if pick < 0 {
		pick = r.least(loads[:n], match[:n])
	}
	st := cand[pick]
	st.cache.insert(hs, ns)
	st.pending.Add(1)
	return st, min(match[pick]*r.cfg.BlockTokens, len(q.Prompt))
}

// least is the index of the least load; ties go to the longer match
// (when given), then round robin.
func (r *Router) least(loads, match []int) int {
	n := len(loads)
	start := int(r.rr.Add(1) % uint64(n))
	best := start
	for k := 1; k < n; k++ {
		i := (start + k) % n
		if loads[i] < loads[best] || loads[i] == loads[best] && match != nil && match[i] > match[best] {
			best = i
		}
	}
	return best
}

// load is a worker's load in requests: Vajra's own in flight (routed and
// not done, or the engine's count when higher), or the
// worker's report (running and waiting, which counts other clients' too)
// when that is fresh and higher.
func (r *Router) load(st *wstate, now time.Time) int {
	l := max(st.w.InFlight(), int(st.pending.Load()))
	if st.w.LoadAge(now) <= r.cfg.LoadFresh {
		rep := st.w.Load()
		l = max(l, rep.Running+rep.Waiting)
	}
	return l
}

// capacity is the requests a worker runs at once, 0 when unknown.
func capacity(w *remote.Worker) int {
	if info := w.Info(); info != nil && info.Slots > 0 {
		return info.Slots
	}
	return w.Load().Capacity
}

// Done implements remote.Router: the outcome feeds the worker's circuit
// breaker and figures.
func (r *Router) Done(sel remote.Selection, q *remote.Query, o remote.Outcome) {
	if sel.Decode == nil {
		return
	}
	st := r.state(sel.Decode)
	st.pending.Add(-1)
	ns := r.cfg.Now().UnixNano()
	switch o.Result {
	case remote.OutcomeFailed:
		st.errors.Add(1)
		st.br.record(ns, false, false)
	case remote.OutcomeCanceled:
		st.br.record(ns, false, true)
	default:
		st.br.record(ns, true, false)
	}
	if o.PromptTokens > 0 {
		st.reportN.Add(uint64(o.PromptTokens))
		st.cachedN.Add(uint64(min(o.CachedTokens, o.PromptTokens)))
	}
}

// Retry implements remote.Router: at most Retry.Max retries per request,
// within the retry budget, after a jittered exponential back-off.
func (r *Router) Retry(q *remote.Query, attempt int) (time.Duration, bool) {
	if attempt > r.cfg.Retry.Max || !r.budget.take(r.cfg.Now().UnixNano()) {
		return 0, false
	}
	return backoff(r.cfg.Retry, attempt), true
}

// WorkerStats is one worker as the router and the engine see it.
type WorkerStats struct {
	URL      string `json:"url"`
	State    string `json:"state"` // "healthy", "down", "draining"
	Circuit  string `json:"circuit"`
	InFlight int    `json:"in_flight"`
	Requests uint64 `json:"requests"`
	Errors   uint64 `json:"errors"`
	// PromptTokens routed to the worker, and how many of them the router
	// estimated it held (its prefix-hit ratio is their quotient);
	// ReportedPromptTokens and CachedTokens as the worker counted them.
	PromptTokens         uint64 `json:"prompt_tokens"`
	EstimatedHitTokens   uint64 `json:"estimated_hit_tokens"`
	ReportedPromptTokens uint64 `json:"reported_prompt_tokens"`
	CachedTokens         uint64 `json:"cached_tokens"`
	CachedBlocks         int    `json:"cached_blocks"`
	// Load is the worker's own last report, LoadAge its age in seconds
	// (-1: none yet).
	Load    LoadReport `json:"load"`
	LoadAge float64    `json:"load_age_seconds"`
}

// LoadReport is remote.Load with JSON names.
type LoadReport struct {
	Running  int     `json:"running"`
	Waiting  int     `json:"waiting"`
	KVUsage  float64 `json:"kv_usage"`
	Capacity int     `json:"capacity"`
	// The worker's prefix cache counters (vLLM's engine core only).
	PrefixQueries uint64 `json:"prefix_cache_queries,omitempty"`
	PrefixHits    uint64 `json:"prefix_cache_hits,omitempty"`
}

// Stats reports ws (the engine's workers, in order) with the router's
// figures. Not for the request path: it takes the caches' locks.
func (r *Router) Stats(ws []*remote.Worker) []WorkerStats {
	now := r.cfg.Now()
	out := make([]WorkerStats, 0, len(ws))
	for _, w := range ws {
		st := r.state(w)
		s := WorkerStats{
			URL: w.URL(), State: "healthy", Circuit: st.br.State(now.UnixNano()).String(),
			InFlight: w.InFlight(), Requests: st.requests.Load(), Errors: st.errors.Load(),
			PromptTokens: st.promptN.Load(), EstimatedHitTokens: st.matchedN.Load(),
			ReportedPromptTokens: st.reportN.Load(), CachedTokens: st.cachedN.Load(),
			Load: LoadReport(w.Load()), LoadAge: -1,
		}
		switch {
		case w.Draining():
			s.State = "draining"
		case !w.Healthy():
			s.State = "down"
		}
		if age := w.LoadAge(now); age < time.Hour*24*365 {
			s.LoadAge = age.Seconds()
		}
		if st.cache != nil {
			s.CachedBlocks = st.cache.size()
		}
		out = append(out, s)
	}
	return out
}
