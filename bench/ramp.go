package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Ramp mode (-ramp-streams) finds the knee of a streaming server: the most
// concurrent streams it holds with a server-added inter-token gap p99
// (gap minus -itl) at or below a threshold (-knee-p99, 5 ms by default).
//
// Each level is one closed-loop run of that many streams: fresh
// connections, -warmup to settle (the starts spread over -ramp), then
// -duration measured; the requests still running when the window ends are
// cut, not drained, so a level costs warm-up plus window. A level passes
// when its server-added gap p99 is at or below the threshold, it measured
// gaps and no request failed. The levels come from a plan:
//
//   - FROM:TO:STEP measures FROM, FROM+STEP, ... up to TO and stops after
//     the first level that fails above one that passed;
//   - FROM:TO doubles from FROM (the last step clamped to TO) until a level
//     fails above one that passed, then bisects between the largest level
//     that passed and the smallest above it that failed until they are at
//     most -ramp-resolution apart (FROM/2 by default). Bisection assumes
//     the p99 grows with the streams above the knee.
//
// Failures before any level passed do not end the rise: a server can have
// worse gaps at a light load than at a heavier one (they are reported).
//
// A failing level is measured again up to -ramp-retries times (1 by
// default) and its best try counts: other load on a shared machine only
// makes gaps worse, so a single bad window should not end a ramp.
//
// With several servers (-url and each -compare) the servers' levels are
// measured in alternation, level by level, so that drift in the machine's
// speed hits them alike.

// RampPlan says which stream counts a ramp measures.
type RampPlan struct {
	From int `json:"from"`
	To   int `json:"to"`
	// Step > 0 measures From, From+Step, ... To; 0 doubles, then bisects.
	Step int `json:"step"`
	// Resolution is the width at which bisection stops (search only).
	Resolution int `json:"resolution"`
	// Retries is how many more times a failing level is measured; the
	// best try counts (-ramp-retries).
	Retries int `json:"retries"`
}

// maxRampLevels bounds the levels of one ramp.
const maxRampLevels = 64

// ParseRampPlan parses FROM:TO[:STEP]. resolution (0: FROM/2) applies to
// the search (no STEP).
func ParseRampPlan(s string, resolution int) (RampPlan, error) {
	bad := func(format string, args ...any) (RampPlan, error) {
		return RampPlan{}, fmt.Errorf("%w: -ramp-streams %q: "+format, append([]any{ErrConfig, s}, args...)...)
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return bad("want FROM:TO or FROM:TO:STEP")
	}
	var v [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return bad("%q is not a positive integer", p)
		}
		v[i] = n
	}
	p := RampPlan{From: v[0], To: v[1], Step: v[2], Resolution: resolution}
	switch {
	case p.To < p.From:
		return bad("TO is below FROM")
	case p.To > MaxConcurrency:
		return bad("TO above %d", MaxConcurrency)
	case p.Step > 0 && (p.To-p.From)/p.Step+1 > maxRampLevels:
		return bad("more than %d levels", maxRampLevels)
	case resolution < 0:
		return bad("-ramp-resolution %d is negative", resolution)
	}
	if p.Step == 0 && p.Resolution == 0 {
		p.Resolution = max(1, p.From/2)
	}
	if p.Step > 0 {
		p.Resolution = 0
	}
	return p, nil
}

// RampLevel is one measured stream count.
type RampLevel struct {
	Streams          int     `json:"streams"`
	TokensPerSec     float64 `json:"tokens_per_s"`
	Gaps             uint64  `json:"gaps"`
	GapP50Ms         float64 `json:"gap_p50_ms"`
	GapP99Ms         float64 `json:"gap_p99_ms"`
	ServerAddedP99Ms float64 `json:"server_added_p99_ms"`
	// Server CPU per token (µs) and used (cores); -1 without -server-pid.
	ServerCPUPerTokenUs float64 `json:"server_cpu_us_per_token"`
	ServerCPUCores      float64 `json:"server_cpu_cores"`
	// ClientCPUCores is the instrument's own CPU; ClientBound is set when
	// it used 90 % or more of its GOMAXPROCS, so that the measured gaps
	// may be the client's.
	ClientCPUCores float64       `json:"client_cpu_cores"`
	ClientBound    bool          `json:"client_bound,omitempty"`
	Errors         int64         `json:"errors"`
	Syscalls       *SyscallStats `json:"syscalls,omitempty"`
	Pass           bool          `json:"pass"`
	Seq            int           `json:"seq"`   // measurement order, from 1
	Tries          int           `json:"tries"` // measurements of the level (-ramp-retries); the best counts
}

// Ramp is one server's ramp; it is what -out writes (in a RampReport).
type Ramp struct {
	Label       string   `json:"label"`
	URL         string   `json:"url"`
	ITLMillis   float64  `json:"itl_ms"`
	ThresholdMs float64  `json:"threshold_ms"`
	Plan        RampPlan `json:"plan"`
	// Levels, by streams.
	Levels []RampLevel `json:"levels"`
	// Knee is the most streams of a level that passed; 0 when none did.
	Knee int `json:"knee"`
	// FirstFail is the least streams of a level above the knee that
	// failed; 0 when none did (the knee is then at least To).
	FirstFail int `json:"first_fail"`
	// FailedBelow are the levels below the knee that failed: a server
	// whose gaps are worse at a light load than at the knee.
	FailedBelow []int `json:"failed_below,omitempty"`
	// ClientBound is set when a level at or next to the knee was
	// client-bound: the knee may be the instrument's, not the server's.
	ClientBound bool `json:"client_bound,omitempty"`
}

// RampReport is the outcome of a ramp run.
type RampReport struct {
	ThresholdMs float64 `json:"threshold_ms"`
	Ramps       []*Ramp `json:"ramps"`
}

// levelMeasurer measures one level: a run with that many streams.
type levelMeasurer func(ctx context.Context, streams int) (*Result, error)

// rampSearch is the level-stepping state of one server's ramp: which level
// comes next, given those measured so far.
type rampSearch struct {
	plan      RampPlan
	threshold float64 // ms
	levels    []RampLevel
	lo, hi    int // largest passing level (0: none), least failing one above it (0: none)
	done      bool
}

// next returns the next level to measure, or false when the ramp is over.
// Levels rise until one fails above one that passed: a server can also
// fail at a light load (a loop that parks in epoll_wait holding its P
// delays the timer that paces the tokens), so a failure before any pass
// does not end the rise.
func (s *rampSearch) next() (int, bool) {
	if s.done || len(s.levels) >= maxRampLevels {
		s.done = true
		return 0, false
	}
	if len(s.levels) == 0 {
		return s.plan.From, true
	}
	last := s.levels[len(s.levels)-1].Streams
	if s.plan.Step > 0 {
		if s.hi > 0 || last+s.plan.Step > s.plan.To {
			s.done = true
			return 0, false
		}
		return last + s.plan.Step, true
	}
	if s.hi == 0 { // doubling: nothing has failed above a pass yet
		if last >= s.plan.To {
			s.done = true
			return 0, false
		}
		return min(2*last, s.plan.To), true
	}
	// Bisect (lo, hi).
	if s.hi-s.lo <= s.plan.Resolution {
		s.done = true
		return 0, false
	}
	return (s.lo + s.hi) / 2, true
}

// record notes a measured level. lo is the largest level that passed, hi
// the least level above it that failed; failures below lo do not bound
// the knee (they are reported as such).
func (s *rampSearch) record(l RampLevel) {
	l.Seq = len(s.levels) + 1
	s.levels = append(s.levels, l)
	if l.Pass {
		s.lo = max(s.lo, l.Streams)
	}
	s.hi = 0
	if s.lo == 0 {
		return // nothing passed yet: keep rising
	}
	for _, m := range s.levels {
		if !m.Pass && m.Streams > s.lo && (s.hi == 0 || m.Streams < s.hi) {
			s.hi = m.Streams
		}
	}
}

// ramp returns the outcome so far.
func (s *rampSearch) ramp(label, url string, itl time.Duration) *Ramp {
	r := &Ramp{Label: label, URL: url, ITLMillis: float64(itl) / 1e6, ThresholdMs: s.threshold, Plan: s.plan,
		Levels: append([]RampLevel(nil), s.levels...), Knee: s.lo, FirstFail: s.hi}
	sort.SliceStable(r.Levels, func(i, j int) bool { return r.Levels[i].Streams < r.Levels[j].Streams })
	for _, l := range r.Levels {
		if l.ClientBound && (l.Streams == r.Knee || l.Streams == r.FirstFail) {
			r.ClientBound = true
		}
		if !l.Pass && l.Streams < r.Knee {
			r.FailedBelow = append(r.FailedBelow, l.Streams)
		}
	}
	return r
}

// levelOf summarises a level's run; clientCores is the instrument's CPU
// budget (its GOMAXPROCS).
func levelOf(streams int, res *Result, thresholdMs float64, clientCores int) RampLevel {
	l := RampLevel{Streams: streams, ServerCPUPerTokenUs: -1, ServerCPUCores: -1, ClientCPUCores: -1}
	if res == nil {
		return l
	}
	l.TokensPerSec, l.Gaps, l.Errors = res.TokensPerSec, res.Gap.Count, res.Errors
	l.GapP50Ms, l.GapP99Ms, l.ServerAddedP99Ms = res.Gap.P50, res.Gap.P99, res.ServerAdded.P99
	if s := res.Server; s != nil && s.CPUSource != "" {
		l.ServerCPUPerTokenUs, l.ServerCPUCores = s.CPUMicrosPerTok, s.CPUUtilization
		l.Syscalls = s.Syscalls
	}
	if c := res.Client; c != nil && c.CPUSource != "" {
		l.ClientCPUCores = c.CPUUtilization
		l.ClientBound = c.CPUUtilization >= 0.9*float64(clientCores)
	}
	l.Pass = l.Errors == 0 && l.Gaps > 0 && l.ServerAddedP99Ms <= thresholdMs
	return l
}

// rampTarget is one server to ramp.
type rampTarget struct {
	label, url string
	itl        time.Duration
	measure    levelMeasurer
}

// rampAll runs the ramps of targets in alternation, one level of each in
// turn, and returns them; progress, when non-nil, gets a line per level.
// A measurement error ends every ramp and is returned with what was
// measured.
func rampAll(ctx context.Context, targets []rampTarget, plan RampPlan, thresholdMs float64, clientCores int, progress io.Writer) ([]*Ramp, error) {
	searches := make([]*rampSearch, len(targets))
	for i := range targets {
		searches[i] = &rampSearch{plan: plan, threshold: thresholdMs}
	}
	out := func() []*Ramp {
		rs := make([]*Ramp, len(targets))
		for i, t := range targets {
			rs[i] = searches[i].ramp(t.label, t.url, t.itl)
		}
		return rs
	}
	for {
		any := false
		for i, t := range targets {
			n, ok := searches[i].next()
			if !ok {
				continue
			}
			any = true
			var l RampLevel
			for try := 0; try <= plan.Retries; try++ {
				res, err := t.measure(ctx, n)
				if err != nil {
					return out(), fmt.Errorf("bench: ramp %s at %d streams: %w", t.label, n, err)
				}
				m := levelOf(n, res, thresholdMs, clientCores)
				m.Tries = try + 1
				if progress != nil {
					fmt.Fprintf(progress, "-- ramp %s: %s\n", t.label, levelLine(m))
				}
				if try == 0 || betterLevel(m, l) {
					l = m
				}
				l.Tries = try + 1
				if l.Pass {
					break
				}
			}
			searches[i].record(l)
		}
		if !any {
			return out(), nil
		}
	}
}

// betterLevel reports whether try a of a level beats try b: a pass beats
// a failure, else the lower server-added p99 wins. Noise on a shared
// machine only makes gaps worse, so the best try is the server's own.
func betterLevel(a, b RampLevel) bool {
	if a.Pass != b.Pass {
		return a.Pass
	}
	return a.ServerAddedP99Ms < b.ServerAddedP99Ms
}

// RunRamp ramps every cfg (A first, then each -compare server) with plan
// and returns their ramps. Each level runs cfg with Concurrency set to the
// level and CutAtStop.
func RunRamp(ctx context.Context, cfgs []Config, plan RampPlan, threshold time.Duration, progress io.Writer) (*RampReport, error) {
	rep := &RampReport{ThresholdMs: float64(threshold) / 1e6}
	var targets []rampTarget
	for i, cfg := range cfgs {
		if cfg.Rate > 0 {
			return nil, fmt.Errorf("%w: -ramp-streams is closed loop: drop -rate", ErrConfig)
		}
		if !cfg.Stream {
			return nil, fmt.Errorf("%w: -ramp-streams measures streams: drop -stream=false", ErrConfig)
		}
		label := cfg.Label
		if label == "" {
			label = cfg.URL
			if i == 0 && len(cfgs) > 1 {
				label = "A"
			}
		}
		cfg.Label, cfg.CutAtStop = label, true
		targets = append(targets, rampTarget{label: label, url: cfg.URL, itl: cfg.ITL,
			measure: func(ctx context.Context, streams int) (*Result, error) {
				c := cfg
				c.Concurrency = streams
				return Run(ctx, c)
			}})
	}
	var err error
	rep.Ramps, err = rampAll(ctx, targets, plan, rep.ThresholdMs, runtime.GOMAXPROCS(0), progress)
	return rep, err
}

// Errors returns the failed requests of every level: a failing level is
// how a ramp ends, so they are expected and reported, not an error of the
// run.
func (rep *RampReport) Errors() int64 {
	var n int64
	for _, r := range rep.Ramps {
		for _, l := range r.Levels {
			n += l.Errors
		}
	}
	return n
}

func levelLine(l RampLevel) string {
	verdict := "pass"
	if !l.Pass {
		verdict = "FAIL"
		if l.Errors > 0 {
			verdict += fmt.Sprintf(" (%d errors)", l.Errors)
		}
	}
	s := fmt.Sprintf("%d streams: %.0f tokens/s, gap p99 %.3f ms, server-added p99 %.3f ms", l.Streams, l.TokensPerSec, l.GapP99Ms, l.ServerAddedP99Ms)
	if l.ServerCPUPerTokenUs >= 0 {
		s += fmt.Sprintf(", server %.2f µs/token (%.2f cores)", l.ServerCPUPerTokenUs, l.ServerCPUCores)
	}
	if l.ClientCPUCores >= 0 {
		s += fmt.Sprintf(", client %.2f cores", l.ClientCPUCores)
		if l.ClientBound {
			s += " (client-bound)"
		}
	}
	return s + syscallsText(l.Syscalls) + ": " + verdict
}

// syscallsText is ", syscalls/token T (kind k, ...)", or "" when not counted.
func syscallsText(sc *SyscallStats) string {
	if sc == nil {
		return ""
	}
	s := fmt.Sprintf(", syscalls/token %s (%s:", perTokenText(sc.PerToken), sc.Source)
	for _, k := range sc.Kinds {
		if k.PerToken < 0 || k.PerToken >= minSyscallsPerToken {
			s += fmt.Sprintf(" %s %s", k.Name, perTokenText(k.PerToken))
		}
	}
	return s + ")"
}

// WriteText prints each ramp's levels and knee, and with several servers
// each one's knee against the first's.
func (rep *RampReport) WriteText(w io.Writer) {
	for _, r := range rep.Ramps {
		fmt.Fprintf(w, "== ramp %s (%s): itl %.3g ms, knee = most streams with server-added gap p99 <= %.3g ms\n",
			r.Label, r.URL, r.ITLMillis, r.ThresholdMs)
		fmt.Fprintf(w, "%8s %11s %9s %12s %12s %11s %11s %7s %s\n", "streams", "tokens/s", "gap p99", "gap-itl p99", "server µs/tok", "server cpu", "client cpu", "errors", "")
		for _, l := range r.Levels {
			verdict := "pass"
			if !l.Pass {
				verdict = "FAIL"
			}
			if l.ClientBound {
				verdict += " client-bound"
			}
			if l.Tries > 1 {
				verdict += fmt.Sprintf(" (best of %d)", l.Tries)
			}
			fmt.Fprintf(w, "%8d %11.1f %9.3f %12.3f %12s %11s %11s %7d %s%s\n", l.Streams, l.TokensPerSec, l.GapP99Ms, l.ServerAddedP99Ms,
				optFloat(l.ServerCPUPerTokenUs, 2), optFloat(l.ServerCPUCores, 2), optFloat(l.ClientCPUCores, 2), l.Errors, verdict,
				syscallsText(l.Syscalls))
		}
		fmt.Fprintf(w, "knee %s: %s\n", r.Label, r.KneeText())
	}
	if len(rep.Ramps) > 1 {
		a := rep.Ramps[0]
		for _, b := range rep.Ramps[1:] {
			ratio := "n/a"
			if a.Knee > 0 {
				ratio = fmt.Sprintf("%.3f", float64(b.Knee)/float64(a.Knee))
			}
			fmt.Fprintf(w, "knee ratio %s/%s: %s (%d / %d streams)\n", b.Label, a.Label, ratio, b.Knee, a.Knee)
		}
	}
}

// KneeText says where the knee is and how sure that is.
func (r *Ramp) KneeText() string {
	var s string
	switch {
	case r.Knee == 0 && len(r.Levels) > 0:
		s = fmt.Sprintf("none (every level from %d to %d streams failed)", r.Levels[0].Streams, r.Levels[len(r.Levels)-1].Streams)
	case r.Knee == 0:
		s = "not measured"
	case r.FirstFail == 0:
		s = fmt.Sprintf("%d streams, at least (the largest level, %d, passed)", r.Knee, r.Plan.To)
	default:
		s = fmt.Sprintf("%d streams (%d failed)", r.Knee, r.FirstFail)
	}
	if len(r.FailedBelow) > 0 {
		s += fmt.Sprintf("; failed below the knee at %v", r.FailedBelow)
	}
	if r.ClientBound {
		s += "; the instrument was CPU-bound at the knee: the knee may be the client's"
	}
	return s
}

func optFloat(v float64, prec int) string {
	if v < 0 || math.IsNaN(v) {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}
