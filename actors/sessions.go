// Package actors runs one protoactor actor per generation request. A session
// decodes and validates its request, starts an engine session, forwards the
// frames the engine formatted to its connection untouched, sums usage, and
// ends the response. When its connection closes it aborts the engine
// session and stops. Everything that can go wrong in one request stays
// inside its actor: a panic stops that session (its supervisor never
// restarts one) and ends its response with an error, never the server.
package actors

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/store"
)

// Config configures Sessions.
type Config struct {
	Engine engine.Engine
	// Models are the served model names; requests naming another get 404.
	Models []string
	// MaxModelLen is the context length /tokenize reports.
	MaxModelLen int
	// System is the actor system to spawn sessions in. Nil creates one
	// whose logs go through Logger. Embedders pass their own.
	System *actor.ActorSystem
	// Workers run session mailboxes; 0 means GOMAXPROCS.
	Workers int
	Logger  *zap.Logger
	// Observer, when set, is told about every request the engine finished
	// (also after an abort): once per request, never per token.
	Observer Observer
	// Store selects and bounds the Responses API's response store.
	Store store.Config
	// StreamInterval coalesces up to this many tokens per streamed frame
	// (vLLM's --stream-interval); 0 or 1 sends one frame per token.
	StreamInterval int
	// WorkerHeader sends X-Vajra-Worker (the engine worker that ran the
	// request: an engine Session with a WorkerURL method, the remote
	// engine's) with each generation's response head.
	WorkerHeader bool
}

// Observer receives each finished request's final Result, once, on the
// engine's goroutine: it must be cheap and must not block. res is valid
// only during the call.
type Observer interface {
	RequestDone(ep Endpoint, model string, res *engine.Result)
}

// Sessions spawns and supervises session actors. Safe for concurrent use.
type Sessions struct {
	cfg    Config
	log    *zap.Logger
	system *actor.ActorSystem
	root   *actor.RootContext
	pool   *WorkerPool
	prep   *prepPool // Engine.Prepare of large requests (prepare.go)
	models map[string]bool

	active   atomic.Int64
	idle     chan struct{} // signalled when active drops to 0
	failures atomic.Uint64 // sessions stopped by a panic
	// admitter admits the creates of Responses API WebSockets
	// (admission.go); nil admits them at once.
	admitter Admitter
	// panics counts panics of per-session code: in the session actor, in
	// the Observer, or (reported by a Result's Panicked) in the request's
	// Formatter or Sink on the engine's goroutine.
	panics  atomic.Uint64
	unknown unknownFields
	store   store.Store // stored Responses API responses (package store)
	// bg are the background responses' sessions (background.go), with
	// their addresses: bounded by Store.MaxBackground, aborted by
	// StopBackground. Touched once per background request, never per token.
	bgMu sync.Mutex
	bg   map[*session]*actor.PID
	// spawner spawns the session actors with reused props (spawn.go).
	spawner *spawner
	// direct: a session posts its own notices (frames ready, stop) to its
	// mailbox instead of through its address (see session.post).
	direct bool
	// parsesOutput: the engine parses its model's output
	// (engine.ParsesOutput): include_reasoning false then hides the
	// generated tokens' ids and logprobs too, as vLLM's does.
	parsesOutput bool
}

// NewSessions sets up session supervision.
func NewSessions(cfg Config) (*Sessions, error) {
	if cfg.Engine == nil {
		return nil, errors.New("actors: Config.Engine is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	s := &Sessions{
		cfg:    cfg,
		log:    cfg.Logger,
		system: cfg.System,
		pool:   NewWorkerPool(cfg.Workers),
		models: map[string]bool{},
		idle:   make(chan struct{}, 1),
		bg:     map[*session]*actor.PID{},

		parsesOutput: engine.ParsesOutput(cfg.Engine),
	}
	s.cfg.Store = cfg.Store.WithDefaults()
	for _, m := range cfg.Models {
		s.models[m] = true
	}
	if s.system == nil {
		s.system = NewActorSystem(cfg.Logger)
	}
	// Sessions are children of a guardian whose strategy stops a failed
	// session: a restarted session would replay a request whose response
	// is already half written.
	stop := actor.NewOneForOneStrategy(0, 0, func(reason any) actor.Directive {
		s.failures.Add(1)
		// The session logged the panic, with its request id and stack.
		if ce := s.log.Check(zap.DebugLevel, "session failed; stopping it"); ce != nil {
			ce.Write(zap.Any("reason", reason))
		}
		return actor.StopDirective
	})
	s.root = s.system.Root.WithGuardian(stop)
	s.prep = newPrepPool(s.log, 0)
	st, err := store.Spawn(s.system, s.cfg.Store, s.pool.Producer(), s.log)
	if err != nil {
		return nil, err
	}
	s.store = st
	s.spawner = newSpawner(s.root, s.pool)
	// An actor system with metrics counts stops in ctx.Stop: its sessions
	// stop through protoactor.
	s.direct = s.system.Config.MetricsProvider == nil
	return s, nil
}

// NewActorSystem returns an actor system whose own logs go through zap.
func NewActorSystem(log *zap.Logger) *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(zapslog.NewHandler(log.Named("actor").Core()))
	}))
}

// Start spawns the session for one request. It never blocks on the engine:
// decoding and validation run in the actor. Safe for concurrent use.
func (s *Sessions) Start(conn Conn, req *Request) Handle {
	return s.start(conn, req, false)
}

// start spawns a session, held (before its admission permit: held.go) or
// not.
func (s *Sessions) start(conn Conn, req *Request, held bool) *session {
	ss := newSession(req.Endpoint)
	ss.conn, ss.req, ss.held = conn, req, held
	ss.start(s, ss, req.Endpoint, req.RequestID)
	return ss
}

// Active is the number of live sessions.
func (s *Sessions) Active() int64 { return s.active.Load() }

// Failures is the number of sessions stopped by a panic.
func (s *Sessions) Failures() uint64 { return s.failures.Load() }

// Panics is the number of panics in per-session code, each of which ended
// its session only: in a session actor, in the Observer, or in a request's
// Formatter or Sink on the engine's goroutine (a Result with Panicked).
// Safe for concurrent use.
func (s *Sessions) Panics() uint64 { return s.panics.Load() }

func (s *Sessions) sessionEnded() {
	if s.active.Add(-1) == 0 {
		select {
		case s.idle <- struct{}{}:
		default:
		}
	}
}

// Wait blocks until no session is live or ctx ends. The idle channel holds
// one signal, so a drop to zero is never missed; the loop re-checks because
// new sessions may have started since.
func (s *Sessions) Wait(ctx context.Context) error {
	for s.active.Load() > 0 {
		select {
		case <-s.idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close stops the mailbox workers. Call after every session ended.
func (s *Sessions) Close() {
	s.store.Stop()
	if s.cfg.System == nil {
		s.system.Shutdown()
	}
	s.prep.stop()
	s.pool.Stop()
}

// reserveBackground counts ss among the background responses, or reports
// that Store.MaxBackground run already. Runs in ss's actor (ss.self set).
func (s *Sessions) reserveBackground(ss *session) bool {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if len(s.bg) >= s.cfg.Store.MaxBackground {
		return false
	}
	s.bg[ss] = ss.self
	return true
}

// releaseBackground returns ss's place (idempotent).
func (s *Sessions) releaseBackground(ss *session) {
	s.bgMu.Lock()
	delete(s.bg, ss)
	s.bgMu.Unlock()
}

// StopBackground aborts every background response still running, for a
// server that stops: each ends cancelled (stored so while the store runs)
// and its session stops, so that Wait returns. Their HTTP exchanges ended
// long ago: closing connections does not reach them. Safe for concurrent
// use.
func (s *Sessions) StopBackground() {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	for ss, pid := range s.bg {
		s.root.Send(pid, &ss.bg.stopMsg)
	}
}

func (s *Sessions) servesModel(m string) bool { return s.models[m] }
