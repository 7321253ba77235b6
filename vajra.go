// Package vajra is the public API to build, start, embed and stop a Vajra
// server: an HTTP/1.1 front door that speaks the OpenAI and Anthropic APIs
// and drives an LLM engine (by default the embedded simulated engine).
//
//	srv, err := vajra.New(vajra.DefaultConfig())
//	if err != nil { ... }
//	if err := srv.Start(); err != nil { ... }
//	defer srv.Stop(context.Background())
//
// To run inside an existing protoactor system, set Config.ActorSystem: the
// session actors are then spawned there (under Vajra's own stop-on-failure
// guardian), and Vajra leaves the system running when it stops.
package vajra

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/vajra-go/vajra/actors"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/sim"
	"github.com/vajra-go/vajra/netio"
)

// Config configures a Server. DefaultConfig gives the values of `vajra serve`.
type Config struct {
	// Host and Port to listen on. Port 0 picks a free port (see Addr).
	Host string
	Port int
	// APIKeys, when any, are required on every route but /health and /ping.
	APIKeys []string
	// ServedModelNames are the model names clients may ask for; the first
	// is reported first by /v1/models. Default "vajra-sim".
	ServedModelNames []string
	// Loops is the number of event loops (0: one per CPU).
	Loops int
	// Sim configures the embedded engine when Engine is nil. Its
	// MaxModelLen and MaxNumSeqs are vLLM's --max-model-len and
	// --max-num-seqs.
	Sim sim.Config
	// Engine, when set, is used instead of the embedded simulated engine.
	// Vajra closes it on Stop.
	Engine engine.Engine
	// ActorSystem, when set, hosts the session actors (embedding).
	ActorSystem *actor.ActorSystem
	// Logger for everything; nil logs nothing.
	Logger *zap.Logger
}

// DefaultModelName is the served model name when none is configured.
const DefaultModelName = "vajra-sim"

// DefaultConfig returns the defaults of `vajra serve`.
func DefaultConfig() Config {
	return Config{
		Host:             "127.0.0.1",
		Port:             8000,
		ServedModelNames: []string{DefaultModelName},
		Sim:              sim.DefaultConfig(),
	}
}

// Server is a Vajra server: network layer, session actors and engine.
type Server struct {
	cfg      Config
	log      *zap.Logger
	eng      engine.Engine
	sessions *actors.Sessions
	net      *netio.Server
}

// New builds a server from cfg; nothing listens until Start.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if len(cfg.ServedModelNames) == 0 {
		cfg.ServedModelNames = []string{DefaultModelName}
	}
	eng := cfg.Engine
	if eng == nil {
		sc := cfg.Sim
		sc.Logger = cfg.Logger.Named("sim")
		e, err := sim.New(sc)
		if err != nil {
			return nil, fmt.Errorf("vajra: engine: %w", err)
		}
		eng = e
	}
	sessions, err := actors.NewSessions(actors.Config{
		Engine: eng,
		Models: cfg.ServedModelNames,
		System: cfg.ActorSystem,
		Logger: cfg.Logger.Named("session"),
	})
	if err != nil {
		_ = eng.Close()
		return nil, err
	}
	n, err := netio.New(netio.Options{
		Addr:        net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)),
		Loops:       cfg.Loops,
		APIKeys:     cfg.APIKeys,
		Models:      cfg.ServedModelNames,
		MaxModelLen: maxModelLen(cfg, eng),
		Sessions:    sessions,
		Engine:      eng,
		Logger:      cfg.Logger.Named("net"),
	})
	if err != nil {
		sessions.Close()
		_ = eng.Close()
		return nil, err
	}
	return &Server{cfg: cfg, log: cfg.Logger, eng: eng, sessions: sessions, net: n}, nil
}

func maxModelLen(cfg Config, eng engine.Engine) int {
	if m, ok := eng.(interface{ MaxModelLen() int }); ok {
		return m.MaxModelLen()
	}
	return cfg.Sim.MaxModelLen
}

// Start binds the listener and serves in the background.
func (s *Server) Start() error {
	if err := s.net.Start(); err != nil {
		return fmt.Errorf("vajra: listen: %w", err)
	}
	s.log.Info("serving", zap.Stringer("addr", s.net.Addr()), zap.Strings("models", s.cfg.ServedModelNames))
	return nil
}

// Addr is the bound address (after Start).
func (s *Server) Addr() net.Addr { return s.net.Addr() }

// Engine returns the engine the server drives.
func (s *Server) Engine() engine.Engine { return s.eng }

// Stop closes the listener and every connection (aborting their sessions),
// waits for the sessions to end, and closes the engine.
func (s *Server) Stop(ctx context.Context) error {
	errNet := s.net.Stop(ctx)
	errWait := s.sessions.Wait(ctx)
	errEng := s.eng.Close()
	s.sessions.Close()
	s.net.Release()
	return errors.Join(errNet, errWait, errEng)
}
