package bench

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"
)

// Config is one benchmark workload against one server. The zero value is not
// valid: start from DefaultConfig.
type Config struct {
	URL      string  // base URL, e.g. http://127.0.0.1:8000 (loopback only)
	BasePath string  // API prefix: /v1 or /openai/v1
	Dialect  Dialect // API to speak
	Model    string
	APIKey   string // sent as Authorization: Bearer (and x-api-key for messages)

	Concurrency int     // closed loop: concurrent streams (used when Rate is 0)
	Rate        float64 // open loop: Poisson arrivals per second (0: closed loop)
	MaxInflight int     // open loop: arrivals beyond this many in flight are dropped

	Warmup   time.Duration // measurements start after this
	Duration time.Duration // measured window; 0 with Requests > 0 means "until Requests are done"
	Requests int           // measured requests; 0 means no count limit
	Ramp     time.Duration // closed loop: spread the first stream starts over this

	PromptTokens int  // prompt length, in words (about one token each)
	MaxTokens    int  // output tokens per request (sent with ignore_eos)
	Stream       bool // false measures whole non-streaming requests
	RealtimeBeta bool // realtime: send OpenAI-Beta: realtime=v1 and beta fields
	// Responses only: Store sends store: true (the response store's save
	// path), and Chain > 0 makes each stream a conversation of Chain
	// requests, each naming the previous one's id in
	// previous_response_id (the store's read path too), then a new one.
	Store bool
	Chain int
	// UniquePrompts starts every request's prompt with its own number, so
	// that no server's prefix cache holds it (each request's prompt is
	// prefilled whole).
	UniquePrompts bool
	// TopLogprobs > 0 asks for logprobs with that many alternatives per
	// token (Chat Completions only).
	TopLogprobs int
	// ExtraBody, when not empty, is a JSON object whose fields are added
	// to every request's body (replacing the bench's own of the same
	// name), as the OpenAI SDKs' extra_body: e.g.
	// {"skip_special_tokens":false}. Not for realtime.
	ExtraBody string
	// EveryChunk counts every chat or completions chunk that carries a
	// choice's content or text as a token, empty or not, as vLLM's own
	// benchmark (vllm bench serve) times its inter-token latencies: a
	// token with no text yet (a special token not shown, part of a UTF-8
	// character) then counts where its chunk arrives. By default only
	// chunks with text count (what a reader sees).
	EveryChunk bool
	// SharedPrefixTokens > 0 starts every prompt with one of
	// PrefixGroups shared prefixes of this many words (the request's
	// number picks the group in turn), then PromptTokens words of its
	// own: the workload of prefix-cache-aware routing (-shared-prefix).
	SharedPrefixTokens int
	PrefixGroups       int

	ITL time.Duration // the engine's inter-token latency, subtracted from gaps

	RequestTimeout time.Duration // bound on one request, from its start
	MaxTime        time.Duration // hard bound on the whole run
	DialTimeout    time.Duration

	ServerPID int // server to sample CPU time and RSS from; 0: none
	// EngineCPU reads the server's engine compute CPU
	// (vajra_engine_compute_cpu_seconds_total) from its /metrics at the
	// window's two ends, to report the front door's own CPU: the
	// process's minus the engine's. Needs ServerPID.
	EngineCPU bool
	// ServerAllocs reads the server's heap allocation count from its
	// /metrics (go_gc_heap_allocs_objects_total) at the window's two ends,
	// to report allocations per delivered token.
	ServerAllocs bool
	// Syscalls counts the server's system calls in the window, by kind
	// (see syscalls.go): SyscallsAuto, SyscallsPerf, SyscallsProc, or off.
	// Needs ServerPID.
	Syscalls string
	// CutAtStop aborts the requests still running when the window ends
	// instead of letting them finish (they count as aborted): a ramp's
	// levels need no drain.
	CutAtStop bool
	Label     string
	Seed      uint64 // open-loop arrival seed

	// Progress receives progress lines every ProgressEvery; nil for none.
	// ProgressTTY redraws one line with a bar instead.
	Progress      io.Writer
	ProgressEvery time.Duration
	ProgressTTY   bool
}

// DefaultConfig returns the defaults Main starts from.
func DefaultConfig() Config {
	return Config{
		URL:            "http://127.0.0.1:8000",
		BasePath:       "/v1",
		Dialect:        DialectChat,
		Model:          "vajra-sim",
		Concurrency:    64,
		MaxInflight:    10000,
		Warmup:         2 * time.Second,
		Duration:       10 * time.Second,
		PromptTokens:   128,
		MaxTokens:      128,
		Stream:         true,
		RequestTimeout: 5 * time.Minute,
		MaxTime:        30 * time.Minute,
		DialTimeout:    5 * time.Second,
		Seed:           1,
		ProgressEvery:  5 * time.Second,
	}
}

// Limits that bound every run.
const (
	// MaxConcurrency bounds -c: each stream holds a socket, a goroutine and
	// a 16 KiB buffer.
	MaxConcurrency = 100_000
	// MaxRequests bounds -n.
	MaxRequests = 100_000_000
	// MaxRunTime bounds -max-time: a run never lasts longer than a day.
	MaxRunTime = 24 * time.Hour
)

// ErrNotLoopback is returned for a target outside 127.0.0.0/8, ::1 and
// localhost: the instrument generates heavy load and must never aim it at
// another machine.
var ErrNotLoopback = errors.New("bench: target is not a loopback address")

// ErrConfig reports an invalid configuration.
var ErrConfig = errors.New("bench: invalid configuration")

// target is a resolved, loopback-checked base URL.
type target struct {
	addr     string // host:port to dial
	host     string // Host header
	basePath string
}

// resolveTarget parses a base URL and refuses anything but loopback. It does
// not use DNS: "localhost" is taken to mean 127.0.0.1.
func resolveTarget(raw, basePath string) (target, error) {
	var t target
	u, err := url.Parse(raw)
	if err != nil {
		return t, fmt.Errorf("%w: URL %q: %w", ErrConfig, raw, err)
	}
	if u.Scheme != "http" {
		return t, fmt.Errorf("%w: URL %q: only http:// is supported", ErrConfig, raw)
	}
	host := u.Hostname()
	port := u.Port()
	if port == "" {
		port = "80"
	}
	ip := net.ParseIP(host)
	switch {
	case strings.EqualFold(host, "localhost"):
		ip = net.IPv4(127, 0, 0, 1)
	case ip == nil:
		return t, fmt.Errorf("%w: %q (only 127.0.0.0/8, ::1 and localhost are allowed; names other than localhost are not resolved)", ErrNotLoopback, host)
	case !ip.IsLoopback():
		return t, fmt.Errorf("%w: %s (only 127.0.0.0/8, ::1 and localhost are allowed)", ErrNotLoopback, ip)
	}
	t.addr = net.JoinHostPort(ip.String(), port)
	t.host = u.Host
	bp := basePath
	if p := strings.TrimSuffix(u.Path, "/"); p != "" {
		bp = p // a path in the URL overrides -base-path
	}
	t.basePath = "/" + strings.Trim(bp, "/")
	if t.basePath == "/" {
		t.basePath = ""
	}
	return t, nil
}

// validate checks cfg and fills derived defaults.
func (c *Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	if _, err := parseDialect(string(c.Dialect)); err != nil {
		return err
	}
	switch {
	case c.Rate < 0:
		return bad("-rate %v is negative", c.Rate)
	case c.Rate == 0 && (c.Concurrency < 1 || c.Concurrency > MaxConcurrency):
		return bad("-c %d outside [1, %d]", c.Concurrency, MaxConcurrency)
	case c.Rate > 0 && (c.MaxInflight < 1 || c.MaxInflight > MaxConcurrency):
		return bad("-max-inflight %d outside [1, %d]", c.MaxInflight, MaxConcurrency)
	case c.Requests < 0 || c.Requests > MaxRequests:
		return bad("-n %d outside [0, %d]", c.Requests, MaxRequests)
	case c.Duration < 0 || c.Warmup < 0 || c.Ramp < 0 || c.ITL < 0:
		return bad("durations must not be negative")
	case c.Duration == 0 && c.Requests == 0:
		return bad("set -duration or -n: every run is bounded")
	case c.MaxTime <= 0 || c.MaxTime > MaxRunTime:
		return bad("-max-time %v outside (0, %v]", c.MaxTime, MaxRunTime)
	case c.RequestTimeout <= 0:
		return bad("-request-timeout must be positive")
	case c.MaxTokens < 1 || c.MaxTokens > 1<<20:
		return bad("-max-tokens %d outside [1, %d]", c.MaxTokens, 1<<20)
	case c.PromptTokens < 1 || c.PromptTokens > 1<<20:
		return bad("-prompt-tokens %d outside [1, %d]", c.PromptTokens, 1<<20)
	case c.Dialect == DialectEmbeddings && c.Stream:
		return bad("embeddings are never streamed; add -stream=false")
	case c.SharedPrefixTokens < 0 || c.SharedPrefixTokens > 1<<20:
		return bad("-shared-prefix %d outside [0, %d]", c.SharedPrefixTokens, 1<<20)
	case c.SharedPrefixTokens > 0 && (c.PrefixGroups < 1 || c.PrefixGroups > 1<<16):
		return bad("-prefix-groups %d outside [1, %d]", c.PrefixGroups, 1<<16)
	case c.SharedPrefixTokens > 0 && (c.Dialect == DialectRealtime || c.Chain > 0):
		return bad("-shared-prefix is for requests that each carry their prompt (not realtime, not -chain)")
	case c.Dialect == DialectRealtime && !c.Stream:
		return bad("realtime is always streamed; drop -stream=false")
	case (c.Store || c.Chain != 0) && c.Dialect != DialectResponses:
		return bad("-store and -chain are for -dialect responses")
	case c.Chain < 0 || c.Chain > 1000:
		return bad("-chain %d outside [0, 1000]", c.Chain)
	case c.Chain > 0 && !c.Store:
		return bad("-chain needs -store: previous_response_id reads stored responses")
	case c.EveryChunk && c.Dialect != DialectChat && c.Dialect != DialectCompletions:
		return bad("-every-chunk is for chat and completions")
	case c.ExtraBody != "" && c.Dialect == DialectRealtime:
		return bad("-extra-body is for HTTP requests, not realtime")
	case c.ExtraBody != "" && !jsonObject(c.ExtraBody):
		return bad("-extra-body %q is not a JSON object", c.ExtraBody)
	case c.EngineCPU && c.ServerPID <= 0:
		return bad("-engine-cpu needs -server-pid: the front door's CPU is the process's minus the engine's")
	case c.Syscalls != SyscallsOff && c.ServerPID <= 0:
		return bad("-syscalls needs -server-pid: it counts that process's system calls")
	}
	if _, err := parseSyscallMode(c.Syscalls); err != nil {
		return err
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 5 * time.Second
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = 5 * time.Second
	}
	return nil
}
