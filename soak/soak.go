// Package soak is Vajra's bounded soak: one real server (vajra.New on the
// simulated engine, in this process, on loopback) under every dialect at
// once, streamed and not, well-formed through the official SDKs and
// broken through a raw TCP client (cuts at every point of a request and
// of its answer, slow and stalled readers, pipelined bursts, bad bodies
// and framings). Afterwards the server must return to idle: no open
// connection, nothing in flight, no session actor, nothing running or
// waiting, an empty response store, the process's goroutines, file
// descriptors and registered actor processes back to their post-warm-up
// values, its live heap within 10 % of it and its RSS within 25 %, each
// awaited by polling with a deadline.
//
// TestSoak runs it: about 20 s in `go test ./...` (skipped under -short),
// `make soak` for 10 minutes, and for hours with -soak.duration (see
// README.md, Development). It runs as a test rather than as a `vajra`
// subcommand because its verdict needs the server's process from inside
// (goroutines, descriptors, session actors), and because it drives the
// official SDKs, which the server's binary should not link.
package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vajra-go/vajra"
)

// Config is one soak run. Zero fields take the defaults of DefaultConfig.
type Config struct {
	// Duration is the measured load, after the warm-up.
	Duration time.Duration
	// Warmup is the load before the idle values are taken: it grows the
	// pools, the heap and the runtime's structures to their working size.
	Warmup time.Duration
	// Workers is the number of concurrent clients. Each holds at most one
	// connection at a time, the SDK transport keeps at most Workers idle
	// ones: far below the 20,000 descriptors of the box.
	Workers int
	// Progress is how often a line of counts goes to Logf (0: never).
	Progress time.Duration
	// IdleDeadline bounds the wait for each return to idle.
	IdleDeadline time.Duration
	// RSSSlack is how far above its post-warm-up value the final RSS may
	// be, as a fraction (0.25: 25 %). The live heap, the leak detector,
	// is held to 10 %; the RSS, even after debug.FreeOSMemory, also holds
	// what the runtime sized for the peak (stack spans, its own
	// metadata): 20 s and 60 s runs ended 3 to 11 % above the
	// post-warm-up RSS with the live heap within 1 % of its own.
	RSSSlack float64
	// SkipRSS leaves the RSS out of the return to idle (still reported):
	// under the race detector, whose shadow memory is never returned.
	SkipRSS bool
	// Seed makes the choice of scenarios repeatable.
	Seed uint64
	// Logf receives the progress lines; nil drops them.
	Logf func(format string, args ...any)
}

// DefaultConfig is the short soak of `go test ./...`.
func DefaultConfig() Config {
	return Config{
		Duration:     20 * time.Second,
		Warmup:       3 * time.Second,
		Workers:      32,
		IdleDeadline: 30 * time.Second,
		RSSSlack:     0.25,
		Seed:         1,
	}
}

// scenario is one kind of client behaviour and its share of the mix.
type scenario struct {
	name   string
	weight int
	run    func(ctx context.Context, w *worker) error
}

// worker is one client goroutine's state.
type worker struct {
	r    *rand.Rand
	addr string
	sdk  *sdkClients
}

// requestTimeout bounds each scenario run; everything it does is on
// loopback against a 1 ms-per-token engine, so this is far above need.
const requestTimeout = 60 * time.Second

func sdkScenario(name string, weight int) scenario {
	return scenario{name, weight, func(ctx context.Context, w *worker) error { return w.sdk.sdkRequest(ctx, w.r, name) }}
}

// scenarios is the mix: about half well-formed SDK traffic, half the raw
// client's cuts, slow readers, bursts and bad requests.
var scenarios = []scenario{
	sdkScenario("sdk_chat", 3),
	sdkScenario("sdk_chat_stream", 4),
	sdkScenario("sdk_completions", 3),
	sdkScenario("sdk_completions_stream", 3),
	sdkScenario("sdk_responses", 3),
	sdkScenario("sdk_responses_stream", 3),
	sdkScenario("sdk_messages", 3),
	sdkScenario("sdk_messages_stream", 4),
	{"sdk_responses_ws", 2, func(ctx context.Context, w *worker) error { return w.sdk.wsResponses(ctx, w.r, false) }},
	{"cut_responses_ws", 2, func(ctx context.Context, w *worker) error { return w.sdk.wsResponses(ctx, w.r, true) }},
	{"cut_in_head", 2, func(_ context.Context, w *worker) error {
		return cutRequest(w.r, w.addr, vajra.DefaultModelName, false)
	}},
	{"cut_in_body", 3, func(_ context.Context, w *worker) error { return cutRequest(w.r, w.addr, vajra.DefaultModelName, true) }},
	{"cut_before_response", 2, func(_ context.Context, w *worker) error {
		return cutResponse(w.r, w.addr, vajra.DefaultModelName, "before_response")
	}},
	{"cut_after_head", 2, func(_ context.Context, w *worker) error {
		return cutResponse(w.r, w.addr, vajra.DefaultModelName, "after_head")
	}},
	{"cut_mid_stream", 4, func(_ context.Context, w *worker) error {
		return cutResponse(w.r, w.addr, vajra.DefaultModelName, "mid_stream")
	}},
	{"slow_reader", 2, func(_ context.Context, w *worker) error { return slowRead(w.r, w.addr, vajra.DefaultModelName, false) }},
	{"stalled_reader_cut", 2, func(_ context.Context, w *worker) error { return slowRead(w.r, w.addr, vajra.DefaultModelName, true) }},
	{"pipelined_burst", 4, func(_ context.Context, w *worker) error { return pipelined(w.r, w.addr, vajra.DefaultModelName) }},
	{"bad_request", 4, func(_ context.Context, w *worker) error { return badBody(w.r, w.addr) }},
	// The Realtime API (realtime.go).
	rtScenario("sdk_realtime", 2),
	rtScenario("cancel_realtime", 1),
	rtScenario("cut_realtime", 1),
	rtScenario("sdk_realtime_transcribe", 1),
}

// pick draws a scenario by weight.
func pick(r *rand.Rand) int {
	total := 0
	for _, s := range scenarios {
		total += s.weight
	}
	n := r.IntN(total)
	for i, s := range scenarios {
		if n < s.weight {
			return i
		}
		n -= s.weight
	}
	return len(scenarios) - 1
}

// Counts are one scenario's runs.
type Counts struct{ OK, Failed uint64 }

// Report is the outcome of a run.
type Report struct {
	Elapsed, Warmup time.Duration
	Workers         int
	Runs            map[string]Counts
	// Failures are the first failures, "scenario: error", at most
	// maxFailures of them.
	Failures []string
	// Base is the post-warm-up idle state, Final the state at the end,
	// Peak the highest readings seen by the progress sampler.
	Base, Final           Idle
	PeakRSS               int64
	PeakGoroutines        int
	PeakFDs               int
	PeakConns, PeakActors int64
	// Settled is how long the return to idle took after the load ended.
	Settled time.Duration
	// IdleErr says what did not return to idle, if anything.
	IdleErr error
}

// maxFailures bounds Report.Failures, maxFailuresPerKind the failures
// kept of each scenario, so that one frequent failure hides no other.
const (
	maxFailures        = 20
	maxFailuresPerKind = 3
)

// Total is the number of scenario runs and of failed ones.
func (r *Report) Total() (runs, failed uint64) {
	for _, c := range r.Runs {
		runs += c.OK + c.Failed
		failed += c.Failed
	}
	return runs, failed
}

// String is the short report: the mix, the idle values before and after.
func (r *Report) String() string {
	var b strings.Builder
	runs, failed := r.Total()
	fmt.Fprintf(&b, "soak: %v after %v warm-up, %d workers: %d runs (%.0f/s), %d failed\n",
		r.Elapsed.Round(time.Second), r.Warmup, r.Workers, runs, float64(runs)/r.Elapsed.Seconds(), failed)
	names := make([]string, 0, len(r.Runs))
	for n := range r.Runs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := r.Runs[n]
		fmt.Fprintf(&b, "  %-24s %8d ok %6d failed\n", n, c.OK, c.Failed)
	}
	row := func(name string, base, peak, final any) {
		fmt.Fprintf(&b, "  %-24s %14v %14v %14v\n", name, base, peak, final)
	}
	fmt.Fprintf(&b, "  %-24s %14s %14s %14s\n", "", "post-warm-up", "peak", "final")
	row("open connections", r.Base.Live.Connections, r.PeakConns, r.Final.Live.Connections)
	row("session actors", r.Base.Live.Sessions, r.PeakActors, r.Final.Live.Sessions)
	row("in flight", r.Base.Live.InFlight, "", r.Final.Live.InFlight)
	row("engine running/waiting", fmt.Sprintf("%d/%d", r.Base.Live.Running, r.Base.Live.Waiting), "",
		fmt.Sprintf("%d/%d", r.Final.Live.Running, r.Final.Live.Waiting))
	row("stored responses", r.Base.Live.StoredResponses, "", r.Final.Live.StoredResponses)
	row("goroutines", r.Base.Goroutines, r.PeakGoroutines, r.Final.Goroutines)
	row("actor processes", r.Base.Processes, "", r.Final.Processes)
	row("file descriptors", r.Base.FDs, r.PeakFDs, r.Final.FDs)
	row("RSS", mib(r.Base.RSS), mib(r.PeakRSS), mib(r.Final.RSS))
	row("live heap", mib(r.Base.HeapLive), "", mib(r.Final.HeapLive))
	d := r.Final.Scraped
	bs := r.Base.Scraped
	fmt.Fprintf(&b, "  /metrics during the load: %.0f client-disconnect aborts, %.0f parse errors, %.0f slow consumers, %.0f session panics\n",
		d.ClientAborts-bs.ClientAborts, d.ParseErrors-bs.ParseErrors, d.SlowConsumers-bs.SlowConsumers, d.SessionPanics-bs.SessionPanics)
	if r.IdleErr != nil {
		fmt.Fprintf(&b, "  NOT IDLE: %v\n", r.IdleErr)
	} else {
		fmt.Fprintf(&b, "  idle again %v after the load ended\n", r.Settled.Round(time.Millisecond))
	}
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "  failure: %s\n", f)
	}
	return b.String()
}

// Run starts a server, loads it for cfg.Warmup, takes the idle values,
// loads it for cfg.Duration, waits for the return to idle and stops the
// server. The error is for what kept the soak from running at all; what
// the soak found is in the Report (failed runs, IdleErr).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	def := DefaultConfig()
	if cfg.Duration <= 0 {
		cfg.Duration = def.Duration
	}
	if cfg.Warmup <= 0 {
		cfg.Warmup = def.Warmup
	}
	if cfg.Workers <= 0 {
		cfg.Workers = def.Workers
	}
	if cfg.IdleDeadline <= 0 {
		cfg.IdleDeadline = def.IdleDeadline
	}
	if cfg.RSSSlack <= 0 {
		cfg.RSSSlack = def.RSSSlack
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}

	sc := vajra.DefaultConfig()
	sc.Port = 0
	sc.Loops = 2
	sc.Sim.ITL = time.Millisecond
	srv, err := vajra.New(sc)
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Stop(sctx)
	}()
	addr := srv.Addr().String()
	if host, _, _ := net.SplitHostPort(addr); !net.ParseIP(host).IsLoopback() {
		return nil, fmt.Errorf("soak: the server listens on %s, not loopback", addr)
	}

	rep := &Report{Warmup: cfg.Warmup, Workers: cfg.Workers, Runs: map[string]Counts{}}
	sdk := newSDKClients("http://"+addr, vajra.DefaultModelName, cfg.Workers)
	load := newLoad(cfg, addr, sdk)

	// Warm-up, then the idle values with every client gone.
	load.run(ctx, cfg.Warmup, 0, nil)
	sdk.transport.CloseIdleConnections()
	fillRegistry(srv.ActorSystem())
	base, settled, err := waitIdle(ctx, srv, addr, nil, 0, cfg.IdleDeadline)
	if err != nil {
		return nil, fmt.Errorf("soak: after the warm-up: %w", err)
	}
	logf("soak: warm-up done, idle in %v: %d goroutines, %d fds, RSS %s, live heap %s", settled.Round(time.Millisecond), base.Goroutines, base.FDs, mib(base.RSS), mib(base.HeapLive))
	if f := load.failures(); len(f) > 0 {
		rep.Failures = append(rep.Failures, "warm-up: "+f[0])
	}
	load.reset()
	rep.Base = base
	rep.PeakRSS, rep.PeakGoroutines, rep.PeakFDs = base.RSS, base.Goroutines, base.FDs

	// The load, with a sampler for the peaks and the progress lines.
	sample := func(progress bool, elapsed time.Duration) {
		l := srv.Live()
		g, f, m := runtime.NumGoroutine(), countFDs(), rss()
		rep.PeakGoroutines, rep.PeakFDs, rep.PeakRSS = max(rep.PeakGoroutines, g), max(rep.PeakFDs, f), max(rep.PeakRSS, m)
		rep.PeakConns, rep.PeakActors = max(rep.PeakConns, l.Connections), max(rep.PeakActors, l.Sessions)
		if progress {
			runs, failed := load.total()
			logf("soak %v: %d runs (%d failed), %d connections, %d sessions, %d goroutines, %d fds, RSS %s",
				elapsed.Round(time.Second), runs, failed, l.Connections, l.Sessions, g, f, mib(m))
		}
	}
	start := time.Now()
	load.run(ctx, cfg.Duration, cfg.Progress, sample)
	rep.Elapsed = time.Since(start)
	logf("soak: load ended after %v", rep.Elapsed.Round(time.Millisecond))
	for i, s := range scenarios {
		rep.Runs[s.name] = Counts{OK: load.ok[i].Load(), Failed: load.failed[i].Load()}
	}
	rep.Failures = append(rep.Failures, load.failures()...)

	sdk.transport.CloseIdleConnections()
	slack := cfg.RSSSlack
	if cfg.SkipRSS {
		slack = -1
	}
	rep.Final, rep.Settled, rep.IdleErr = waitIdle(ctx, srv, addr, &base, slack, cfg.IdleDeadline)
	return rep, nil
}

// load runs the workers and counts their runs per scenario.
type load struct {
	cfg        Config
	addr       string
	sdk        *sdkClients
	ok, failed []atomic.Uint64
	seed       atomic.Uint64

	mu      sync.Mutex
	fails   []string
	perKind []int // failures per scenario, to keep a few of each
}

func newLoad(cfg Config, addr string, sdk *sdkClients) *load {
	l := &load{cfg: cfg, addr: addr, sdk: sdk}
	l.reset()
	l.seed.Store(cfg.Seed)
	return l
}

func (l *load) reset() {
	l.ok = make([]atomic.Uint64, len(scenarios))
	l.failed = make([]atomic.Uint64, len(scenarios))
	l.mu.Lock()
	l.fails, l.perKind = nil, make([]int, len(scenarios))
	l.mu.Unlock()
}

func (l *load) total() (runs, failed uint64) {
	for i := range scenarios {
		runs += l.ok[i].Load() + l.failed[i].Load()
		failed += l.failed[i].Load()
	}
	return runs, failed
}

func (l *load) failures() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.fails...)
}

// samplePeriod is how often the peaks are sampled during the load.
const samplePeriod = time.Second

// run loads the server for d with cfg.Workers workers; each starts a
// scenario only before the end and finishes it (bounded by
// requestTimeout). sample, when not nil, is called every samplePeriod,
// with progress true every progress.
func (l *load) run(ctx context.Context, d, progress time.Duration, sample func(progress bool, elapsed time.Duration)) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	for range l.cfg.Workers {
		w := &worker{r: rand.New(rand.NewPCG(l.seed.Add(1), 0x50a4)), addr: l.addr, sdk: l.sdk}
		wg.Go(func() {
			for ctx.Err() == nil {
				i := pick(w.r)
				rctx, rcancel := context.WithTimeout(context.Background(), requestTimeout)
				err := scenarios[i].run(rctx, w)
				rcancel()
				if err == nil {
					l.ok[i].Add(1)
					continue
				}
				l.failed[i].Add(1)
				l.mu.Lock()
				l.perKind[i]++
				if len(l.fails) < maxFailures && l.perKind[i] <= maxFailuresPerKind {
					l.fails = append(l.fails, scenarios[i].name+": "+err.Error())
				}
				l.mu.Unlock()
			}
		})
	}
	if sample != nil {
		tick := time.NewTicker(samplePeriod)
		lastProgress := time.Now()
	loop:
		for {
			select {
			case <-ctx.Done():
				break loop
			case <-tick.C:
				p := progress > 0 && time.Since(lastProgress) >= progress
				if p {
					lastProgress = time.Now()
				}
				sample(p, time.Since(start))
			}
		}
		tick.Stop()
	}
	wg.Wait()
}

// Err is nil when the run found nothing: every scenario run passed its
// checks and the process returned to idle.
func (r *Report) Err() error {
	var errs []error
	if _, failed := r.Total(); failed > 0 || len(r.Failures) > 0 {
		errs = append(errs, fmt.Errorf("soak: %d failed runs, first: %s", failed, strings.Join(r.Failures[:min(3, len(r.Failures))], "; ")))
	}
	if r.IdleErr != nil {
		errs = append(errs, r.IdleErr)
	}
	return errors.Join(errs...)
}
