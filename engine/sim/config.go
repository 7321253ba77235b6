package sim

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/vajra-go/vajra/engine"
)

// Defaults of Config, used by DefaultConfig and by New for fields left zero
// where zero has no meaning of its own.
const (
	// DefaultMaxNumSeqs is vLLM's default --max-num-seqs.
	DefaultMaxNumSeqs = 256
	// DefaultMaxModelLen is the context length, in tokens.
	DefaultMaxModelLen = 8192
	// DefaultMaxWaiting bounds the waiting queue; Start fails with
	// KindOverloaded beyond it.
	DefaultMaxWaiting = 4096
	// DefaultITL is the inter-token latency of one decode step, about what
	// a mid-size model shows on one GPU at moderate batch size.
	DefaultITL = 20 * time.Millisecond
	// DefaultPrefillTPS is the prefill throughput, prompt tokens per second.
	DefaultPrefillTPS = 20000
	// DefaultKVCacheTokens is the KV cache capacity: 1Mi tokens, i.e. 65,536
	// blocks of BlockSize tokens.
	DefaultKVCacheTokens = 1 << 20
	// MaxN caps Sampling.N: each choice is a sequence of its own.
	MaxN = 128
	// MaxStopStrings caps the stop strings of one request (OpenAI allows 4;
	// vLLM does not cap; we allow a few more than OpenAI).
	MaxStopStrings = 16
)

// Modes of Config.Mode.
const (
	ModeText = "text" // pseudo-text from the built-in corpus
	ModeEcho = "echo" // repeats the last user message
)

// Config configures the simulated engine. The zero value of a duration or
// rate means "none" (as fast as possible); the zero value of a size means
// its default.
type Config struct {
	// Config is what every engine shares. Here MaxNumSeqs caps the
	// sequences running at once, each choice of a request one (default
	// DefaultMaxNumSeqs); MaxModelLen is the context length (default
	// DefaultMaxModelLen); KVCacheTokens is the KV cache capacity, rounded
	// down to whole blocks of BlockSize, and must hold one context of
	// MaxModelLen (default DefaultKVCacheTokens); Seed is mixed into every
	// request's seed. The simulated engine has no model template and no
	// parsers: ChatTemplate, ReasoningParser and ToolCallParser are
	// refused (engine.ErrUnsupportedSetting).
	engine.Config
	// MaxWaiting bounds the queue of admitted-but-not-running requests.
	// Default DefaultMaxWaiting.
	MaxWaiting int
	// ITL is the time of one decode step (--sim-itl); 0 runs steps back to
	// back, as fast as the CPU allows.
	ITL time.Duration
	// PrefillTPS is the prefill throughput (--sim-prefill-tps), shared by
	// all prefills (one prefill lane); 0 makes prefill instant.
	PrefillTPS float64
	// TTFT is a floor for time to first token from arrival (--sim-ttft);
	// 0 means none.
	TTFT time.Duration
	// LoadFactor slows decode steps as the batch grows (--sim-load-factor):
	// a step takes ITL * (1 + LoadFactor*running/MaxNumSeqs).
	LoadFactor float64
	// Mode is ModeText (default) or ModeEcho (--sim-mode).
	Mode string
	// Logger gets start and stop lines only, never per-token logs; nil means
	// no logs.
	Logger *zap.Logger

	// now is the clock, injectable by tests; nil means time.Now.
	now func() time.Time
}

// DefaultConfig returns the defaults of vajra serve: the simulator's own
// knobs; the shared engine.Config stays zero (each of its zero sizes
// takes this package's default in New).
func DefaultConfig() Config {
	return Config{
		MaxWaiting: DefaultMaxWaiting,
		ITL:        DefaultITL,
		PrefillTPS: DefaultPrefillTPS,
		Mode:       ModeText,
	}
}

// normalize fills defaults into zero sizes and checks the rest.
func (c *Config) normalize() error {
	if err := c.Config.Check(); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	if err := c.Config.Unsupported("the simulated engine", "it has no model template and no output parsers; serve a model (--model) or workers (--worker)",
		"chat-template", "reasoning-parser", "tool-call-parser"); err != nil {
		return err
	}
	if c.MaxNumSeqs == 0 {
		c.MaxNumSeqs = DefaultMaxNumSeqs
	}
	if c.MaxModelLen == 0 {
		c.MaxModelLen = DefaultMaxModelLen
	}
	if c.MaxWaiting == 0 {
		c.MaxWaiting = DefaultMaxWaiting
	}
	if c.KVCacheTokens == 0 {
		c.KVCacheTokens = DefaultKVCacheTokens
	}
	if c.Mode == "" {
		c.Mode = ModeText
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.now == nil {
		c.now = time.Now
	}
	switch {
	case c.MaxNumSeqs < 0:
		return fmt.Errorf("sim: --max-num-seqs must be positive, got %d", c.MaxNumSeqs)
	case c.MaxModelLen < 0:
		return fmt.Errorf("sim: --max-model-len must be positive, got %d", c.MaxModelLen)
	case c.MaxWaiting < 0:
		return fmt.Errorf("sim: max waiting must be positive, got %d", c.MaxWaiting)
	case c.ITL < 0:
		return fmt.Errorf("sim: --sim-itl must not be negative, got %s", c.ITL)
	case c.TTFT < 0:
		return fmt.Errorf("sim: --sim-ttft must not be negative, got %s", c.TTFT)
	case c.PrefillTPS < 0:
		return fmt.Errorf("sim: --sim-prefill-tps must not be negative, got %g", c.PrefillTPS)
	case c.LoadFactor < 0:
		return fmt.Errorf("sim: --sim-load-factor must not be negative, got %g", c.LoadFactor)
	case c.Mode != ModeText && c.Mode != ModeEcho:
		return fmt.Errorf("sim: --sim-mode must be %q or %q, got %q", ModeText, ModeEcho, c.Mode)
	case c.KVCacheTokens/BlockSize < (c.MaxModelLen+BlockSize-1)/BlockSize:
		return fmt.Errorf("sim: --kv-cache-tokens (%d) must hold one full context of --max-model-len (%d) tokens",
			c.KVCacheTokens, c.MaxModelLen)
	}
	return nil
}
