// Package metrics exposes Vajra's Prometheus metrics: the vLLM names that
// routers and dashboards read (vllm:num_requests_running, vllm:kv_cache_usage_perc,
// vllm:time_to_first_token_seconds, ...) and Vajra's own (vajra_*).
//
// Nothing here is updated per token. Figures the engine already keeps
// (running, waiting, KV usage, token and prefix-cache counters) and the
// server's own counters are read at scrape time by a custom collector
// through the funcs in Sources. Histograms are observed once per request,
// from the request's final timings. The inter-token-latency histogram
// holds every real gap: the engine counts each gap of a request (one per
// engine step with output, as vLLM does) into a fixed per-request array of
// buckets, and ObserveRequest adds that array to the histogram once, at
// the request's end, with one atomic add per non-empty bucket. Only for
// an engine that does not count its gaps is the request's mean gap used,
// counted once per gap.
//
// The package is at the bottom of Vajra's dependency graph: of Vajra it
// imports only internal/itl (the ITL bucket bounds). Callers adapt their types to Sources and Request.
//
// Safe for concurrent use: every exported method may be called from any
// goroutine.
package metrics

import (
	"bytes"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/vajra-go/vajra/internal/itl"
)

// EngineStats are the engine's figures read at scrape time.
type EngineStats struct {
	Running, Waiting int
	KVUsage          float64 // 0..1
	PrefixQueries    uint64
	PrefixHits       uint64
	Preemptions      uint64
	PromptTokens     uint64
	GenerationTokens uint64
	// ComputeCPU is the CPU time the engine has spent computing the model
	// so far (the llama engine: its thread's time in llama_decode and the
	// samplers), exported as vajra_engine_compute_cpu_seconds_total. The
	// process's CPU minus it is the front door's own cost. 0 for engines
	// that do not measure it (the simulated engine).
	ComputeCPU time.Duration
	// Llama: the figures below are the llama engine's (--model), exported
	// only when it runs.
	Llama bool
	// KVMoves counts the requests moved with their KV from a short stream
	// to the long pool; KVStreamCopies the shared prompts copied across
	// streams as a whole stream (llama.cpp refused the prefix as a state);
	// ComputeThreads is llama.cpp's compute threads now (the thread
	// tuner's choice, or --threads).
	KVMoves, KVStreamCopies uint64
	ComputeThreads          int
}

// CodeCount is a count by a code label (a WebSocket close code, "other").
type CodeCount struct {
	Code string
	N    uint64
}

// ServerStats are the network layer's counters read at scrape time.
type ServerStats struct {
	WebSocketConnections    int64       // open WebSocket connections
	WebSocketProtocolErrors uint64      // WebSocket connections closed for breaking RFC 6455
	WebSocketCloses         []CodeCount // close frames sent, by close code

	OpenConnections int64
	BytesWritten    uint64
	ParseErrors     uint64
	SlowConsumers   uint64 // connections closed for not reading
	ClientAborts    uint64 // requests aborted by a client disconnect
	LoopWakes       uint64 // doorbell rings the event loops answered
	// Batched sends (--io-uring): the loops that send through io_uring
	// (0: every loop writes with write(2)), their submits and the sends
	// those carried.
	IOUringLoops   int64
	IOUringSubmits uint64
	IOUringSends   uint64
	IdleClosed     uint64 // connections closed by the idle timeout
	Keepalives     uint64 // keep-alives written on silent streams
}

// StoreStats are the Responses API store's figures.
type StoreStats struct {
	Stored, Evicted, Deleted uint64 // responses put, evicted by a bound, deleted, ever
	Count, Bytes             int64  // held now
	Live                     int64  // background responses running now
	SaveFailures             uint64 // responses that could not be saved
	// Ops are the store's commands (Redis): counts by kind and result, and
	// a latency histogram per kind. Empty for the memory store.
	Ops []StoreOp
}

// StoreOp is one command kind of the response store: its counts by result
// and the latency histogram of those that reached the store (Buckets are
// per bucket, not cumulative: Bounds[i] is bucket i's upper bound in
// seconds, the last bucket +Inf; Sum in seconds).
type StoreOp struct {
	Op      string
	Results map[string]uint64
	Bounds  []float64
	Buckets []uint64
	Sum     float64
}

// Sources are read at scrape time. Any may be nil.
type Sources struct {
	Engine        func() EngineStats
	Server        func() ServerStats
	Store         func() StoreStats
	UnknownFields func(fn func(endpoint, field string, n uint64))
	// SessionPanics is the number of panics in per-session code so far,
	// each of which ended its own session only (vajra_session_panics_total).
	SessionPanics func() uint64
}

// Request is what one finished request reports, once.
type Request struct {
	Model        string
	FinishReason string // stop, length, tool_calls, abort, error
	Queue        time.Duration
	TTFT         time.Duration // 0: no token was produced
	E2E          time.Duration
	// Tokens is the number of tokens generated per choice; with TTFT it
	// gives the mean inter-token gap when Gaps is nil.
	Tokens int
	// Gaps are the request's inter-token gaps as the engine counted them,
	// per bucket of ITLBuckets (not cumulative; the last bucket is +Inf),
	// and GapSum their total. Nil when the engine does not count them:
	// the histogram then gets the mean gap, (E2E-TTFT)/(Tokens-1), counted
	// Tokens-1 times, which keeps _count and _sum but loses the tail. A
	// Gaps of another length is ignored (the same fallback). Read only
	// during ObserveRequest.
	Gaps   []uint32
	GapSum time.Duration
	// PromptTokens is the request's prompt length and GenerationTokens
	// the tokens it generated over all its choices (usage.prompt_tokens
	// and usage.completion_tokens), for vllm:request_prompt_tokens and
	// vllm:request_generation_tokens; N is its number of choices (n), for
	// vllm:request_params_n (0 is counted as 1).
	PromptTokens, GenerationTokens, N int
}

// Buckets, in seconds: vLLM's, so that dashboards built for vLLM read the
// same ranges, with finer buckets below vLLM's first for ITL and TTFT,
// because a front door measured in microseconds deserves them. itlBuckets
// are internal/itl's, the bounds engines count gaps in (engine.ITLBuckets).
var (
	ttftBuckets = []float64{0.0005, 0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
		2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets     = itl.Seconds()
	latencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
		120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

// requestParamsNBuckets are vLLM's for vllm:request_params_n.
var requestParamsNBuckets = []float64{1, 2, 5, 10, 20}

// DefaultMaxModelLen is the largest bucket bound of the token-count
// histograms when New is given no MaxModelLen (vLLM bounds them by the
// model's context length).
const DefaultMaxModelLen = 131072

// TokenBuckets returns vLLM's buckets for a token-count histogram of a
// model of context maxModelLen (build_1_2_5_buckets): 1, 2, 5, 10, 20,
// 50, ... up to the last not above maxModelLen.
func TokenBuckets(maxModelLen int) []float64 {
	var b []float64
	for exp := 1.0; ; exp *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if m*exp > float64(maxModelLen) {
				return b
			}
			b = append(b, m*exp)
		}
	}
}

// Option configures New.
type Option func(*options)

type options struct{ maxModelLen int }

// MaxModelLen bounds the buckets of vllm:request_prompt_tokens and
// vllm:request_generation_tokens by the model's context length, as vLLM
// does (default DefaultMaxModelLen).
func MaxModelLen(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxModelLen = n
		}
	}
}

// ITLBuckets returns the upper bounds, in seconds, of
// vllm:inter_token_latency_seconds' buckets (the +Inf bucket follows), in
// the order of Request.Gaps. A copy: for setup and tests.
func ITLBuckets() []float64 { return append([]float64(nil), itlBuckets...) }

// finishReasons are pre-created so that a request never creates a series.
var finishReasons = []string{"stop", "length", "tool_calls", "abort", "error"}

// Metrics holds every metric of one server.
type Metrics struct {
	reg    *prometheus.Registry
	models map[string]*modelMetrics // read-only after New
	first  *modelMetrics            // model_name of engine-wide figures

	src atomic.Pointer[Sources]

	mu     sync.Mutex // guards routes and reject (setup only)
	routes []*Route
	reject map[string]*Counter
}

type modelMetrics struct {
	name  string
	ttft  prometheus.Observer
	e2e   prometheus.Observer
	queue prometheus.Observer
	// The per-request histograms vLLM exports beside them: the phases of
	// a request that ran (inference = prefill + decode) and its sizes.
	inference, prefill, decode prometheus.Observer
	promptLen, genLen, paramsN prometheus.Observer
	itl                        *gapHistogram
	success                    map[string]prometheus.Counter
}

// New builds the metrics of a server serving models (the first names the
// engine-wide figures, as vLLM's first --served-model-name does).
func New(models []string, src Sources, opts ...Option) *Metrics {
	o := options{maxModelLen: DefaultMaxModelLen}
	for _, f := range opts {
		f(&o)
	}
	if len(models) == 0 {
		models = []string{""}
	}
	m := &Metrics{reg: prometheus.NewRegistry(), models: map[string]*modelMetrics{}, reject: map[string]*Counter{}}
	label := []string{"model_name"}
	ttft := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vllm:time_to_first_token_seconds",
		Help: "Time to first token, from arrival.", Buckets: ttftBuckets}, label)
	e2e := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vllm:e2e_request_latency_seconds",
		Help: "End-to-end request latency, from arrival.", Buckets: latencyBuckets}, label)
	queue := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vllm:request_queue_time_seconds",
		Help: "Time a request waited before the engine ran it.", Buckets: latencyBuckets}, label)
	hist := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, label)
	}
	inference := hist("vllm:request_inference_time_seconds", "Time a request spent running (prefill and decode): from admission to its end.", latencyBuckets)
	prefill := hist("vllm:request_prefill_time_seconds", "Time a request spent in prefill: from admission to its first token.", latencyBuckets)
	decode := hist("vllm:request_decode_time_seconds", "Time a request spent in decode: from its first token to its end.", latencyBuckets)
	tokenBuckets := TokenBuckets(o.maxModelLen)
	promptLen := hist("vllm:request_prompt_tokens", "Prompt tokens of each request.", tokenBuckets)
	genLen := hist("vllm:request_generation_tokens", "Tokens each request generated, over all its choices.", tokenBuckets)
	paramsN := hist("vllm:request_params_n", "The n request parameter (choices per request).", requestParamsNBuckets)
	success := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:request_success_total",
		Help: "Finished requests, by finish reason."}, []string{"model_name", "finished_reason"})
	itlDesc := prometheus.NewDesc("vllm:inter_token_latency_seconds",
		"Time between successive engine steps that gave a request output (inter-token latency), one observation per gap.", label, nil)
	for _, name := range models {
		if m.models[name] != nil {
			continue
		}
		mm := &modelMetrics{
			name:  name,
			ttft:  ttft.WithLabelValues(name),
			e2e:   e2e.WithLabelValues(name),
			queue: queue.WithLabelValues(name),

			inference: inference.WithLabelValues(name),
			prefill:   prefill.WithLabelValues(name),
			decode:    decode.WithLabelValues(name),
			promptLen: promptLen.WithLabelValues(name),
			genLen:    genLen.WithLabelValues(name),
			paramsN:   paramsN.WithLabelValues(name),

			itl:     newGapHistogram(itlBuckets),
			success: map[string]prometheus.Counter{},
		}
		for _, r := range finishReasons {
			mm.success[r] = success.WithLabelValues(name, r)
		}
		m.models[name] = mm
		if m.first == nil {
			m.first = mm
		}
	}
	m.src.Store(&src)
	m.reg.MustRegister(ttft, e2e, queue, success, inference, prefill, decode, promptLen, genLen, paramsN, &collector{m: m, itlDesc: itlDesc},
		// The Go runtime and the process, as every Go exporter has them,
		// plus runtime/metrics' heap allocation count
		// (go_gc_heap_allocs_objects_total): `vajra bench -server-allocs`
		// reads it to report the server's allocations per token.
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/allocs:objects$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveRequest records one finished request. Call it once per request,
// never per token.
func (m *Metrics) ObserveRequest(r *Request) {
	mm := m.models[r.Model]
	if mm == nil {
		mm = m.first
	}
	if c := mm.success[r.FinishReason]; c != nil {
		c.Inc()
	} else {
		mm.success["error"].Inc()
	}
	mm.queue.Observe(r.Queue.Seconds())
	mm.e2e.Observe(r.E2E.Seconds())
	if r.TTFT > 0 {
		mm.ttft.Observe(r.TTFT.Seconds())
		// The phases of a request that ran and produced a token, as vLLM
		// times them: prefill from admission to the first token, decode
		// from there to the end, inference both.
		mm.prefill.Observe(max(0, r.TTFT-r.Queue).Seconds())
		mm.decode.Observe(max(0, r.E2E-r.TTFT).Seconds())
		mm.inference.Observe(max(0, r.E2E-r.Queue).Seconds())
	}
	if r.PromptTokens > 0 {
		// Sizes of a request that reached the engine (one refused before
		// tokenizing has none).
		mm.promptLen.Observe(float64(r.PromptTokens))
		mm.genLen.Observe(float64(r.GenerationTokens))
		mm.paramsN.Observe(float64(max(1, r.N)))
	}
	switch {
	case len(r.Gaps) == len(mm.itl.counts):
		mm.itl.merge(r.Gaps, r.GapSum)
	case r.TTFT > 0 && r.Tokens > 1 && r.E2E > r.TTFT:
		// The engine does not count its gaps: the mean, once per gap.
		gaps := uint64(r.Tokens - 1)
		total := r.E2E - r.TTFT
		mm.itl.observeN(total.Seconds()/float64(gaps), gaps, uint64(total))
	}
}

// Route counts the HTTP responses of one route by status. Inc is an
// atomic add: safe on the event loop.
type Route struct {
	name   string
	status [600]atomic.Uint64
}

// Route returns the counter of responses of a route, creating it. Call at
// setup; the returned *Route is then used per request.
func (m *Metrics) Route(name string) *Route {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.routes {
		if r.name == name {
			return r
		}
	}
	r := &Route{name: name}
	m.routes = append(m.routes, r)
	return r
}

// Inc counts one response with status. A nil Route counts nothing.
func (r *Route) Inc(status int) {
	if r != nil && status >= 100 && status < len(r.status) {
		r.status[status].Add(1)
	}
}

// Counter is a monotonic counter read at scrape time. Inc is an atomic add.
type Counter struct{ v atomic.Uint64 }

// Inc adds one. A nil Counter counts nothing.
func (c *Counter) Inc() {
	if c != nil {
		c.v.Add(1)
	}
}

// Load returns the count.
func (c *Counter) Load() uint64 { return c.v.Load() }

// Rejected returns the counter of requests refused for reason (overloaded,
// draining, max_connections, unauthorized, ...). Call at setup.
func (m *Metrics) Rejected(reason string) *Counter {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.reject[reason]
	if c == nil {
		c = &Counter{}
		m.reject[reason] = c
	}
	return c
}

// Registry is the Prometheus registry holding every metric (for embedders
// that serve it themselves, or add their own collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ContentType is the content type of what AppendText renders.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// AppendText gathers every metric and appends it in the Prometheus text
// format (version 0.0.4). Not cheap: run it off the event loop.
func (m *Metrics) AppendText(dst []byte) ([]byte, error) {
	mfs, err := m.reg.Gather()
	if err != nil {
		return dst, err
	}
	buf := bytes.NewBuffer(dst)
	enc := expfmt.NewEncoder(buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return buf.Bytes(), err
		}
	}
	return buf.Bytes(), nil
}

// gapHistogram is the inter-token-latency histogram: it adds a request's
// gap counts at its end (merge), or, for an engine that does not count
// them, its mean gap n times (observeN). Atomics only, no lock, no
// allocation. (client_golang's Histogram.Observe is lock- and
// allocation-free too, see BenchmarkPrometheusObserve, but it adds one
// observation at a time: merging a request's counts through it would cost
// an Observe per gap.)
type gapHistogram struct {
	upper  []float64
	counts []atomic.Uint64 // per bucket, not cumulative; last is +Inf
	count  atomic.Uint64
	sumNs  atomic.Uint64 // exact total of the gaps, nanoseconds
}

func newGapHistogram(upper []float64) *gapHistogram {
	return &gapHistogram{upper: upper, counts: make([]atomic.Uint64, len(upper)+1)}
}

func (h *gapHistogram) observeN(v float64, n, totalNs uint64) {
	i := sort.SearchFloat64s(h.upper, v) // first bound >= v: buckets are le
	h.counts[i].Add(n)
	h.count.Add(n)
	h.sumNs.Add(totalNs)
}

// merge adds one request's gap counts (per bucket, len(h.counts) of them)
// and their total: an atomic add per non-empty bucket, then count and sum.
func (h *gapHistogram) merge(counts []uint32, sum time.Duration) {
	var n uint64
	for i, c := range counts {
		if c != 0 {
			h.counts[i].Add(uint64(c))
			n += uint64(c)
		}
	}
	if n == 0 {
		return
	}
	h.count.Add(n)
	h.sumNs.Add(uint64(max(0, sum)))
}

func (h *gapHistogram) metric(desc *prometheus.Desc, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.upper))
	var cum uint64
	for i, ub := range h.upper {
		cum += h.counts[i].Load()
		buckets[ub] = cum
	}
	// Read count last and never below the buckets, so a scrape racing an
	// observation stays consistent (count >= every bucket).
	count := max(h.count.Load(), cum)
	return prometheus.MustNewConstHistogram(desc, count, float64(h.sumNs.Load())/1e9, buckets, labels...)
}

// collector reads the engine's and the server's figures at scrape time.
type collector struct {
	m       *Metrics
	itlDesc *prometheus.Desc
}

var (
	descRunning = prometheus.NewDesc("vllm:num_requests_running", "Requests running in the engine.", []string{"model_name"}, nil)
	descWaiting = prometheus.NewDesc("vllm:num_requests_waiting", "Requests waiting for the engine.", []string{"model_name"}, nil)
	descKV      = prometheus.NewDesc("vllm:kv_cache_usage_perc", "KV cache usage: 1 means 100 percent.", []string{"model_name"}, nil)
	descPrompt  = prometheus.NewDesc("vllm:prompt_tokens_total", "Prompt tokens processed.", []string{"model_name"}, nil)
	descGen     = prometheus.NewDesc("vllm:generation_tokens_total", "Tokens generated.", []string{"model_name"}, nil)
	descPreempt = prometheus.NewDesc("vllm:num_preemptions_total", "Preemptions by the engine's scheduler.", []string{"model_name"}, nil)
	descPQ      = prometheus.NewDesc("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.", []string{"model_name"}, nil)
	descPH      = prometheus.NewDesc("vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.", []string{"model_name"}, nil)
	descCompute = prometheus.NewDesc("vajra_engine_compute_cpu_seconds_total",
		"CPU time the engine spent computing the model (llama: llama_decode and the samplers on the engine's thread); process CPU minus it is the front door's cost. 0 for engines that do not measure it.", nil, nil)
	descKVMoves      = prometheus.NewDesc("vajra_llama_kv_moves_total", "Requests moved with their KV from a short KV stream to the long pool (llama engine).", nil, nil)
	descKVCopies     = prometheus.NewDesc("vajra_llama_kv_stream_copies_total", "Shared prompts copied across KV streams as a whole stream, where llama.cpp refused the prefix as a state (llama engine).", nil, nil)
	descLlamaThreads = prometheus.NewDesc("vajra_llama_compute_threads", "llama.cpp compute threads in use: the thread tuner's choice, or --threads (llama engine).", nil, nil)

	descConns     = prometheus.NewDesc("vajra_open_connections", "Open client connections.", nil, nil)
	descBytes     = prometheus.NewDesc("vajra_bytes_written_total", "Bytes written to client sockets.", nil, nil)
	descParse     = prometheus.NewDesc("vajra_parse_errors_total", "Requests refused by the HTTP parser.", nil, nil)
	descSlow      = prometheus.NewDesc("vajra_slow_consumer_aborts_total", "Connections closed because the client did not read fast enough.", nil, nil)
	descAborts    = prometheus.NewDesc("vajra_client_disconnect_aborts_total", "Requests aborted because the client disconnected.", nil, nil)
	descIdle      = prometheus.NewDesc("vajra_idle_connections_closed_total", "Keep-alive connections closed after the idle timeout.", nil, nil)
	descKeep      = prometheus.NewDesc("vajra_stream_keepalives_total", "Keep-alives (SSE comment, Anthropic ping) written on streams silent for --stream-keepalive.", nil, nil)
	descWakes     = prometheus.NewDesc("vajra_event_loop_wakes_total", "Times an event loop was woken to write what sessions queued (about one per loop per engine step when streaming).", nil, nil)
	descRingLoops = prometheus.NewDesc("vajra_io_uring_event_loops", "Event loops that send through io_uring, one submit per wake for all their ready connections (--io-uring); 0: every loop writes with write(2).", nil, nil)
	descRingSubs  = prometheus.NewDesc("vajra_io_uring_submits_total", "io_uring submits of batched sends (one system call each).", nil, nil)
	descRingSends = prometheus.NewDesc("vajra_io_uring_sends_total", "Sends carried by io_uring submits; divided by the submits, the batch size.", nil, nil)
	descHTTP      = prometheus.NewDesc("vajra_http_requests_total", "HTTP responses by route and status.", []string{"route", "status"}, nil)
	descRejected  = prometheus.NewDesc("vajra_rejected_requests_total", "Requests refused before any work, by reason.", []string{"reason"}, nil)
	descUnknown   = prometheus.NewDesc("vajra_unknown_request_fields_total", "Request fields no dialect knows, by endpoint and field.", []string{"endpoint", "field"}, nil)
	descPanics    = prometheus.NewDesc("vajra_session_panics_total", "Panics in per-session code (session actor, request formatter or sink), each of which ended its own request only.", nil, nil)

	descWSConns  = prometheus.NewDesc("vajra_websocket_connections", "Open WebSocket connections (Realtime, Responses over WebSocket).", nil, nil)
	descWSProto  = prometheus.NewDesc("vajra_websocket_protocol_errors_total", "WebSocket connections closed because the client broke the protocol (close codes 1002, 1003, 1007, 1009).", nil, nil)
	descWSCloses = prometheus.NewDesc("vajra_websocket_closes_total", "WebSocket close frames the server sent, by close code.", []string{"code"}, nil)

	descStored     = prometheus.NewDesc("vajra_responses_stored_total", "Responses API objects stored.", nil, nil)
	descEvicted    = prometheus.NewDesc("vajra_responses_evicted_total", "Stored responses evicted by the count or byte bound (least recently used first).", nil, nil)
	descDeleted    = prometheus.NewDesc("vajra_responses_deleted_total", "Stored responses deleted by clients.", nil, nil)
	descStoreCount = prometheus.NewDesc("vajra_responses_store_count", "Responses held in the store.", nil, nil)
	descStoreBytes = prometheus.NewDesc("vajra_responses_store_bytes", "Bytes held in the response store.", nil, nil)
	descLive       = prometheus.NewDesc("vajra_responses_background_running", "Background responses running (bounded; more are refused with 429).", nil, nil)
	descStoreFail  = prometheus.NewDesc("vajra_response_store_save_failures_total", "Responses that could not be saved (store unreachable, overloaded, or entry over the cap); their streams still ended.", nil, nil)
	descStoreOps   = prometheus.NewDesc("vajra_response_store_operations_total", "Response store commands (Redis), by kind and result.", []string{"op", "result"}, nil)
	descStoreLat   = prometheus.NewDesc("vajra_response_store_operation_duration_seconds", "Latency of response store commands that reached the store (Redis), by kind.", []string{"op"}, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRunning, descWaiting, descKV, descPrompt, descGen, descPreempt, descPQ, descPH, descCompute, descKVMoves, descKVCopies, descLlamaThreads,
		descConns, descBytes, descParse, descSlow, descAborts, descWakes, descRingLoops, descRingSubs, descRingSends, descIdle, descKeep, descHTTP, descRejected, descUnknown, descPanics, c.itlDesc,
		descStored, descEvicted, descDeleted, descStoreCount, descStoreBytes, descLive, descStoreFail, descStoreOps, descStoreLat} {
		ch <- d
	}
	ch <- descWSConns
	ch <- descWSProto
	ch <- descWSCloses
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	model := c.m.first.name
	src := c.m.src.Load()
	if f := src.Engine; f != nil {
		st := f()
		gauge(descRunning, float64(st.Running), model)
		gauge(descWaiting, float64(st.Waiting), model)
		gauge(descKV, st.KVUsage, model)
		counter(descPrompt, st.PromptTokens, model)
		counter(descGen, st.GenerationTokens, model)
		counter(descPreempt, st.Preemptions, model)
		counter(descPQ, st.PrefixQueries, model)
		counter(descPH, st.PrefixHits, model)
		ch <- prometheus.MustNewConstMetric(descCompute, prometheus.CounterValue, st.ComputeCPU.Seconds())
		if st.Llama {
			counter(descKVMoves, st.KVMoves)
			counter(descKVCopies, st.KVStreamCopies)
			gauge(descLlamaThreads, float64(st.ComputeThreads))
		}
	}
	for _, mm := range c.m.models {
		ch <- mm.itl.metric(c.itlDesc, mm.name)
	}
	if f := src.Server; f != nil {
		st := f()
		gauge(descConns, float64(st.OpenConnections))
		gauge(descWSConns, float64(st.WebSocketConnections))
		counter(descWSProto, st.WebSocketProtocolErrors)
		for _, cc := range st.WebSocketCloses {
			counter(descWSCloses, cc.N, cc.Code)
		}
		counter(descBytes, st.BytesWritten)
		counter(descParse, st.ParseErrors)
		counter(descSlow, st.SlowConsumers)
		counter(descAborts, st.ClientAborts)
		counter(descWakes, st.LoopWakes)
		gauge(descRingLoops, float64(st.IOUringLoops))
		counter(descRingSubs, st.IOUringSubmits)
		counter(descRingSends, st.IOUringSends)
		counter(descIdle, st.IdleClosed)
		counter(descKeep, st.Keepalives)
	}
	if f := src.SessionPanics; f != nil {
		counter(descPanics, f())
	}
	if f := src.Store; f != nil {
		st := f()
		counter(descStored, st.Stored)
		counter(descEvicted, st.Evicted)
		counter(descDeleted, st.Deleted)
		gauge(descStoreCount, float64(st.Count))
		gauge(descStoreBytes, float64(st.Bytes))
		gauge(descLive, float64(st.Live))
		counter(descStoreFail, st.SaveFailures)
		for _, op := range st.Ops {
			for res, n := range op.Results {
				counter(descStoreOps, n, op.Op, res)
			}
			cum := make(map[float64]uint64, len(op.Bounds))
			var total uint64
			for i, b := range op.Bounds {
				total += op.Buckets[i]
				cum[b] = total
			}
			if len(op.Buckets) > len(op.Bounds) {
				total += op.Buckets[len(op.Bounds)]
			}
			ch <- prometheus.MustNewConstHistogram(descStoreLat, total, op.Sum, cum, op.Op)
		}
	}
	c.m.mu.Lock()
	routes := append([]*Route(nil), c.m.routes...)
	reject := make(map[string]uint64, len(c.m.reject))
	for k, v := range c.m.reject {
		reject[k] = v.Load()
	}
	c.m.mu.Unlock()
	for _, r := range routes {
		for s := range r.status {
			if n := r.status[s].Load(); n > 0 {
				counter(descHTTP, n, r.name, statusText[s])
			}
		}
	}
	for reason, n := range reject {
		counter(descRejected, n, reason)
	}
	if f := src.UnknownFields; f != nil {
		f(func(endpoint, field string, n uint64) {
			counter(descUnknown, n, endpoint, field)
		})
	}
}

// statusText holds "100".."599", so a scrape formats no status.
var statusText = func() (t [600]string) {
	for i := range t {
		t[i] = itoa3(i)
	}
	return t
}()

func itoa3(i int) string {
	return string([]byte{byte('0' + i/100), byte('0' + i/10%10), byte('0' + i%10)})
}

// SetSources replaces the scrape-time sources (for sources built after
// the metrics, like the server that serves them). Safe for concurrent use.
func (m *Metrics) SetSources(src Sources) {
	m.src.Store(&src)
}
