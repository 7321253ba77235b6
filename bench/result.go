package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"
)

// Latency summarises a latency distribution, in milliseconds.
type Latency struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean_ms"`
	Min   float64 `json:"min_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p99_9_ms"`
	Max   float64 `json:"max_ms"`
}

func latencyOf(h *Histogram) Latency {
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	return Latency{Count: h.Count(), Mean: h.Mean() / 1e6, Min: ms(h.Min()),
		P50: ms(h.Quantile(0.50)), P90: ms(h.Quantile(0.90)), P99: ms(h.Quantile(0.99)),
		P999: ms(h.Quantile(0.999)), Max: ms(h.Max())}
}

// minus returns l with d subtracted from every figure (the server-added
// latency: a gap minus the engine's inter-token latency).
func (l Latency) minus(d time.Duration) Latency {
	ms := float64(d) / 1e6
	l.Mean -= ms
	l.Min -= ms
	l.P50 -= ms
	l.P90 -= ms
	l.P99 -= ms
	l.P999 -= ms
	l.Max -= ms
	return l
}

// ProcStats is the CPU and memory of one process over the measured window.
type ProcStats struct {
	PID             int     `json:"pid"`
	CPUSeconds      float64 `json:"cpu_seconds"`
	CPUSource       string  `json:"cpu_source"`      // "schedstat" (ns) or "stat" (clock ticks)
	CPUUtilization  float64 `json:"cpu_utilization"` // CPU seconds per wall second
	CPUMicrosPerTok float64 `json:"cpu_us_per_token"`
	CPUMicrosPerReq float64 `json:"cpu_us_per_request"`
	PeakRSSBytes    int64   `json:"peak_rss_bytes"` // sampled during the run
	HWMBytes        int64   `json:"hwm_bytes"`      // VmHWM at the end: peak over the process's life
	RSSStartBytes   int64   `json:"rss_start_bytes"`
	RSSEndBytes     int64   `json:"rss_end_bytes"`
	Threads         int     `json:"threads"`
	SampleErrors    int     `json:"sample_errors,omitempty"`
	// Allocs is the server's heap allocations in the window (one scrape's
	// own cost taken off) and AllocsPerToken the same per delivered token;
	// -1 when not measured (-server-allocs).
	Allocs         float64 `json:"allocs"`
	AllocsPerToken float64 `json:"allocs_per_token"`
	// With -engine-cpu: the engine's compute CPU in the window
	// (vajra_engine_compute_cpu_seconds_total), the front door's CPU
	// (CPUSeconds minus it), that per delivered token, and the front
	// door's CPU as a fraction of the engine's. Absent otherwise; the
	// per-token figure and the share are -1 with no tokens or no engine
	// CPU.
	EngineCPUSeconds      float64 `json:"engine_cpu_seconds,omitempty"`
	FrontDoorCPUSeconds   float64 `json:"front_door_cpu_seconds,omitempty"`
	FrontDoorMicrosPerTok float64 `json:"front_door_cpu_us_per_token,omitempty"`
	FrontDoorShare        float64 `json:"front_door_share,omitempty"`
	engineCPU             bool    // the four above were measured
	// With -syscalls: the process's system calls in the window, by kind,
	// or why they could not be counted.
	Syscalls      *SyscallStats `json:"syscalls,omitempty"`
	SyscallsError string        `json:"syscalls_error,omitempty"`
}

// TimelinePoint is one bin of the run's timeline.
type TimelinePoint struct {
	T            float64 `json:"t_s"` // bin start, seconds since the run began
	TokensPerSec float64 `json:"tokens_per_s"`
	Requests     int64   `json:"requests"`
	Errors       int64   `json:"errors"`
}

// Result is the outcome of one run; it is what -out writes as JSON.
type Result struct {
	Label        string  `json:"label,omitempty"`
	URL          string  `json:"url"`
	Dialect      Dialect `json:"dialect"`
	Model        string  `json:"model"`
	Mode         string  `json:"mode"` // "closed" or "open"
	Concurrency  int     `json:"concurrency,omitempty"`
	Rate         float64 `json:"rate,omitempty"`
	Stream       bool    `json:"stream"`
	PromptTokens int     `json:"prompt_tokens"`
	MaxTokens    int     `json:"max_tokens"`
	// SharedPrefix and PrefixGroups: -shared-prefix, -prefix-groups.
	SharedPrefix int       `json:"shared_prefix_tokens,omitempty"`
	PrefixGroups int       `json:"prefix_groups,omitempty"`
	ITLMillis    float64   `json:"itl_ms"`
	WarmupS      float64   `json:"warmup_s"`
	RampS        float64   `json:"ramp_s"`
	StartedAt    time.Time `json:"started_at"`

	WindowS        float64          `json:"window_s"` // length of the measured window
	Requests       int64            `json:"requests"` // measured requests that succeeded
	Errors         int64            `json:"errors"`   // measured requests that failed
	ErrorsByKind   map[string]int64 `json:"errors_by_kind,omitempty"`
	ErrorSamples   []string         `json:"error_samples,omitempty"`
	WarmupRequests int64            `json:"warmup_requests"`
	WarmupErrors   int64            `json:"warmup_errors"`
	Dropped        int64            `json:"dropped,omitempty"` // open loop: arrivals over -max-inflight
	Aborted        int64            `json:"aborted,omitempty"` // cut by the run's end
	Tokens         int64            `json:"tokens"`            // tokens that arrived in the window
	TokensPerReq   float64          `json:"tokens_per_request"`
	UsageTokens    int64            `json:"usage_tokens"` // output tokens the server reported, measured requests
	Bytes          int64            `json:"bytes"`        // body bytes, whole run
	TokensPerSec   float64          `json:"tokens_per_s"`
	RequestsPerSec float64          `json:"requests_per_s"`

	// UsageTokensPerSec is output tokens per second by the server's own
	// count: TokensPerSec (content events arriving in the window) times the
	// measured requests' usage tokens per event. They differ when an event
	// is not one token: a real model's special tokens (ignore_eos) stream no
	// text and so no event, and --stream-interval N sends up to N tokens
	// per event. (Summing the usage of the requests completed in the window
	// would count, with -n, the tokens a warm-up request made before the
	// window.) 0 when the server reports no usage.
	UsageTokensPerSec float64 `json:"usage_tokens_per_s"`

	Head        Latency `json:"time_to_headers"`
	TTFT        Latency `json:"ttft"`
	Gap         Latency `json:"inter_token_gap"`
	ServerAdded Latency `json:"server_added_gap"` // Gap minus ITL
	E2E         Latency `json:"end_to_end"`

	Server *ProcStats `json:"server,omitempty"`
	Client *ProcStats `json:"client,omitempty"` // this process: the instrument's own cost

	Timeline []TimelinePoint `json:"timeline"`
	GapBins  []HistBin       `json:"gap_histogram"`
	TTFTBins []HistBin       `json:"ttft_histogram"`
}

func (r *runner) result(srv, self *serverWatch, end int64) *Result {
	cfg, rec := r.cfg, r.rec
	res := &Result{Label: cfg.Label, URL: cfg.URL, Dialect: cfg.Dialect, Model: cfg.Model, Mode: "closed",
		Stream: cfg.Stream, PromptTokens: cfg.PromptTokens, MaxTokens: cfg.MaxTokens,
		SharedPrefix: cfg.SharedPrefixTokens, PrefixGroups: cfg.PrefixGroups,
		ITLMillis: float64(cfg.ITL) / 1e6, WarmupS: cfg.Warmup.Seconds(), RampS: cfg.Ramp.Seconds(),
		StartedAt: r.clk.epoch}
	if cfg.Rate > 0 {
		res.Mode, res.Rate = "open", cfg.Rate
	} else {
		res.Concurrency = cfg.Concurrency
	}
	winEnd := min(rec.stopAt.Load(), end)
	window := float64(winEnd-rec.warmEnd) / 1e9
	if window < 0 {
		window = 0
	}
	res.WindowS = window
	res.Requests = rec.okReqs.Load()
	res.Errors = rec.errCount()
	names := []string{"dial", "status", "in_stream", "truncated", "timeout", "protocol", "other"}
	for i := range rec.errs {
		if n := rec.errs[i].Load(); n > 0 {
			if res.ErrorsByKind == nil {
				res.ErrorsByKind = map[string]int64{}
			}
			res.ErrorsByKind[names[i]] = n
		}
	}
	rec.mu.Lock()
	res.ErrorSamples = append([]string(nil), rec.samples...)
	rec.mu.Unlock()
	res.WarmupRequests, res.WarmupErrors = rec.warmReqs.Load(), rec.warmErrs.Load()
	res.Dropped, res.Aborted = rec.dropped.Load(), rec.aborted.Load()
	res.Tokens = rec.tokensWin.Load()
	res.UsageTokens = rec.usageTokens.Load()
	res.Bytes = rec.bytesAll.Load()
	if res.Requests > 0 {
		res.TokensPerReq = float64(rec.measuredTokens.Load()) / float64(res.Requests)
	}
	if window > 0 {
		res.TokensPerSec = float64(res.Tokens) / window
		res.RequestsPerSec = float64(rec.okReqsWin.Load()) / window
		if m := rec.measuredTokens.Load(); m > 0 && res.UsageTokens > 0 {
			res.UsageTokensPerSec = res.TokensPerSec * float64(res.UsageTokens) / float64(m)
		}
	}
	res.Head = latencyOf(&rec.head)
	res.TTFT = latencyOf(&rec.ttft)
	res.Gap = latencyOf(&rec.gapH)
	if res.Gap.Count > 0 {
		res.ServerAdded = res.Gap.minus(cfg.ITL)
	}
	res.E2E = latencyOf(&rec.e2e)
	res.Server = srv.stats(window, res.Tokens, rec.okReqsWin.Load())
	res.Client = self.stats(window, res.Tokens, rec.okReqsWin.Load())
	bins := int(end/rec.binW) + 1
	bins = min(bins, len(rec.binTok))
	for i := 0; i < bins; i++ {
		res.Timeline = append(res.Timeline, TimelinePoint{T: float64(int64(i)*rec.binW) / 1e9,
			TokensPerSec: float64(rec.binTok[i].Load()) / (float64(rec.binW) / 1e9),
			Requests:     rec.binReq[i].Load(), Errors: rec.binErr[i].Load()})
	}
	res.GapBins = rec.gapH.Bins(1.1)
	res.TTFTBins = rec.ttft.Bins(1.1)
	return res
}

func (s *serverWatch) stats(window float64, tokens, reqs int64) *ProcStats {
	if s.pid <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &ProcStats{PID: s.pid, PeakRSSBytes: s.peakRSS.Load(), SampleErrors: s.errs}
	st.Allocs, st.AllocsPerToken = s.allocs.perToken(tokens)
	if sys, err := s.sys.stats(tokens); err != nil {
		st.SyscallsError = err.Error()
	} else {
		st.Syscalls = sys
	}
	a, b := s.at[0], s.at[1]
	if a == nil || b == nil {
		return st
	}
	// schedstat misses threads that exited during the window; when it
	// disagrees with the tick count by more than the ticks' own resolution,
	// trust the ticks.
	cpu := b.TickCPU - a.TickCPU
	st.CPUSource = "stat"
	if a.Precise && b.Precise {
		p := b.CPU - a.CPU
		slack := time.Duration(2*(max(a.NumThread, b.NumThread)+1)) * time.Second / time.Duration(clockTicks)
		if p >= 0 && (p-cpu).Abs() <= slack {
			cpu, st.CPUSource = p, "schedstat"
		}
	}
	st.CPUSeconds = cpu.Seconds()
	if window > 0 {
		st.CPUUtilization = st.CPUSeconds / window
	}
	if tokens > 0 {
		st.CPUMicrosPerTok = st.CPUSeconds * 1e6 / float64(tokens)
	}
	if reqs > 0 {
		st.CPUMicrosPerReq = st.CPUSeconds * 1e6 / float64(reqs)
	}
	st.RSSStartBytes, st.RSSEndBytes, st.HWMBytes = a.RSSBytes, b.RSSBytes, b.HWMBytes
	st.Threads = b.NumThread
	if b.RSSBytes > st.PeakRSSBytes {
		st.PeakRSSBytes = b.RSSBytes
	}
	if engine, ok := s.engine.seconds(); ok {
		st.frontDoor(engine, tokens)
	}
	return st
}

func selfPID() int { return os.Getpid() }

// WriteText prints a human summary of res.
func (res *Result) WriteText(w io.Writer) {
	title := res.URL
	if res.Label != "" {
		title = res.Label + " (" + res.URL + ")"
	}
	load := fmt.Sprintf("%d concurrent", res.Concurrency)
	if res.Mode == "open" {
		load = fmt.Sprintf("%.1f req/s open loop", res.Rate)
	}
	fmt.Fprintf(w, "== %s: %s, %s, stream=%v, prompt %d, max_tokens %d, itl %.3gms\n",
		title, res.Dialect, load, res.Stream, res.PromptTokens, res.MaxTokens, res.ITLMillis)
	fmt.Fprintf(w, "window %.2fs: %d requests ok, %d errors (warm-up: %d ok, %d errors)",
		res.WindowS, res.Requests, res.Errors, res.WarmupRequests, res.WarmupErrors)
	if res.Dropped > 0 || res.Aborted > 0 {
		fmt.Fprintf(w, ", %d dropped, %d aborted", res.Dropped, res.Aborted)
	}
	fmt.Fprintln(w)
	if len(res.ErrorsByKind) > 0 {
		var parts []string
		for _, k := range []string{"dial", "status", "in_stream", "truncated", "timeout", "protocol", "other"} {
			if n := res.ErrorsByKind[k]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s=%d", k, n))
			}
		}
		fmt.Fprintf(w, "errors: %s\n", strings.Join(parts, " "))
		for _, s := range res.ErrorSamples {
			fmt.Fprintf(w, "  e.g. %s\n", s)
		}
	}
	fmt.Fprintf(w, "throughput: %.1f tokens/s, %.2f requests/s, %.1f tokens/request (server says %d tokens)\n",
		res.TokensPerSec, res.RequestsPerSec, res.TokensPerReq, res.UsageTokens)
	if res.UsageTokensPerSec > 0 && math.Abs(res.UsageTokensPerSec-res.TokensPerSec) > 0.005*res.TokensPerSec {
		// Events are not tokens here: say what the server counted.
		fmt.Fprintf(w, "tokens above are content events; by the server's usage: %.1f tokens/s, %.2f events per token\n",
			res.UsageTokensPerSec, res.TokensPerSec/res.UsageTokensPerSec)
	}
	fmt.Fprintf(w, "%-18s %9s %9s %9s %9s %9s %9s %9s\n", "latency (ms)", "count", "mean", "p50", "p90", "p99", "p99.9", "max")
	row := func(name string, l Latency) {
		fmt.Fprintf(w, "%-18s %9d %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n", name, l.Count, l.Mean, l.P50, l.P90, l.P99, l.P999, l.Max)
	}
	row("headers", res.Head)
	if res.Stream {
		row("ttft", res.TTFT)
		row("gap", res.Gap)
		if res.ITLMillis > 0 {
			row("gap - itl", res.ServerAdded)
		}
	}
	row("end-to-end", res.E2E)
	for _, p := range []struct {
		name string
		s    *ProcStats
	}{{"server", res.Server}, {"client", res.Client}} {
		if p.s == nil {
			continue
		}
		fmt.Fprintf(w, "%s pid %d: cpu %.3fs (%s, %.0f%% of a core), %.2f µs/token, %.1f µs/request, peak RSS %.1f MiB (HWM %.1f MiB)\n",
			p.name, p.s.PID, p.s.CPUSeconds, p.s.CPUSource, 100*p.s.CPUUtilization, p.s.CPUMicrosPerTok, p.s.CPUMicrosPerReq,
			float64(p.s.PeakRSSBytes)/(1<<20), float64(p.s.HWMBytes)/(1<<20))
		if p.s.AllocsPerToken >= 0 {
			fmt.Fprintf(w, "%s heap allocations in the window: %.0f, %.4f per token\n", p.name, p.s.Allocs, p.s.AllocsPerToken)
		}
		if sc := p.s.Syscalls; sc != nil {
			fmt.Fprintf(w, "%s syscalls (%s): %.0f in the window, %s per token:", p.name, sc.Source, sc.Total, perTokenText(sc.PerToken))
			for _, k := range sc.Kinds {
				if k.PerToken < 0 || k.PerToken >= minSyscallsPerToken {
					fmt.Fprintf(w, " %s %s", k.Name, perTokenText(k.PerToken))
				}
			}
			fmt.Fprintln(w)
		}
		if p.s.SyscallsError != "" {
			fmt.Fprintf(w, "%s syscalls: not counted: %s\n", p.name, p.s.SyscallsError)
		}
		if p.s.engineCPU {
			fmt.Fprintf(w, "%s engine compute cpu %.3fs; front door (server - engine) cpu %.3fs, %.2f µs/token, %.2f%% of the engine's\n",
				p.name, p.s.EngineCPUSeconds, p.s.FrontDoorCPUSeconds, p.s.FrontDoorMicrosPerTok, 100*p.s.FrontDoorShare)
		}
	}
}

// perTokenText prints a per-token figure; -1 means no tokens.
func perTokenText(v float64) string {
	if v < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", v)
}
