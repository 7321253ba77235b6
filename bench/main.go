// Package bench is the instrument behind `vajra bench`: a load generator for
// LLM streaming APIs that measures what a front door adds to an engine.
//
// It speaks SSE for every HTTP dialect (chat completions, completions,
// Responses, Anthropic Messages) over a hand-written HTTP/1.1 client on raw
// TCP, and the OpenAI Realtime API over WebSocket. Per request it measures
// the time to response headers, to the first token, every gap between
// tokens and the end-to-end time; it reports percentiles, throughput, and,
// given the server's pid, the server's CPU time per token and its RSS. It
// only ever sends to loopback addresses.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Main runs `vajra bench` with args (without the program and subcommand
// names) and returns the process exit code: 0 on success, 1 when the run
// failed or any measured request failed, 2 on bad usage.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("vajra bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		dialect     = fs.String("dialect", string(cfg.Dialect), "API dialect: chat|completions|responses|messages|realtime|embeddings (-stream=false)")
		outJSON     = fs.String("out", "", "write the result as JSON to this file")
		outHTML     = fs.String("html", "", "write an HTML report (inline SVG plots, no scripts) to this file")
		compareURLs stringList
		comparePIDs intList
		labelsB     stringList
		cmpAllocs   = fs.Bool("compare-allocs", false, "-server-allocs for B: read B's heap allocation count from its /metrics")
		rounds      = fs.Int("rounds", 3, "with -compare: number of A B rounds")
		labelA      = fs.String("label", "", "name of the -url server in reports (default: its URL)")
		quiet       = fs.Bool("quiet", false, "no progress output")
		allowErrors = fs.Bool("allow-errors", false, "exit 0 even when some requests failed")
		rampStreams = fs.String("ramp-streams", "", "ramp mode: find the knee, the most streams whose server-added gap p99 (gap minus -itl) <= -knee-p99; FROM:TO:STEP measures FROM, FROM+STEP, ... until a level fails, FROM:TO doubles from FROM, then bisects; each level is -warmup then -duration (default 4s here) of that many streams; with -compare (repeatable here) the servers' levels alternate")
		rampRetries = fs.Int("ramp-retries", 1, "ramp: measure a failing level again up to this many times; the best try counts (noise only makes gaps worse)")
		rampRes     = fs.Int("ramp-resolution", 0, "ramp FROM:TO: stop bisecting when the knee's bracket is this narrow, in streams (0: FROM/2)")
		kneeP99     = fs.Duration("knee-p99", 5*time.Millisecond, "ramp: a level passes when its server-added gap p99 is at most this (and no request failed)")
		syscalls    = fs.String("syscalls", "", "count the servers' system calls in the window, by kind, per token (with -server-pid/-compare-pid): perf (perf stat on the syscall tracepoints; adds ~0.2 µs per system call to the server's CPU), proc (/proc/PID/io syscr/syscw: read and write families only, free), auto (perf, else proc)")
	)
	fs.Var(&compareURLs, "compare", "second base `URL` (B): run the workload against -url (A) and B in alternation and print B/A ratios (ramp mode: repeatable, one per server)")
	fs.Var(&comparePIDs, "compare-pid", "`pid` of B's server, for its CPU time and RSS (ramp mode: one per -compare, in order)")
	fs.Var(&labelsB, "compare-label", "`name` of the -compare server in reports (ramp mode: one per -compare, in order)")
	fs.StringVar(&cfg.URL, "url", cfg.URL, "base URL of the server (loopback only: 127.0.0.0/8, ::1, localhost); a path in it overrides -base-path")
	fs.StringVar(&cfg.BasePath, "base-path", cfg.BasePath, "API prefix: /v1 or /openai/v1")
	fs.StringVar(&cfg.Model, "model", cfg.Model, "model name sent in requests")
	fs.StringVar(&cfg.APIKey, "api-key", "", "API key (Authorization: Bearer; also x-api-key for messages)")
	fs.IntVar(&cfg.Concurrency, "c", cfg.Concurrency, "closed loop: concurrent streams, each starting a new request when one ends")
	fs.Float64Var(&cfg.Rate, "rate", 0, "open loop: Poisson arrivals per second (overrides -c)")
	fs.IntVar(&cfg.MaxInflight, "max-inflight", cfg.MaxInflight, "open loop: arrivals beyond this many requests in flight are dropped and counted")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "warm-up before the measured window (not measured)")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "length of the measured window; with -n and no -duration, the run lasts until -n requests are done")
	fs.IntVar(&cfg.Requests, "n", 0, "measured requests to run (0: no count limit); with -duration too, whichever ends first")
	fs.DurationVar(&cfg.Ramp, "ramp", 0, "closed loop: spread the streams' first starts over this duration")
	fs.IntVar(&cfg.PromptTokens, "prompt-tokens", cfg.PromptTokens, "prompt length in tokens (words, about one token each)")
	fs.IntVar(&cfg.MaxTokens, "max-tokens", cfg.MaxTokens, "output tokens per request (sent with ignore_eos: true)")
	fs.BoolVar(&cfg.Stream, "stream", cfg.Stream, "stream responses (SSE); -stream=false measures whole requests (requests/s)")
	fs.BoolVar(&cfg.Store, "store", false, "responses: send store: true, so that every response is saved in the server's response store")
	fs.BoolVar(&cfg.EveryChunk, "every-chunk", false, "chat and completions: count every chunk with content or text as a token, empty or not, as vllm bench serve does (default: chunks with text)")
	fs.StringVar(&cfg.ExtraBody, "extra-body", "", "a JSON `object` whose fields are added to every request body, as the SDKs' extra_body (e.g. '{\"skip_special_tokens\":false}')")
	fs.IntVar(&cfg.TopLogprobs, "top-logprobs", 0, "chat: ask for logprobs with this many alternatives per token (0: none)")
	fs.BoolVar(&cfg.UniquePrompts, "unique-prompts", false, "start every request's prompt with its own number, so that no prefix cache holds it")
	fs.IntVar(&cfg.SharedPrefixTokens, "shared-prefix", 0, "start every prompt with one of -prefix-groups shared prefixes of this many words, then -prompt-tokens words of its own (a prefix-caching workload; 0: none)")
	fs.IntVar(&cfg.PrefixGroups, "prefix-groups", 1, "with -shared-prefix: the number of distinct shared prefixes, taken in turn")
	fs.IntVar(&cfg.Chain, "chain", 0, "responses (with -store): each stream chains this many requests by previous_response_id, then starts over (0: none)")
	fs.BoolVar(&cfg.RealtimeBeta, "realtime-beta", false, "realtime: send OpenAI-Beta: realtime=v1 and the beta field names")
	fs.DurationVar(&cfg.ITL, "itl", 0, "the engine's configured inter-token latency; gap minus it is the server-added latency")
	fs.BoolVar(&cfg.CutAtStop, "no-drain", false, "abort the requests still running when the window ends instead of waiting for them to finish (they count as aborted; ramp mode always does)")
	fs.IntVar(&cfg.ServerPID, "server-pid", 0, "pid of the server (A), to report its CPU µs per token and request and its RSS")
	fs.BoolVar(&cfg.ServerAllocs, "server-allocs", false, "read the servers' heap allocation counts from their /metrics (go_gc_heap_allocs_objects_total) and report allocations per token (with -server-pid; A only, see -compare-allocs)")
	fs.BoolVar(&cfg.EngineCPU, "engine-cpu", false, "read the engine's compute CPU (vajra_engine_compute_cpu_seconds_total) from the server's /metrics and report the front door's own CPU, the server's minus the engine's, per token and as a share of the engine's (with -server-pid; A only)")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", cfg.RequestTimeout, "bound on one request, from its start")
	fs.DurationVar(&cfg.MaxTime, "max-time", cfg.MaxTime, "hard bound on one run, warm-up and drain included")
	fs.DurationVar(&cfg.DialTimeout, "dial-timeout", cfg.DialTimeout, "bound on one TCP connect")
	fs.DurationVar(&cfg.ProgressEvery, "progress", cfg.ProgressEvery, "interval of progress lines when stdout is not a terminal")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the open-loop arrival process")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: vajra bench [flags]\n\n"+
			"Load-tests an LLM streaming API on loopback and reports TTFT, inter-token gaps,\n"+
			"server-added latency, throughput and (with -server-pid) server CPU and RSS.\n\n"+
			"examples:\n"+
			"  vajra bench -url http://127.0.0.1:8000 -c 1000 -ramp 1s -max-tokens 128 -itl 20ms -server-pid $PID\n"+
			"  vajra bench -dialect messages -rate 200 -duration 30s\n"+
			"  vajra bench -url http://127.0.0.1:8001 -compare http://127.0.0.1:8000 -rounds 3\n"+
			"  vajra bench -ramp-streams 500:8000 -itl 20ms -ramp 1s -url http://127.0.0.1:8001 -label floor -server-pid $F \\\n"+
			"      -compare http://127.0.0.1:8000 -compare-label vajra -compare-pid $V -html ramp.html\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "vajra bench: unexpected arguments %q\n", fs.Args())
		fs.Usage()
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["n"] && !set["duration"] {
		cfg.Duration = 0 // -n alone: run exactly that many measured requests
	}
	d, err := parseDialect(*dialect)
	if err != nil {
		fmt.Fprintln(stderr, "vajra bench:", err)
		return 2
	}
	cfg.Dialect = d
	cfg.Label = *labelA
	if !*quiet {
		cfg.Progress = stdout
		cfg.ProgressTTY = isTerminal(stdout)
	}
	// Refuse a bad or non-loopback target before anything is sent.
	if _, err := resolveTarget(cfg.URL, cfg.BasePath); err != nil {
		fmt.Fprintln(stderr, "vajra bench:", err)
		return 2
	}
	for _, u := range compareURLs {
		if _, err := resolveTarget(u, cfg.BasePath); err != nil {
			fmt.Fprintln(stderr, "vajra bench:", err)
			return 2
		}
	}
	if *rampStreams == "" && len(compareURLs) > 1 {
		fmt.Fprintln(stderr, "vajra bench: -compare is repeatable only with -ramp-streams")
		return 2
	}
	if len(comparePIDs) > len(compareURLs) || len(labelsB) > len(compareURLs) {
		fmt.Fprintln(stderr, "vajra bench: more -compare-pid or -compare-label than -compare")
		return 2
	}
	if cfg.Syscalls, err = parseSyscallMode(*syscalls); err != nil {
		fmt.Fprintln(stderr, "vajra bench:", err)
		return 2
	}
	if *rampStreams != "" && !set["duration"] {
		cfg.Duration = 4 * time.Second // a level's window
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(stderr, "vajra bench:", err)
		return 2
	}
	// cfgsB are the -compare servers' configurations.
	var cfgsB []Config
	for i, u := range compareURLs {
		c := cfg
		c.URL, c.ServerPID, c.Label, c.ServerAllocs = u, 0, "", *cmpAllocs
		if i < len(comparePIDs) {
			c.ServerPID = comparePIDs[i]
		}
		if i < len(labelsB) {
			c.Label = labelsB[i]
		}
		if c.ServerPID <= 0 {
			c.Syscalls = SyscallsOff
		}
		c.EngineCPU = false
		cfgsB = append(cfgsB, c)
	}

	if *rampStreams != "" {
		return mainRamp(ctx, append([]Config{cfg}, cfgsB...), *rampStreams, *rampRes, *rampRetries, *kneeP99, *outJSON, *outHTML, stdout, stderr)
	}

	if len(cfgsB) == 1 {
		cfgB := cfgsB[0]
		cmp, err := Compare(ctx, cfg, cfgB, *rounds, stdout)
		if cmp != nil {
			cmp.WriteText(stdout)
			if err2 := writeOutputs(cmp, cmp.A, *outJSON, *outHTML, cmp); err2 != nil {
				fmt.Fprintln(stderr, "vajra bench:", err2)
				return 1
			}
		}
		if err != nil {
			fmt.Fprintln(stderr, "vajra bench:", err)
			return 1
		}
		if !*allowErrors && cmp.Errors() > 0 {
			fmt.Fprintf(stderr, "vajra bench: %d requests failed\n", cmp.Errors())
			return 1
		}
		return 0
	}

	res, err := Run(ctx, cfg)
	if res != nil {
		res.WriteText(stdout)
		if err2 := writeOutputs(res, []*Result{res}, *outJSON, *outHTML, nil); err2 != nil {
			fmt.Fprintln(stderr, "vajra bench:", err2)
			return 1
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "vajra bench:", err)
		return 1
	}
	if !*allowErrors && res.Errors > 0 {
		fmt.Fprintf(stderr, "vajra bench: %d measured requests failed\n", res.Errors)
		return 1
	}
	return 0
}

// mainRamp runs ramp mode: every server's ramp, the text report, -out
// (a RampReport) and -html.
func mainRamp(ctx context.Context, cfgs []Config, spec string, resolution, retries int, knee time.Duration, outJSON, outHTML string, stdout, stderr io.Writer) int {
	plan, err := ParseRampPlan(spec, resolution)
	if err != nil {
		fmt.Fprintln(stderr, "vajra bench:", err)
		return 2
	}
	if retries < 0 || retries > 10 {
		fmt.Fprintln(stderr, "vajra bench: -ramp-retries outside [0, 10]")
		return 2
	}
	plan.Retries = retries
	if knee <= 0 {
		fmt.Fprintln(stderr, "vajra bench: -knee-p99 must be positive")
		return 2
	}
	var progress io.Writer
	if cfgs[0].Progress != nil {
		progress = stdout
	}
	for i := range cfgs {
		cfgs[i].Progress = nil // one line per level is the ramp's progress
	}
	rep, err := RunRamp(ctx, cfgs, plan, knee, progress)
	if rep != nil {
		rep.WriteText(stdout)
		if err2 := writeRampOutputs(rep, outJSON, outHTML); err2 != nil {
			fmt.Fprintln(stderr, "vajra bench:", err2)
			return 1
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "vajra bench:", err)
		if errors.Is(err, ErrConfig) {
			return 2
		}
		return 1
	}
	return 0
}

// writeRampOutputs writes a ramp's report as JSON and HTML (either may be "").
func writeRampOutputs(rep *RampReport, outJSON, outHTML string) error {
	return writeReport(rep, outJSON, outHTML, func(sb *strings.Builder) { WriteRampHTML(sb, rep) })
}

// writeOutputs writes a run's or a comparison's report as JSON and HTML.
func writeOutputs(jsonValue any, results []*Result, outJSON, outHTML string, cmp *Comparison) error {
	return writeReport(jsonValue, outJSON, outHTML, func(sb *strings.Builder) { WriteHTML(sb, results, cmp) })
}

// writeReport writes jsonValue indented to outJSON and what html renders to
// outHTML, each unless its path is "".
func writeReport(jsonValue any, outJSON, outHTML string, html func(*strings.Builder)) error {
	if outJSON != "" {
		b, err := json.MarshalIndent(jsonValue, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(outJSON, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if outHTML != "" {
		var sb strings.Builder
		html(&sb)
		if err := os.WriteFile(outHTML, []byte(sb.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// intList is a repeatable integer flag.
type intList []int

func (l *intList) String() string { return fmt.Sprint([]int(*l)) }
func (l *intList) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return err
	}
	*l = append(*l, n)
	return nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
