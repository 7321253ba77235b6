package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"gopkg.in/yaml.v3"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine/llama"
	_ "github.com/vajra-go/vajra/engine/remote/llamaserver" // registers llama-server://
	_ "github.com/vajra-go/vajra/engine/remote/sglang"      // registers sglang://
	_ "github.com/vajra-go/vajra/engine/remote/vllm"        // registers vllm://
	_ "github.com/vajra-go/vajra/engine/remote/vllmcore"    // registers vllm-core://
)

// stringList is a repeatable string flag. With split, each value is also
// split at commas (for lists that come whole from one environment
// variable, like origins).
type stringList struct {
	vals  []string
	split bool
}

func (l *stringList) String() string { return strings.Join(l.vals, ",") }
func (l *stringList) Set(v string) error {
	if !l.split {
		l.vals = append(l.vals, v)
		return nil
	}
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			l.vals = append(l.vals, p)
		}
	}
	return nil
}

// repeatable reports whether a flag takes several values (a YAML list in
// the config file).
func repeatable(f *flag.Flag) bool {
	_, ok := f.Value.(*stringList)
	return ok
}

// serveSettings is everything `vajra serve` is configured with.
type serveSettings struct {
	cfg        vajra.Config
	configFile string
	logFormat  string
	logLevel   string
	shutdown   time.Duration
	accessLog  bool
	keys       stringList
	keyFile    string
	models     stringList
	origins    stringList
	workers    stringList
	pprofAddr  string
	// llama is the llama.cpp engine's own configuration (--model and the
	// llama flags): cfg.DriverConfig when --model is given.
	llama llama.Config
	// LoRA adapters: llama-server's --lora and --lora-scaled, vLLM's
	// --lora-modules (lora.go).
	lora, loraScaled, loraModules stringList
}

// serveFlags binds every `vajra serve` flag to st. Flag names follow
// vLLM's where the concept is the same.
func serveFlags(fs *flag.FlagSet, st *serveSettings) {
	cfg := &st.cfg
	fs.StringVar(&st.configFile, "config", "", "YAML file of settings: keys are flag names (lists for repeatable flags)")
	fs.StringVar(&cfg.Host, "host", cfg.Host, "address to listen on")
	fs.IntVar(&cfg.Port, "port", cfg.Port, "port to listen on (0 picks a free one)")
	fs.Var(&st.keys, "api-key", "API key clients must send (Authorization: Bearer KEY or x-api-key: KEY); repeatable; none means no auth")
	fs.StringVar(&st.keyFile, "api-key-file", "", "file of API keys, one per line (blank lines and # comments skipped); adds to --api-key")
	fs.BoolVar(&cfg.ProtectMetrics, "protect-metrics", false, "require an API key on /metrics too (/health and /ping stay public)")
	fs.Var(&st.models, "served-model-name", "model name clients ask for; repeatable (default "+vajra.DefaultModelName+")")
	// The settings every engine shares (vajra.Config.EngineConfig): 0 or
	// empty is the running engine's default.
	ec := &cfg.EngineConfig
	fs.IntVar(&ec.MaxModelLen, "max-model-len", 0, "context length in tokens: prompt plus output (default: the simulated engine 8192; --model: the model's, at most 8192; --worker: the workers', which this caps)")
	fs.IntVar(&ec.MaxNumSeqs, "max-num-seqs", 0, "most sequences the engine runs at once (default: the simulated engine 256, --model 64; not with --worker: a worker's own flag)")
	fs.IntVar(&ec.KVCacheTokens, "kv-cache-tokens", 0, "KV cache capacity in tokens (default: the simulated engine 1Mi, in blocks of 16; --model: a whole context per sequence within 2 GiB, else short streams and a long pool; not with --worker)")
	fs.Int64Var(&ec.Seed, "seed", 0, "engine-wide seed mixed into every request's (not with --worker: a worker's own flag)")
	fs.StringVar(&ec.ChatTemplate, "chat-template", "", "Jinja chat template, a file or the template itself (default: the model's or the workers' own; --model and --worker only)")
	fs.StringVar(&ec.ReasoningParser, "reasoning-parser", "", "parse reasoning out of the model's text: deepseek_r1 or qwen3 (--model and --worker only)")
	fs.StringVar(&ec.ToolCallParser, "tool-call-parser", "", "parse tool calls out of the model's text: hermes, llama3_json or mistral (--model and --worker only)")
	fs.IntVar(&ec.StreamInterval, "stream-interval", 0, "coalesce up to this many tokens per streamed frame (as vLLM's; 0 or 1: one frame per token)")
	fs.IntVar(&cfg.MaxConcurrentRequests, "max-concurrent-requests", 0, "most generation requests in flight (0: no cap); beyond it and the queue: 429 (Anthropic: 529) with Retry-After")
	fs.IntVar(&cfg.MaxQueuedRequests, "max-queued-requests", 0, "generation requests that wait, in order, for a free slot beyond --max-concurrent-requests")
	fs.DurationVar(&cfg.MaxQueueWait, "max-queue-wait", cfg.MaxQueueWait, "refuse a queued request (429/529 with Retry-After) once it has waited this long for a slot (0: never)")
	fs.DurationVar(&cfg.RetryAfter, "retry-after", time.Second, "how long a refused request is told to wait (Retry-After, retry-after-ms)")
	fs.IntVar(&cfg.MaxConnections, "max-connections", 0, "most open connections; more get 503 and are closed (0: the open-file limit minus a reserve)")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", cfg.IdleTimeout, "close a keep-alive connection idle between requests for longer (0: never)")
	fs.DurationVar(&cfg.RequestReadTimeout, "request-read-timeout", cfg.RequestReadTimeout, "answer 408 and close when a request is still incomplete after this (0: never)")
	fs.DurationVar(&cfg.StreamKeepalive, "stream-keepalive", cfg.StreamKeepalive, "send a keep-alive (SSE comment; Anthropic: a ping event) on a stream silent this long, also while it waits in the queue or a long prefill (0: never)")
	fs.IntVar(&cfg.MaxOutboundBytes, "max-outbound-bytes", 0, "slow-consumer limit: a client this many bytes behind is disconnected and its request aborted (0: 4 MiB)")
	fs.IntVar(&cfg.MaxWSMessageBytes, "max-ws-message-bytes", 0, "largest client WebSocket message (Realtime, Responses over WebSocket) after reassembly; a bigger one closes the connection with 1009 (0: 16 MiB)")
	fs.Var(&st.origins, "allowed-origins", "CORS: origins allowed to call the API from a browser, comma-separated or repeated (\"*\": any); none disables CORS")
	fs.IntVar(&cfg.Loops, "event-loops", cfg.Loops, "network event loops (0: one per P, i.e. GOMAXPROCS)")
	fs.StringVar(&cfg.IOUring, "io-uring", "auto", "how event loops send: auto (io_uring where the kernel allows it, one submit per wake for all ready connections; else write(2)), on (fail to start without it), off (one write(2) per connection)")
	fs.BoolVar(&cfg.KeepGOMAXPROCS, "keep-gomaxprocs", false, "do not raise GOMAXPROCS to event loops + 1 while the CPU is not saturated (the loops hold their P while idle in epoll_wait; see docs/configuration.md)")
	fs.StringVar(&cfg.ResponseStore.URL, "response-store", "memory", "where the Responses API keeps stored responses: memory (this process, bounded LRU) or a Redis URL shared by a fleet: redis://[user:pass@]host:port/db, rediss://... (TLS), unix:///path/redis.sock")
	fs.DurationVar(&cfg.ResponseStore.TTL, "response-store-ttl", 30*24*time.Hour, "how long Redis keeps a stored response (OpenAI keeps them 30 days)")
	fs.Int64Var(&cfg.ResponseStore.MaxEntryBytes, "response-store-max-entry-bytes", 16<<20, "largest stored response record in Redis; larger ones are not stored (logged and counted)")
	fs.StringVar(&cfg.ResponseStore.CAFile, "response-store-ca-file", "", "PEM file of the CAs that sign the Redis server's certificate, for rediss:// (default: the system's roots)")
	fs.IntVar(&cfg.ResponseStore.MaxResponses, "response-store-max-responses", vajra.DefaultStoreMaxResponses, "memory store: most stored responses kept (the least recently used go first)")
	fs.Int64Var(&cfg.ResponseStore.MaxBytes, "response-store-max-bytes", vajra.DefaultStoreMaxBytes, "memory store: most bytes of stored responses kept (bodies, input items, conversations, event logs)")
	fs.IntVar(&cfg.ResponseStore.MaxBackground, "max-background-responses", vajra.DefaultMaxBackground, "most Responses API background responses running at once; more are refused with 429")
	fs.IntVar(&cfg.ResponseStore.MaxEventLogBytes, "background-event-log-bytes", vajra.DefaultMaxEventLogBytes, "bound of one background response's event log (kept for GET ...?stream=true&starting_after); past it the oldest events are dropped")
	fs.StringVar(&cfg.ResponseStore.KeyPrefix, "response-store-key-prefix", "vajra:", "prefix of every Redis key Vajra writes (one namespace per fleet)")
	fs.StringVar(&st.logFormat, "log-format", st.logFormat, "log format: json or console")
	fs.StringVar(&st.logLevel, "log-level", st.logLevel, "log level: debug, info, warn or error")
	fs.BoolVar(&st.accessLog, "access-log", false, "log one line per request (sampled: the first 100 a second, then 1 in 100)")
	fs.StringVar(&st.pprofAddr, "pprof-addr", "", "serve Go's profiler (net/http/pprof) on this loopback address, e.g. 127.0.0.1:6060 (off by default)")
	fs.DurationVar(&st.shutdown, "shutdown-timeout", st.shutdown, "how long in-flight requests may run after SIGTERM/SIGINT before their streams are ended")
	// The embedded simulated engine.
	fs.DurationVar(&cfg.Sim.ITL, "sim-itl", cfg.Sim.ITL, "simulated inter-token latency (Go duration; 0 = as fast as possible)")
	fs.Float64Var(&cfg.Sim.PrefillTPS, "sim-prefill-tps", cfg.Sim.PrefillTPS, "simulated prefill speed in prompt tokens per second (0 = instant)")
	fs.DurationVar(&cfg.Sim.TTFT, "sim-ttft", cfg.Sim.TTFT, "floor for simulated time to first token (Go duration)")
	fs.Float64Var(&cfg.Sim.LoadFactor, "sim-load-factor", cfg.Sim.LoadFactor, "slow steps by ITL*factor*running/max-num-seqs")
	fs.StringVar(&cfg.Sim.Mode, "sim-mode", cfg.Sim.Mode, "simulated output: text (pseudo-text) or echo (repeat the last user message)")
	// The llama.cpp engine (engine/llama), used when --model is given.
	lc := &st.llama
	fs.StringVar(&lc.ModelPath, "model", "", "serve this GGUF model with llama.cpp in process instead of the simulated engine (needs `make llama`)")
	fs.StringVar(&lc.LibDir, "llama-lib", "", "directory of the llama.cpp libraries (default: .llama/server/bin, the build of `make llama`; `make llama-prebuilt` installs a CUDA or Vulkan build of the same release for a GPU)")
	fs.IntVar(&lc.MaxNumBatchedTokens, "max-num-batched-tokens", 0, "llama: token budget of one engine step, decode tokens plus prefill chunks (default 2048)")
	fs.BoolVar(&lc.PrefixCaching, "enable-prefix-caching", true, "llama: reuse the KV cache of the longest cached prompt prefix across requests")
	fs.IntVar(&lc.Threads, "threads", 0, "llama: compute threads (default: the physical cores, as llama.cpp)")
	fs.IntVar(&lc.GPULayers, "n-gpu-layers", -1, "llama: layers to offload to the GPU of a CUDA or Vulkan build (-1: all)")
	// llama.cpp's own knobs, as llama-server names them (aliases.go adds
	// its short names: -tb, -fa, -ctk, -ctv, -lm).
	fs.IntVar(&lc.ThreadsBatch, "threads-batch", 0, "llama: threads for prompt batches (default: as --threads)")
	fs.StringVar(&lc.FlashAttn, "flash-attn", "auto", "llama: flash attention: on, off or auto (where the backend supports it for the model)")
	fs.StringVar(&lc.CacheTypeK, "cache-type-k", "f16", "llama: KV cache type of K: f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1")
	fs.StringVar(&lc.CacheTypeV, "cache-type-v", "f16", "llama: KV cache type of V, as --cache-type-k; a quantized one needs flash attention (not --flash-attn off)")
	fs.BoolVar(&lc.MLock, "mlock", false, "llama: keep the model's weights in RAM (mlock), never swapped out")
	fs.BoolVar(&lc.NoMMap, "no-mmap", false, "llama: read the model into memory instead of mapping the file")
	fs.Var(&st.lora, "lora", "llama: serve a LoRA adapter GGUF as its own model, named after its file: FILE or FILE:SCALE; repeatable or comma-separated (llama-server's --lora)")
	fs.Var(&st.loraScaled, "lora-scaled", "llama: a LoRA adapter with a scale: FILE:SCALE (or llama-server's older FILE SCALE); repeatable or comma-separated")
	fs.Var(&st.loraModules, "lora-modules", "llama: a LoRA adapter served under a name: NAME=FILE or vLLM's JSON {\"name\":...,\"path\":...}; repeatable (vLLM's --lora-modules)")
	fs.StringVar(&lc.LoadMode, "load-mode", "auto", "llama: how the model is loaded: auto, none, mmap, mlock, mmap+mlock (--mlock and --no-mmap override it)")
	// Remote engine workers (engine/remote), used when --worker is given.
	rc := &cfg.Remote
	fs.Var(&st.workers, "worker", "serve the model of this engine worker instead of the simulated engine: llama-server://HOST:PORT, vllm://HOST:PORT (vllm serve --grpc), sglang://HOST:PORT (--grpc-mode), or vllm-core://HOST:PORT: bind HOST:PORT for vLLM engines to attach to (vllm serve MODEL --headless --data-parallel-address HOST --data-parallel-rpc-port PORT), each rank a worker (needs --tokenizer MODEL_DIR); repeatable, or comma-separated (YAML: workers: [...])")
	fs.StringVar(&rc.GenerationConfig, "generation-config", "auto", "workers: where requests' sampling defaults come from, as vLLM's flag: auto (the model's generation_config.json, beside --tokenizer or among the worker's files), vllm (none), or a folder holding a generation_config.json")
	fs.StringVar(&rc.TokenizerPath, "tokenizer", "", "workers: tokenize with this Hugging Face tokenizer.json (tokenizer_config.json beside it), model folder or GGUF file instead of the worker's")
	fs.DurationVar(&rc.FirstTokenTimeout, "worker-first-token-timeout", 120*time.Second, "end a stream with an error, and abort it on the worker, when its worker sends no token for this long after the request (negative: never)")
	fs.DurationVar(&rc.InterTokenTimeout, "worker-inter-token-timeout", 30*time.Second, "end a stream with an error, and abort it on the worker, when its worker sends nothing for this long between tokens (negative: never)")
	fs.StringVar(&lc.Pooling, "pooling", "", "llama: how /v1/embeddings pools token embeddings: mean, cls or last (default: the GGUF's pooling type, else last)")
	addLlamaServerAliases(fs) // aliases.go
	// Routing among the workers (engine/route; its defaults, repeated
	// here: the binary uses the root package's API only).
	rt := &cfg.Routing
	fs.StringVar(&rt.Policy, "routing-policy", "cache_aware", "how a request's worker is chosen: cache_aware (the worker holding the prompt's prefix, unless load says otherwise), least_load, power_of_two or round_robin")
	fs.Float64Var(&rt.CacheThreshold, "routing-cache-threshold", 0.3, "cache_aware: the least fraction of the prompt a worker must hold for it to be preferred to the least loaded")
	fs.IntVar(&rt.BalanceAbs, "routing-balance-abs-threshold", 16, "cache_aware: route by load alone when the most and least loaded workers differ by more than this many requests ...")
	fs.Float64Var(&rt.BalanceRel, "routing-balance-rel-threshold", 1.5, "cache_aware: ... and the most loaded has more than this factor times the least loaded's requests")
	fs.IntVar(&rt.BlockTokens, "routing-block-tokens", 64, "cache_aware: prompts are compared by whole blocks of this many tokens")
	fs.IntVar(&rt.CacheBlocks, "routing-cache-blocks", 16384, "cache_aware: prompt blocks remembered per worker (least recently sent dropped first)")
	fs.DurationVar(&rt.CacheTTL, "routing-cache-ttl", 10*time.Minute, "cache_aware: a prompt block not sent for this long no longer counts (the worker has likely evicted it)")
	fs.IntVar(&rt.Breaker.Failures, "worker-circuit-failures", 5, "open a worker's circuit (no requests) after this many consecutive failed requests (negative: no circuit breaker)")
	fs.DurationVar(&rt.Breaker.CoolDown, "worker-circuit-cooldown", 5*time.Second, "how long an open circuit stays open before a trial request")
	fs.IntVar(&rt.Retry.Max, "worker-max-retries", 2, "retries on another worker of a request refused before its first byte (connection refused, 429, 503; negative: none)")
	fs.DurationVar(&rt.Retry.Backoff, "worker-retry-backoff", 20*time.Millisecond, "the wait before a first retry, doubling per retry, jittered")
	fs.DurationVar(&rt.Retry.MaxBackoff, "worker-retry-max-backoff", 500*time.Millisecond, "the longest wait before a retry")
	fs.BoolVar(&cfg.WorkerHeader, "worker-header", false, "send X-Vajra-Worker: the URL of the worker that ran the request, with each generation's response")
	fs.Float64Var(&rt.Retry.Ratio, "worker-retry-budget", 0.2, "retries may add at most this fraction of the requests to the load (plus 10 per second)")
}

// envName is the environment variable of a flag: VAJRA_ + upper case,
// '-' as '_'.
func envName(flagName string) string {
	return "VAJRA_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// applyEnv sets every flag not in set (those given on the command line)
// from its environment variable, and adds it to set.
func applyEnv(fs *flag.FlagSet, set map[string]bool, lookup func(string) (string, bool)) error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || isAlias(f.Name) {
			return
		}
		env := envName(f.Name)
		v, ok := lookup(env)
		if !ok {
			return
		}
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", env, err))
			return
		}
		set[f.Name] = true
	})
	return errors.Join(errs...)
}

// fileAliases are the config file's plural names of repeatable flags.
var fileAliases = map[string]string{"workers": "worker"}

// applyFile sets every flag not in set from the YAML config file. Keys are
// flag names; a repeatable flag takes a list (or one value).
func applyFile(fs *flag.FlagSet, set map[string]bool, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		if alias, ok := fileAliases[k]; ok {
			doc[alias] = doc[k]
			k = alias
		}
		f := fs.Lookup(k)
		if f == nil || k == "config" {
			errs = append(errs, fmt.Errorf("--config %s: unknown setting %q (keys are flag names)", path, k))
			continue
		}
		if set[k] {
			continue
		}
		var vals []any
		switch v := doc[k].(type) {
		case []any:
			if !repeatable(f) {
				errs = append(errs, fmt.Errorf("--config %s: %s takes one value, not a list", path, k))
				continue
			}
			vals = v
		case map[string]any:
			errs = append(errs, fmt.Errorf("--config %s: %s takes a value, not a mapping", path, k))
			continue
		default:
			vals = []any{v}
		}
		for _, v := range vals {
			if v == nil {
				continue
			}
			if err := f.Value.Set(fmt.Sprint(v)); err != nil {
				errs = append(errs, fmt.Errorf("--config %s: %s: %w", path, k, err))
			}
		}
		set[k] = true
	}
	return errors.Join(errs...)
}

// readKeyFile reads API keys, one per line.
func readKeyFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--api-key-file: %w", err)
	}
	defer f.Close()
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		keys = append(keys, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--api-key-file: %w", err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("--api-key-file %s holds no key", path)
	}
	return keys, nil
}

const serveUsage = `Usage: vajra serve [flags]

Serves the OpenAI and Anthropic APIs on the embedded simulated engine, or on
a GGUF model with llama.cpp (--model FILE.gguf, after "make llama").

Every flag can also be given as an environment variable VAJRA_<NAME>
(upper case, '-' as '_', e.g. VAJRA_MAX_CONCURRENT_REQUESTS=64) and as a
key of the YAML file named by --config (or VAJRA_CONFIG), e.g.

  port: 8000
  api-key: [key-one, key-two]
  max-concurrent-requests: 64

Precedence: command-line flag > environment variable > config file >
default. See docs/configuration.md.

Flags:
`

// parseServe reads the settings of `vajra serve` from args, the
// environment (lookup) and the config file, with that precedence.
func parseServe(args []string, lookup func(string) (string, bool), stderr io.Writer) (*serveSettings, error) {
	st := &serveSettings{cfg: vajra.DefaultConfig(), llama: llama.Config{PrefixCaching: true}, logFormat: "console", logLevel: "info", shutdown: 30 * time.Second}
	st.origins.split = true
	st.workers.split = true
	fs := flag.NewFlagSet("vajra serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	serveFlags(fs, st)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), serveUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(loraArgs(args)); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	set := map[string]bool{}
	cmdline := map[string]bool{} // the names given on the command line, aliases as given
	fs.Visit(func(f *flag.Flag) { set[f.Name], set[aliasTarget(f.Name)], cmdline[f.Name] = true, true, true })
	if err := applyEnv(fs, set, lookup); err != nil {
		return nil, err
	}
	if st.configFile != "" {
		if err := applyFile(fs, set, st.configFile); err != nil {
			return nil, err
		}
	}
	st.cfg.APIKeys = st.keys.vals
	if st.keyFile != "" {
		keys, err := readKeyFile(st.keyFile)
		if err != nil {
			return nil, err
		}
		st.cfg.APIKeys = append(st.cfg.APIKeys, keys...)
	}
	if len(st.models.vals) > 0 {
		st.cfg.ServedModelNames = st.models.vals
	}
	if lc := &st.llama; lc.ModelPath != "" {
		if ec := &st.cfg.EngineConfig; llamaServerSlots(cmdline) && !set["kv-cache-tokens"] {
			// llama-server's -c C with -np N: N slots of C/N tokens each,
			// a KV cache of C in all (a stream per slot, kv_unified off).
			ec.KVCacheTokens = ec.MaxModelLen
			ec.MaxModelLen /= max(ec.MaxNumSeqs, 1)
		}
		adapters, err := st.adapters()
		if err != nil {
			return nil, err
		}
		lc.Adapters = adapters
		if len(st.models.vals) == 0 {
			// vLLM serves a model under the name it was given by.
			st.cfg.ServedModelNames = []string{strings.TrimSuffix(filepath.Base(lc.ModelPath), ".gguf")}
		}
		st.cfg.Driver, st.cfg.DriverConfig = llama.DriverName, *lc
	}
	if rc := &st.cfg.Remote; len(st.workers.vals) > 0 {
		if st.llama.ModelPath != "" {
			return nil, errors.New("--worker and --model exclude each other: serve either remote workers or a local model")
		}
		if len(st.lora.vals)+len(st.loraScaled.vals)+len(st.loraModules.vals) > 0 {
			return nil, errors.New("--lora serves adapters of --model; a llama-server worker loads its own (its --lora)")
		}
		rc.Workers = st.workers.vals
		if len(st.models.vals) == 0 {
			// Served under the worker's name for its model (vajra.Config.Remote).
			st.cfg.ServedModelNames = nil
		}
	}
	st.cfg.AllowedOrigins = st.origins.vals
	return st, nil
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	st, err := parseServe(args, os.LookupEnv, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "vajra serve:", err)
		return 2
	}
	log, err := newLogger(st.logFormat, st.logLevel, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "vajra serve:", err)
		return 2
	}
	defer log.Sync() //nolint:errcheck
	cfg := st.cfg
	cfg.Logger = log
	if st.accessLog {
		cfg.AccessLog = log.Named("access")
	}

	if st.pprofAddr != "" {
		addr, stop, err := servePprof(st.pprofAddr)
		if err != nil {
			log.Error("cannot serve the profiler", zap.Error(err))
			return 1
		}
		defer stop()
		log.Info("profiler listening", zap.String("addr", addr))
	}

	srv, err := vajra.New(cfg)
	if err != nil {
		log.Error("cannot build server", zap.Error(err))
		return 1
	}
	if err := srv.Start(); err != nil {
		log.Error("cannot start", zap.Error(err))
		return 1
	}
	var hup chan os.Signal
	if st.configFile != "" && len(cfg.Remote.Workers) > 0 {
		// SIGHUP re-reads the config file's workers (reloadWorkers).
		hup = make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
	}
	fmt.Fprintf(stdout, "vajra serving on http://%s\n", srv.Addr())
	for running := true; running; {
		select {
		case <-hup:
			reloadWorkers(srv, args, log)
		case <-ctx.Done():
			running = false
		case <-srv.Done():
			// The network engine died on an error of its own (not an accept
			// error: netio refuses what it cannot accept and goes on):
			// exit non-zero so that the node is restarted.
			log.Error("network layer stopped", zap.Error(srv.Err()))
			_ = srv.Stop(context.Background())
			return 1
		}
	}
	log.Info("shutting down: draining", zap.Duration("timeout", st.shutdown))
	sctx, cancel := context.WithTimeout(context.Background(), st.shutdown)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown", zap.Error(err))
	}
	return 0
}

// reloadWorkers applies the workers of a re-read configuration (SIGHUP):
// the command line's and the environment's settings still win over the
// file's, as at start; a removed worker drains.
func reloadWorkers(srv *vajra.Server, args []string, log *zap.Logger) {
	st, err := parseServe(args, os.LookupEnv, io.Discard)
	if err == nil {
		err = srv.SetWorkers(st.cfg.Remote.Workers)
	}
	if err != nil {
		log.Error("SIGHUP: the workers were not reloaded", zap.Error(err))
		return
	}
	log.Info("SIGHUP: workers reloaded", zap.Strings("workers", st.cfg.Remote.Workers))
}

// newLogger builds the zap logger of `vajra serve`.
func newLogger(format, level string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	var enc zapcore.Encoder
	switch format {
	case "json":
		enc = zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	case "console":
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	default:
		return nil, fmt.Errorf("--log-format must be json or console, not %q", format)
	}
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), lvl)
	// Repeated messages are sampled: the first 100 each second, then one
	// in 100. Access-log lines share one message, so at most ~100 a second
	// plus 1% of the rest are written, whatever the request rate.
	core = zapcore.NewSamplerWithOptions(core, time.Second, 100, 100)
	return zap.New(core), nil
}
