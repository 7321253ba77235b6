package remote

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Worker is one worker as the engine tracks it: its client, its health
// (probed in the background), its own load report and the requests the
// engine has in flight on it. Its methods are safe for concurrent use.
type Worker struct {
	url      string
	pool     string // the configured URL of the Pool it is a member of; "" when dialled
	client   Client
	healthy  atomic.Bool
	inflight atomic.Int64
	load     atomic.Pointer[Load]
	info     atomic.Pointer[Info]
	loadAt   atomic.Int64  // when load was stored, Unix ns
	draining atomic.Bool   // removed from the configuration: no new requests
	kick     chan struct{} // wakes the prober after a failed call
	stop     chan struct{} // closed when the worker is retired
	retired  sync.Once
}

func newWorker(u string, c Client) *Worker {
	return &Worker{url: u, client: c, kick: make(chan struct{}, 1), stop: make(chan struct{})}
}

// LoadAge is how old the worker's last load report is (a large value
// before the first).
func (w *Worker) LoadAge(now time.Time) time.Duration {
	at := w.loadAt.Load()
	if at == 0 {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(now.UnixNano() - at)
}

// Client is the worker's protocol client (for a protocol's own figures
// and calls: a vllm-core engine's Running, Utility).
func (w *Worker) Client() Client { return w.client }

// URL is the worker's URL.
func (w *Worker) URL() string { return w.url }

// Healthy reports the last probe's verdict (false after a failed call
// until a probe succeeds).
func (w *Worker) Healthy() bool { return w.healthy.Load() }

// Draining reports that the worker was removed from the configuration:
// it takes no new request, and its running ones finish.
func (w *Worker) Draining() bool { return w.draining.Load() }

// InFlight is the number of the engine's requests running on w.
func (w *Worker) InFlight() int { return int(w.inflight.Load()) }

// Load is the worker's last own load report (zero before the first).
func (w *Worker) Load() Load {
	if l := w.load.Load(); l != nil {
		return *l
	}
	return Load{}
}

// Info is what the worker said it serves (nil before it answered).
func (w *Worker) Info() *Info { return w.info.Load() }

// Picker chooses the worker of a request among the healthy ones. The
// routing layer (prefix and load aware) plugs in here.
type Picker interface {
	// Pick returns one of ws (all healthy, never empty). Safe for
	// concurrent use.
	Pick(ws []*Worker) *Worker
}

// Router is a Picker that sees the request and learns how it ended: the
// routing layer (engine/route) implements it. When Config.Picker is a
// Router the engine calls Route instead of Pick, Done once per Route
// whose worker was sent the request, and Retry before trying another
// worker for a request refused before its first byte.
//
// Every method is safe for concurrent use, called once per request or per
// attempt (never per token), and must not block.
type Router interface {
	// Route chooses among ws (healthy, not draining, not tried by this
	// request yet; never empty). A zero Selection refuses the request
	// (every worker's circuit is open): the engine answers 503.
	Route(ws []*Worker, q *Query) Selection
	// Done reports how the request sent on sel ended there.
	Done(sel Selection, q *Query, o Outcome)
	// Retry says whether a request refused by a worker before its first
	// byte may go to another one (attempt counts the retries, from 1),
	// and after how long.
	Retry(q *Query, attempt int) (wait time.Duration, ok bool)
}

// Query is what a Router sees of a request. Valid during the call only
// (the engine reuses it across the attempts of one request).
type Query struct {
	// Prompt is the prompt's token ids as sent to the worker (read only).
	Prompt []int32
	// N is the request's number of choices; all run on one worker.
	N int
	// Attempt is 0 for the first pick, then the retry's number.
	Attempt int
	// Pinned pins the request to the workers of data-parallel rank Rank
	// (RankOf).
	Pinned bool
	Rank   int
	// Salt is the request's cache_salt ("" for none): the worker keeps
	// its prefix cache apart from other salts', so a cache-aware router
	// matches the prompt only against prompts with the same salt.
	Salt string
}

// Ranked is a Client that is one data-parallel rank of an engine (each
// rank of vLLM's engine core is a worker of its own).
type Ranked interface{ Rank() int }

// RankCounted is a Ranked client that may know how many data-parallel
// ranks its deployment has (vllmcore: the launcher's
// --data-parallel-size, or an MoE engine's registration): 0 when not.
type RankCounted interface{ Ranks() int }

// RankOf is w's data-parallel rank, and whether its client has one; a
// worker without ranks is rank 0 of 1, as vLLM with one.
func RankOf(w *Worker) (rank int, ranked bool) {
	if r, ok := w.client.(Ranked); ok {
		return r.Rank(), true
	}
	return 0, false
}

// ranks is the number of data-parallel ranks a pinned request may name
// (engine.CheckRank refuses any other with vLLM's 400): the largest data
// parallel size the attached ranks report; 1 when no worker has ranks
// and none can attach; 0 (unknown: only a negative rank is refused) when
// an attached rank does not say, or when ranks may attach and none has.
// A rank in range with no worker up is refused as unavailable (503).
func (e *Engine) ranks() int {
	n, ranked := 0, false
	for _, w := range e.list() {
		if _, ok := RankOf(w); !ok {
			continue
		}
		ranked = true
		c, ok := w.client.(RankCounted)
		if !ok || c.Ranks() <= 0 {
			return 0
		}
		n = max(n, c.Ranks())
	}
	switch {
	case ranked:
		return n
	case e.pooled.Load() > 0:
		return 0
	}
	return 1
}

// Selection is a Router's choice for one request. Decode runs it; Prefill,
// when set, would run its prefill and hand the KV cache over
// (disaggregated serving, not implemented: the engine sends to Decode).
// Matched is how many prompt tokens the router estimates Decode holds.
type Selection struct {
	Decode  *Worker
	Prefill *Worker
	Matched int
}

// Outcome is how a request ended on the worker a Router chose.
type Outcome struct {
	// Result: OutcomeOK, OutcomeFailed (the worker or the way to it:
	// refused, broke, stalled) or OutcomeCanceled (the client or the
	// engine ended it: the worker's health is not in question).
	Result OutcomeResult
	// Status is the worker's status of a failure (0: the connection).
	Status int
	// FirstByte says the worker had sent output.
	FirstByte bool
	// PromptTokens and CachedTokens are the worker's counts (0 unknown).
	PromptTokens, CachedTokens int
}

// OutcomeResult classifies an Outcome.
type OutcomeResult uint8

const (
	OutcomeOK OutcomeResult = iota
	OutcomeFailed
	OutcomeCanceled
)

// LeastLoaded picks the worker with the fewest requests in flight; ties go
// round robin. The zero value is ready.
type LeastLoaded struct{ next atomic.Uint64 }

// Pick implements Picker.
func (p *LeastLoaded) Pick(ws []*Worker) *Worker {
	start := int(p.next.Add(1) % uint64(len(ws)))
	best := ws[start]
	for i := 1; i < len(ws); i++ {
		w := ws[(start+i)%len(ws)]
		if w.inflight.Load() < best.inflight.Load() {
			best = w
		}
	}
	return best
}

// pick chooses a healthy worker not in tried, or a zero Selection: the
// Router's choice when the Picker is one.
func (e *Engine) pick(q *Query, tried []*Worker) Selection {
	var buf [8]*Worker
	ws := buf[:0]
	for _, w := range e.list() {
		if w.healthy.Load() && !w.draining.Load() && !slices.Contains(tried, w) {
			if !q.Pinned {
				ws = append(ws, w)
			} else if rank, _ := RankOf(w); rank == q.Rank {
				ws = append(ws, w) // a worker's rank matters to a pinned request only
			}
		}
	}
	if len(ws) == 0 {
		return Selection{}
	}
	if e.router != nil {
		return e.router.Route(ws, q)
	}
	if len(ws) == 1 {
		return Selection{Decode: ws[0]}
	}
	return Selection{Decode: e.picker.Pick(ws)}
}

// failed marks w down after a call found its connection broken and wakes
// its prober, which brings it back with back-off.
func (e *Engine) failed(w *Worker) {
	if w.healthy.Swap(false) {
		e.log.Warn("worker down", zap.String("worker", w.url))
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// probe asks w for its health (and, the first time, what it serves; and
// its load) and records the verdict.
func (e *Engine) probe(w *Worker) bool {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.Dial.ConnectTimeout)
	defer cancel()
	err := w.client.Health(ctx)
	if err == nil && w.info.Load() == nil {
		var info *Info
		if info, err = w.client.Info(ctx); err == nil {
			w.info.Store(info)
		}
	}
	if err == nil && e.model.Load() == nil {
		if err = e.loadModel(ctx, w, w.info.Load()); err != nil {
			e.log.Error("cannot serve the worker's model", zap.String("worker", w.url), zap.Error(err))
		}
	}
	if err != nil {
		if w.healthy.Swap(false) {
			e.log.Warn("worker down", zap.String("worker", w.url), zap.Error(err))
		}
		return false
	}
	if l, lerr := w.client.Load(ctx); lerr == nil {
		w.load.Store(&l)
		w.loadAt.Store(time.Now().UnixNano())
	}
	if !w.healthy.Swap(true) {
		e.log.Info("worker up", zap.String("worker", w.url))
	}
	return true
}

// watch probes w until Close: every HealthInterval while it is healthy,
// with back-off from 50 ms to 2 s while it is down (so a restarted worker
// is serving again within 2 s).
func (e *Engine) watch(w *Worker) {
	defer e.wg.Done()
	wait := e.cfg.HealthInterval
	if !w.healthy.Load() {
		wait = backoffMin
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-e.done:
			return
		case <-w.stop:
			return
		case <-t.C:
		case <-w.kick:
			wait = 0
		}
		if e.probe(w) {
			wait = e.cfg.HealthInterval
		} else {
			wait = min(max(2*wait, backoffMin), backoffMax)
		}
		t.Reset(wait)
	}
}

// templateSource reads --chat-template: a file name, or the template
// itself when it holds a "{".
func templateSource(s string) (string, error) {
	if s == "" || strings.Contains(s, "{") {
		return s, nil
	}
	b, err := os.ReadFile(s)
	if err != nil {
		return "", fmt.Errorf("--chat-template: %w", err)
	}
	return string(b), nil
}

// SetWorkers makes urls the engine's workers (a configuration reload): a
// new URL is dialed, probed and serves once healthy (a new pool URL is
// bound, and its members serve as they attach); a removed one drains (it
// takes no new request, its running ones finish, then its connection
// closes; a removed pool is closed, which ends its members' calls); one
// in both keeps its state. Safe for concurrent use; it fails, changing
// nothing, when a new URL does not dial.
func (e *Engine) SetWorkers(urls []string) error {
	if len(urls) == 0 {
		return errors.New("remote: no worker")
	}
	e.wsMu.Lock()
	var dropPools []Pool
	newPools := map[string]Pool{}
	watch := false
	defer func() {
		e.wsMu.Unlock()
		closePools(dropPools)
		if watch {
			// After the lock: a member joining takes it.
			for u, p := range newPools {
				e.watchPool(u, p)
			}
		}
	}()
	if e.closed.Load() {
		return errors.New("remote: the engine is closed")
	}
	old := e.list()
	keep := map[string]*Worker{}
	for _, w := range old {
		if !w.draining.Load() && w.pool == "" {
			keep[w.url] = w
		}
	}
	var next, added []*Worker
	want := map[string]bool{}
	for _, u := range urls {
		if want[u] {
			continue
		}
		want[u] = true
		if w := keep[u]; w != nil {
			next = append(next, w)
			continue
		}
		if e.pools[u] != nil {
			continue
		}
		c, p, err := open(u, e.cfg.Dial)
		if err != nil {
			for _, w := range added {
				_ = w.client.Close()
			}
			dropPools = slices.Collect(maps.Values(newPools))
			return err
		}
		if p != nil {
			newPools[u] = p
			continue
		}
		w := newWorker(u, c)
		next, added = append(next, w), append(added, w)
	}
	var removed []*Worker
	for _, w := range old {
		if w.pool != "" && want[w.pool] && !w.draining.Load() {
			next = append(next, w) // an attached member of a kept pool
			continue
		}
		if !want[w.url] || w.draining.Load() {
			if w.draining.Load() && w.retiredDone() {
				continue // drained and closed: forgotten
			}
			if !w.draining.Swap(true) {
				removed = append(removed, w)
			}
			next = append(next, w) // listed while it drains
		}
	}
	for u, p := range e.pools {
		if !want[u] {
			dropPools = append(dropPools, p)
			delete(e.pools, u)
		}
	}
	e.wsp.Store(&next)
	for _, w := range added {
		e.wg.Add(1)
		go func() { e.probe(w); e.watch(w) }()
		e.log.Info("worker added", zap.String("worker", w.url))
	}
	for u, p := range newPools {
		e.pools[u] = p
		e.log.Info("worker pool added", zap.String("worker", u))
	}
	e.pooled.Store(int32(len(e.pools)))
	for _, w := range removed {
		e.log.Info("worker removed: draining", zap.String("worker", w.url), zap.Int("in_flight", w.InFlight()))
		if w.inflight.Load() == 0 {
			e.retire(w)
		}
	}
	watch = true
	return nil
}

// retire closes a drained worker's connection and stops its prober, once,
// and drops it from the list (on a goroutine of its own: SetWorkers calls
// it holding wsMu).
func (e *Engine) retire(w *Worker) {
	w.retired.Do(func() {
		close(w.stop)
		_ = w.client.Close()
		e.log.Info("worker drained", zap.String("worker", w.url))
		go e.forget(w)
	})
}

func (e *Engine) forget(w *Worker) {
	e.wsMu.Lock()
	defer e.wsMu.Unlock()
	old := e.list()
	next := make([]*Worker, 0, len(old))
	for _, x := range old {
		if x != w {
			next = append(next, x)
		}
	}
	e.wsp.Store(&next)
}

// retiredDone reports whether w was retired.
func (w *Worker) retiredDone() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}
