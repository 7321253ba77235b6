package vajra

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/vajra-go/vajra/actors"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/engine/route"
	"github.com/vajra-go/vajra/engine/sim"
	"github.com/vajra-go/vajra/metrics"
	"github.com/vajra-go/vajra/netio"
	"github.com/vajra-go/vajra/store"
)

// Config configures a Server. DefaultConfig gives the values of `vajra serve`.
type Config struct {
	// Host and Port to listen on. Port 0 picks a free port (see Addr).
	Host string
	Port int // see Host
	// Listener, when set, is served instead of listening on Host and Port:
	// a socket already listening, e.g. inherited from the process that
	// started Vajra (`vajra frontend`, started by vLLM). The Server owns it.
	Listener *net.TCPListener
	// APIKeys, when any, are required on every route but /health and /ping.
	APIKeys []string
	// ServedModelNames are the model names clients may ask for; the first
	// is reported first by /v1/models. Default "vajra-sim".
	ServedModelNames []string
	// Loops is the number of event loops (0: one per P, GOMAXPROCS).
	Loops int
	// KeepGOMAXPROCS stops Start from raising GOMAXPROCS to Loops+1. The
	// event loops keep their P while they wait in epoll_wait, so without a
	// spare P timers and the engine can wait up to 10-20 ms for Go's sysmon
	// to free one; the spare is taken back while the CPU is saturated (see
	// internal/spareproc).
	KeepGOMAXPROCS bool
	// IOUring picks how the event loops send: "auto" (default: io_uring
	// where the kernel allows it, else write(2)), "on" (Start fails
	// without it) or "off" (one write(2) per connection per wake).
	IOUring string
	// EngineConfig holds the settings every engine shares (context
	// length, sequences, KV cache, seed, chat template, parsers, stream
	// interval): set here once, they reach whichever engine New builds,
	// the simulated one (Sim), the Driver's or the Remote workers'. A
	// setting that engine cannot honour fails New (e.g. a chat template
	// with the simulated engine, --max-num-seqs with workers). Sim,
	// DriverConfig and Remote embed an engine.Config of their own for
	// standalone use; set here, New refuses theirs when it is not zero,
	// so that no setting is read from two places. With Engine set, only
	// StreamInterval and MaxModelLen (the context length of an Engine
	// that does not report one) apply; the others fail New.
	EngineConfig engine.Config
	// ResponseStore selects where the Responses API keeps stored
	// responses: the zero value is this process's bounded LRU; a URL
	// (redis://, rediss://, unix://) shares them with a fleet through
	// Redis, with a TTL (default 30 days), an entry cap and a key prefix.
	ResponseStore store.Config
	// Sim configures the embedded simulated engine when Engine is nil and
	// neither Driver nor Remote's workers are set: its own knobs (timing,
	// mode); the shared ones are EngineConfig's.
	Sim sim.Config
	// Driver, when set and Engine is nil, names the registered engine
	// driver (engine.Register) that serves instead of the simulated
	// engine, configured by DriverConfig: "llama" serves a GGUF model
	// with llama.cpp in process and is linked by importing
	// github.com/vajra-go/vajra/engine/llama (cgo), as a program links a
	// database/sql driver; DriverConfig is then a llama.Config (or a
	// *llama.Config). This package links no such driver itself: an
	// unknown name fails New with engine.ErrUnknownDriver. An engine
	// that reports AdapterNames (llama's LoRA adapters) has them served
	// beside ServedModelNames.
	Driver       string
	DriverConfig any // see Driver
	// Remote serves the model of remote engine workers (engine/remote)
	// when its Workers are set and Engine is nil. Each worker URL's
	// scheme names a protocol registered by the package a program
	// imports: engine/remote/llamaserver (llama-server://),
	// engine/remote/vllm (vllm://), engine/remote/sglang (sglang://),
	// engine/remote/vllmcore (vllm-core://: vLLM engines attach to the
	// bound address, each rank a worker; needs Remote.TokenizerPath); the
	// last two link gRPC. With no ServedModelNames the model is served
	// under the workers' name for it.
	Remote remote.Config
	// WorkerHeader sends X-Vajra-Worker, the remote worker that ran the
	// request, with each generation's response (--worker-header).
	WorkerHeader bool
	// Routing chooses among the remote workers (engine/route): the
	// policy, the circuit breakers, the retries. Used when Remote.Picker
	// is nil.
	Routing route.Config
	// Engine, when set, is used instead of the embedded simulated engine.
	// Vajra closes it on Stop.
	Engine engine.Engine
	// ActorSystem, when set, hosts the server's actors (embedding): its
	// actors can then ask for generations in process (see the package doc
	// and Server.PID). Nil creates a system of the server's own.
	ActorSystem *actor.ActorSystem
	// Logger for everything; nil logs nothing.
	Logger *zap.Logger

	// APIKeys above; ProtectMetrics requires a key on /metrics too.
	ProtectMetrics bool
	// MaxConcurrentRequests caps generation requests in flight, HTTP,
	// in-process and the creates of Responses API WebSockets alike (0: no
	// cap); MaxQueuedRequests more wait for a slot, FIFO; beyond both a
	// request gets 429 (529 on Anthropic routes) with Retry-After
	// (RetryAfter, default 1s) before any stream starts.
	MaxConcurrentRequests int
	MaxQueuedRequests     int           // see MaxConcurrentRequests
	RetryAfter            time.Duration // see MaxConcurrentRequests
	// MaxQueueWait bounds a queued request's wait: past it the request is
	// refused as a full queue refuses. 0: no deadline; DefaultConfig sets
	// netio.DefaultMaxQueueWait.
	MaxQueueWait time.Duration
	// MaxConnections caps open connections (0: the open-file limit minus
	// a reserve, see netio.DefaultMaxConnections).
	MaxConnections int
	// MaxOutboundBytes is the slow-consumer limit: a client whose unsent
	// output exceeds it is disconnected and its request aborted (0: 4 MiB).
	MaxOutboundBytes int
	// MaxWSMessageBytes bounds one client WebSocket message (Realtime,
	// Responses over WebSocket) after reassembly; a bigger one closes its
	// connection with 1009 (0: netio.DefaultMaxWSMessageBytes, 16 MiB,
	// room for the Realtime API's 15 MiB audio appends).
	MaxWSMessageBytes int
	// IdleTimeout closes a keep-alive connection idle between requests for
	// longer; RequestReadTimeout answers 408 to a request still incomplete
	// after it and closes the connection. 0 disables each; DefaultConfig
	// sets netio.DefaultIdleTimeout and netio.DefaultRequestReadTimeout.
	// Streams in flight are never timed out (see MaxOutboundBytes for
	// clients that stop reading).
	IdleTimeout        time.Duration
	RequestReadTimeout time.Duration // see IdleTimeout
	// StreamKeepalive sends a keep-alive (an SSE comment, or Anthropic's
	// ping event) on a stream that has sent nothing for this long, also
	// while its request waits in the admission queue or in a long
	// prefill, so that proxies with short idle timeouts keep it. 0: off;
	// DefaultConfig sets netio.DefaultStreamKeepalive.
	StreamKeepalive time.Duration
	// AllowedOrigins enables CORS for these origins ("*" for any).
	AllowedOrigins []string
	// AccessLog, when set, gets one line per request (never per token);
	// give it a sampling core.
	AccessLog *zap.Logger
	// DisableMetrics turns GET /metrics off (the counters still count).
	DisableMetrics bool
}

// DefaultModelName is the served model name when none is configured.
const DefaultModelName = "vajra-sim"

// The response store's default bounds (Config.ResponseStore's zero
// values take them).
const (
	DefaultStoreMaxResponses = store.DefaultMaxResponses
	DefaultStoreMaxBytes     = store.DefaultMaxBytes
	DefaultMaxBackground     = store.DefaultMaxBackground
	DefaultMaxEventLogBytes  = store.DefaultMaxEventLogBytes
)

// DefaultConfig returns the defaults of `vajra serve`.
func DefaultConfig() Config {
	return Config{
		Host:               "127.0.0.1",
		Port:               8000,
		ServedModelNames:   []string{DefaultModelName},
		Sim:                sim.DefaultConfig(),
		IdleTimeout:        netio.DefaultIdleTimeout,
		RequestReadTimeout: netio.DefaultRequestReadTimeout,
		MaxQueueWait:       netio.DefaultMaxQueueWait,
		StreamKeepalive:    netio.DefaultStreamKeepalive,
	}
}

// Server is a Vajra server: network layer, session actors and engine.
type Server struct {
	cfg      Config
	log      *zap.Logger
	eng      engine.Engine
	sessions *actors.Sessions
	net      *netio.Server
	metrics  *metrics.Metrics

	// The in-process protocol (embed.go): the gateway actor at PID and
	// the live requests, for cancels.
	gateway *actor.PID
	local   localTable
	started atomic.Bool // Start succeeded: the network layer must stop

	stopOnce sync.Once
	stopErr  error
}

// New builds a server from cfg; nothing listens until Start.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	eng := cfg.Engine
	if err := checkEngineConfig(&cfg); err != nil {
		return nil, err
	}
	var router *route.Router
	if eng == nil && len(cfg.Remote.Workers) > 0 {
		rc := cfg.Remote
		rc.Config = cfg.EngineConfig
		rc.Logger = cfg.Logger.Named("remote")
		if rc.Picker == nil {
			rt, err := route.New(cfg.Routing)
			if err != nil {
				return nil, fmt.Errorf("vajra: %w", err)
			}
			rc.Picker, router = rt, rt
		}
		e, err := remote.New(rc)
		if err != nil {
			return nil, fmt.Errorf("vajra: engine: %w", err)
		}
		eng = e
		if len(cfg.ServedModelNames) == 0 {
			cfg.ServedModelNames = []string{remoteModelName(e, rc.Workers[0])}
		}
	}
	if len(cfg.ServedModelNames) == 0 {
		cfg.ServedModelNames = []string{DefaultModelName}
	}
	if eng == nil && cfg.Driver != "" {
		e, err := engine.Open(cfg.Driver, cfg.EngineConfig, cfg.DriverConfig, cfg.Logger.Named(cfg.Driver))
		if err != nil {
			return nil, fmt.Errorf("vajra: engine: %w", err)
		}
		eng = e
		// Each LoRA adapter is served under its own model name.
		if a, ok := e.(interface{ AdapterNames() []string }); ok {
			for _, name := range a.AdapterNames() {
				if !slices.Contains(cfg.ServedModelNames, name) {
					cfg.ServedModelNames = append(cfg.ServedModelNames, name)
				}
			}
		}
	}
	if eng == nil {
		sc := cfg.Sim
		sc.Config = cfg.EngineConfig
		sc.Logger = cfg.Logger.Named("sim")
		e, err := sim.New(sc)
		if err != nil {
			return nil, fmt.Errorf("vajra: engine: %w", err)
		}
		eng = e
	}
	var m *metrics.Metrics
	var obs actors.Observer
	if !cfg.DisableMetrics {
		m = metrics.New(cfg.ServedModelNames, metrics.Sources{Engine: func() metrics.EngineStats { return engineStats(eng) }},
			metrics.MaxModelLen(maxModelLen(cfg, eng)))
		obs = requestObserver{m}
	}
	sessions, err := actors.NewSessions(actors.Config{
		Engine:      eng,
		Models:      cfg.ServedModelNames,
		MaxModelLen: maxModelLen(cfg, eng),
		System:      cfg.ActorSystem,
		Logger:      cfg.Logger.Named("session"),
		Observer:    obs,
		// StreamInterval is per server, as in vLLM.
		StreamInterval: cfg.EngineConfig.StreamInterval,
		WorkerHeader:   cfg.WorkerHeader,
		Store:          cfg.ResponseStore,
	})
	if err != nil {
		_ = eng.Close()
		return nil, err
	}
	n, err := netio.New(netio.Options{
		Addr:           net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)),
		Listener:       cfg.Listener,
		Loops:          cfg.Loops,
		KeepGOMAXPROCS: cfg.KeepGOMAXPROCS,
		IOUring:        cfg.IOUring,
		APIKeys:        cfg.APIKeys,
		Models:         cfg.ServedModelNames,
		MaxModelLen:    maxModelLen(cfg, eng),
		Sessions:       sessions,
		Engine:         eng,
		Logger:         cfg.Logger.Named("net"),

		Metrics:               m,
		ProtectMetrics:        cfg.ProtectMetrics,
		Version:               Version(),
		MaxConcurrentRequests: cfg.MaxConcurrentRequests,
		MaxQueuedRequests:     cfg.MaxQueuedRequests,
		MaxQueueWait:          cfg.MaxQueueWait,
		RetryAfter:            cfg.RetryAfter,
		MaxConnections:        cfg.MaxConnections,
		MaxOutboundBytes:      cfg.MaxOutboundBytes,
		MaxWSMessageBytes:     cfg.MaxWSMessageBytes,
		IdleTimeout:           cfg.IdleTimeout,
		RequestReadTimeout:    cfg.RequestReadTimeout,
		StreamKeepalive:       cfg.StreamKeepalive,
		AllowedOrigins:        cfg.AllowedOrigins,
		AccessLog:             cfg.AccessLog,
		Workers:               workersJSON(router, eng),
		Control:               engineControl(eng),
	})
	if err != nil {
		sessions.Close()
		_ = eng.Close()
		return nil, err
	}
	if m != nil && router != nil {
		re := eng.(*remote.Engine)
		m.Registry().MustRegister(router.Collector(re.Workers))
	}
	if m != nil {
		// The sources that need the built server, read at scrape time.
		m.SetSources(metrics.Sources{
			Engine:        func() metrics.EngineStats { return engineStats(eng) },
			Server:        n.ServerStats,
			Store:         func() metrics.StoreStats { return storeStats(sessions) },
			UnknownFields: sessions.UnknownFields,
			SessionPanics: sessions.Panics,
		})
	}
	srv := &Server{cfg: cfg, log: cfg.Logger, eng: eng, sessions: sessions, net: n, metrics: m}
	srv.startGateway()
	sessions.SetAdmitter(n) // the creates of Responses API WebSockets (netio/admission.go)
	return srv, nil
}

// SetWorkers replaces the remote engine's workers (a configuration
// reload): new ones are dialed, removed ones drain. It fails when the
// server does not run the remote engine, or a new worker does not dial.
func (s *Server) SetWorkers(urls []string) error {
	re, ok := engine.As[*remote.Engine](s.eng)
	if !ok {
		return errors.New("vajra: the server runs no remote engine (--worker)")
	}
	return re.SetWorkers(urls)
}

// workersJSON renders GET /workers for a routed remote engine (nil
// otherwise: 404).
func workersJSON(rt *route.Router, eng engine.Engine) func() []byte {
	re, ok := engine.As[*remote.Engine](eng)
	if rt == nil || !ok {
		return nil
	}
	return func() []byte { return rt.WorkersJSON(re.Workers()) }
}

// engineControl is the remote engine's control calls for vLLM's control
// endpoints (netio.EngineControl), nil for other engines (404).
func engineControl(eng engine.Engine) netio.EngineControl {
	if re, ok := engine.As[*remote.Engine](eng); ok {
		return remoteControl{re}
	}
	return nil
}

// remoteControl maps the remote engine's control errors to netio's.
type remoteControl struct{ e *remote.Engine }

func controlErr(err error) error {
	var we *remote.WorkerError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, remote.ErrNoController):
		return netio.ErrNoEngineControl
	case errors.As(err, &we) && (we.Status == 503 || we.Status == 0):
		return &engine.Error{Kind: engine.KindClosed, Message: "The engine is unavailable: " + err.Error()}
	}
	return err
}

func (c remoteControl) ResetPrefixCache(ctx context.Context, running, external bool) (bool, error) {
	ok, err := c.e.ResetPrefixCache(ctx, running, external)
	return ok, controlErr(err)
}

func (c remoteControl) Sleep(ctx context.Context, level int, mode string) error {
	return controlErr(c.e.Sleep(ctx, level, mode))
}

func (c remoteControl) WakeUp(ctx context.Context, tags []string) (bool, error) {
	ok, err := c.e.WakeUp(ctx, tags)
	return ok, controlErr(err)
}

func (c remoteControl) IsSleeping(ctx context.Context) (bool, error) {
	ok, err := c.e.IsSleeping(ctx)
	return ok, controlErr(err)
}

// remoteModelName is the name a remote engine's model is served under
// when none was configured: the workers' own (their served name, or their
// model file's base name); while no worker has answered, the first
// worker's host:port, so that the server starts all the same.
func remoteModelName(e *remote.Engine, worker string) string {
	if n := e.ModelName(); n != "" {
		return n
	}
	if u, err := url.Parse(worker); err == nil && u.Host != "" {
		return u.Host
	}
	return DefaultModelName
}

// storeStats adapts the response store's figures to the metrics package's.
func storeStats(s *actors.Sessions) metrics.StoreStats {
	st := s.ResponseStore().Stats()
	out := metrics.StoreStats{Stored: st.Stored, Evicted: st.Evicted, Deleted: st.Deleted, Count: st.Count, Bytes: st.Bytes,
		SaveFailures: st.SaveFailures, Live: st.Live}
	if !s.StoreIsMemory() {
		for op, name := range store.OpNames {
			m := metrics.StoreOp{Op: name, Results: map[string]uint64{}, Bounds: store.LatencyBuckets[:],
				Buckets: st.Ops.Buckets[op][:], Sum: st.Ops.Sum[op]}
			for r, res := range store.ResultNames {
				m.Results[res] = st.Ops.Count[op][r]
			}
			out.Ops = append(out.Ops, m)
		}
	}
	return out
}

// engineStats adapts the engine's figures to the metrics package's. An
// engine that measures its compute time (the llama engine) reports it
// through ComputeCPU; for others it stays 0. The llama engine's KV moves,
// stream copies and compute threads come through KVTransfers and
// ComputeThreads.
func engineStats(eng engine.Engine) metrics.EngineStats {
	st := eng.Stats()
	ms := metrics.EngineStats{
		Running: st.Running, Waiting: st.Waiting, KVUsage: st.KVUsage,
		PrefixQueries: st.PrefixQueries, PrefixHits: st.PrefixHits, Preemptions: st.Preemptions,
		PromptTokens: st.PromptTokens, GenerationTokens: st.GenerationTokens,
	}
	if c, ok := engine.As[interface{ ComputeCPU() time.Duration }](eng); ok {
		ms.ComputeCPU = c.ComputeCPU()
	}
	if l, ok := engine.As[interface {
		KVTransfers() (moves, streamCopies uint64)
		ComputeThreads() int
	}](eng); ok {
		ms.Llama, ms.ComputeThreads = true, l.ComputeThreads()
		ms.KVMoves, ms.KVStreamCopies = l.KVTransfers()
	}
	return ms
}

// requestObserver feeds each finished request's timings to the metrics,
// once per request: with the inter-token gaps the engine counted
// (engine.Result.Gaps, in the buckets both packages share), or, from an
// engine that counts none, the token count for the metrics' estimate.
type requestObserver struct{ m *metrics.Metrics }

func (o requestObserver) RequestDone(_ actors.Endpoint, model string, res *engine.Result) {
	r := metrics.Request{Model: model, Queue: res.Queued, TTFT: res.FirstToken, E2E: res.EndToEnd}
	switch {
	case res.Err == nil && len(res.Choices) > 0:
		r.FinishReason = string(res.Choices[0].FinishReason)
	case res.Err != nil && res.Err.Kind == engine.KindAborted:
		r.FinishReason = "abort"
	default:
		r.FinishReason = "error"
	}
	if n := len(res.Choices); n > 0 {
		r.Tokens = res.Usage.CompletionTokens / n
	}
	r.PromptTokens, r.GenerationTokens, r.N = res.Usage.PromptTokens, res.Usage.CompletionTokens, len(res.Choices)
	if res.Gaps.Recorded() {
		r.Gaps, r.GapSum = res.Gaps.Counts[:], res.Gaps.Sum
	}
	o.m.ObserveRequest(&r)
}

// Metrics returns the server's metrics (nil with DisableMetrics), e.g. to
// register more collectors on its Registry.
func (s *Server) Metrics() *metrics.Metrics { return s.metrics }

// maxModelLen is the context length the server reports and checks: the
// engine's own when it reports one, else EngineConfig's, else the
// simulated engine's default.
func maxModelLen(cfg Config, eng engine.Engine) int {
	if m, ok := engine.As[interface{ MaxModelLen() int }](eng); ok {
		return m.MaxModelLen()
	}
	if cfg.EngineConfig.MaxModelLen > 0 {
		return cfg.EngineConfig.MaxModelLen
	}
	return sim.DefaultMaxModelLen
}

// ErrEngineConfig: an engine's settings were given in two places, or to
// an Engine the caller built (see Config.EngineConfig).
var ErrEngineConfig = errors.New("vajra: engine settings")

// checkEngineConfig enforces that the settings every engine shares come
// from cfg.EngineConfig alone.
func checkEngineConfig(cfg *Config) error {
	ec := &cfg.EngineConfig
	if err := ec.Check(); err != nil {
		return fmt.Errorf("vajra: %w", err)
	}
	if cfg.Sim.Config != (engine.Config{}) {
		return fmt.Errorf("%w: Sim sets shared engine settings (%+v): set them in EngineConfig", ErrEngineConfig, cfg.Sim.Config)
	}
	if cfg.Remote.Config != (engine.Config{}) {
		return fmt.Errorf("%w: Remote sets shared engine settings (%+v): set them in EngineConfig", ErrEngineConfig, cfg.Remote.Config)
	}
	if cfg.Engine != nil {
		if err := ec.Unsupported("an Engine built by the caller", "configure it where it is built",
			"max-num-seqs", "kv-cache-tokens", "seed", "chat-template", "reasoning-parser", "tool-call-parser"); err != nil {
			return fmt.Errorf("%w: %w", ErrEngineConfig, err)
		}
	}
	return nil
}

// Start binds the listener and serves in the background.
func (s *Server) Start() error {
	if err := s.net.Start(); err != nil {
		return fmt.Errorf("vajra: listen: %w", err)
	}
	s.started.Store(true)
	s.log.Info("serving", zap.Stringer("addr", s.net.Addr()), zap.Strings("models", s.cfg.ServedModelNames))
	return nil
}

// Done is closed when the network layer stopped, by Stop or on its own;
// Err then tells which. `vajra serve` exits non-zero when it stops on its
// own, so that the orchestrator restarts the node.
func (s *Server) Done() <-chan struct{} { return s.net.Done() }

// Err is the reason the network layer stopped on its own, nil after Stop.
func (s *Server) Err() error { return s.net.Err() }

// Addr is the bound address (after Start).
func (s *Server) Addr() net.Addr { return s.net.Addr() }

// Engine returns the engine the server drives.
func (s *Server) Engine() engine.Engine { return s.eng }

// Drain starts draining without waiting (e.g. from a preStop hook):
// /health answers 503, the listener closes, new requests get 503 with
// Connection: close; requests in flight go on. Shutdown drains too.
// Safe for concurrent use; idempotent.
func (s *Server) Drain() { s.net.Drain() }

// Shutdown drains the server gracefully, for SIGTERM: /health turns 503 at
// once, the listener closes, new requests on open connections get 503
// with Connection: close, and the requests in flight run to their end
// until ctx ends (the shutdown timeout). Then the engine is closed: every
// stream still running ends with its dialect's terminal error event (the
// Formatter's AppendError, e.g. an error chunk and data: [DONE]) and every
// other request with an error response, so that no stream is cut without
// its end. Finally everything stops as in Stop. Safe for concurrent use.
func (s *Server) Shutdown(ctx context.Context) error {
	s.net.Drain()
	s.log.Info("draining", zap.Int64("in_flight", s.net.InFlight()))
	if err := s.net.WaitIdle(ctx); err != nil {
		s.log.Warn("shutdown timeout: ending the requests still in flight", zap.Int64("in_flight", s.net.InFlight()))
		errEng := s.eng.Close()
		// The engine delivers every final frame at once; the sessions and
		// loops need a moment to write them.
		gctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		errIdle := s.net.WaitIdle(gctx)
		cancel()
		if errIdle != nil {
			s.log.Warn("requests still in flight after the engine closed", zap.Int64("in_flight", s.net.InFlight()))
		}
		_ = errEng
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	return s.Stop(sctx)
}

// shutdownGrace bounds each step of Shutdown after its deadline: writing
// the final frames, then stopping the loops.
const shutdownGrace = 5 * time.Second

// Stop closes the listener and every connection (aborting their sessions),
// waits for the sessions to end, and closes the engine. Idempotent: a
// second call (e.g. a deferred Stop after Shutdown) returns the first's
// result.
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.stopGateway() // cancels the in-process requests
		var errNet error
		if s.started.Load() {
			errNet = s.net.Stop(ctx)
		}
		s.sessions.StopBackground() // no connection of theirs is left to close
		errWait := s.sessions.Wait(ctx)
		errEng := s.eng.Close()
		s.sessions.Close()
		s.net.Release()
		s.stopErr = errors.Join(errNet, errWait, errEng)
	})
	return s.stopErr
}
