package engine

import (
	"errors"
	"fmt"
)

// Config holds the settings every engine shares: set once (in the root
// package, vajra.Config.EngineConfig) and read by whichever engine runs,
// the simulated one (engine/sim), llama.cpp in process (engine/llama,
// through its driver) or remote workers (engine/remote). Each engine's
// own configuration embeds it and keeps only the knobs of that engine
// (sim's timing, llama.cpp's threads and cache types, the workers'
// URLs). The zero value of each field means the running engine's
// default, which its package documents.
//
// A setting the running engine cannot honour is refused when the engine
// is built (an error naming it, ErrUnsupportedSetting), never ignored.
type Config struct {
	// MaxModelLen is the context length in tokens, prompt plus output
	// (vLLM's --max-model-len). 0: the engine's default (sim 8192;
	// llama: the model's training context, capped at 8192; remote: the
	// workers'). On remote workers it caps their context length.
	MaxModelLen int
	// MaxNumSeqs caps the sequences running at once (--max-num-seqs);
	// each choice of a request is one. 0: the engine's default. Remote
	// workers schedule their own: the setting is theirs, refused here.
	MaxNumSeqs int
	// KVCacheTokens is the KV cache capacity in tokens
	// (--kv-cache-tokens). 0: the engine's default. Refused with remote
	// workers (their cache is theirs).
	KVCacheTokens int
	// Seed is mixed into the seed of every request that samples without
	// one of its own (--seed), so that two engines with different seeds
	// answer the same request differently. Refused with remote workers
	// (a worker's seed is its own flag).
	Seed int64
	// ChatTemplate overrides the model's Jinja chat template
	// (--chat-template: a file name or the template text). Refused by the
	// simulated engine, which has no model template.
	ChatTemplate string
	// ReasoningParser and ToolCallParser name engine/text's parsers
	// (--reasoning-parser, --tool-call-parser; vLLM's names); empty:
	// none. Refused by the simulated engine.
	ReasoningParser string
	ToolCallParser  string // see ReasoningParser
	// StreamInterval coalesces up to this many tokens into one streamed
	// frame (vLLM's --stream-interval); 0 or 1 sends one frame per token.
	// The server sets it on every Request (Request.StreamInterval).
	StreamInterval int
}

// HasParsers reports whether c sets an output parser (ReasoningParser or
// ToolCallParser): an engine built with it parses its model's output
// (OutputParser).
func (c *Config) HasParsers() bool { return c.ReasoningParser != "" || c.ToolCallParser != "" }

// ErrUnsupportedSetting is the error of an engine built with a Config
// setting it cannot honour (errors.Is).
var ErrUnsupportedSetting = errors.New("engine: setting not supported by this engine")

// Check returns an error for a negative size. Engines call it before
// filling their defaults.
func (c *Config) Check() error {
	switch {
	case c.MaxModelLen < 0:
		return fmt.Errorf("engine: --max-model-len must not be negative, got %d", c.MaxModelLen)
	case c.MaxNumSeqs < 0:
		return fmt.Errorf("engine: --max-num-seqs must not be negative, got %d", c.MaxNumSeqs)
	case c.KVCacheTokens < 0:
		return fmt.Errorf("engine: --kv-cache-tokens must not be negative, got %d", c.KVCacheTokens)
	case c.StreamInterval < 0:
		return fmt.Errorf("engine: --stream-interval must not be negative, got %d", c.StreamInterval)
	}
	return nil
}

// Unsupported returns an ErrUnsupportedSetting error naming the first of
// names (flag names: "max-num-seqs", "kv-cache-tokens", "seed",
// "chat-template", "reasoning-parser", "tool-call-parser") that c sets,
// nil when c sets none of them. engine names the engine in the message,
// why says what to do instead.
func (c *Config) Unsupported(engine, why string, names ...string) error {
	for _, n := range names {
		var set bool
		switch n {
		case "max-model-len":
			set = c.MaxModelLen != 0
		case "max-num-seqs":
			set = c.MaxNumSeqs != 0
		case "kv-cache-tokens":
			set = c.KVCacheTokens != 0
		case "seed":
			set = c.Seed != 0
		case "chat-template":
			set = c.ChatTemplate != ""
		case "reasoning-parser":
			set = c.ReasoningParser != ""
		case "tool-call-parser":
			set = c.ToolCallParser != ""
		default:
			panic("engine: Config.Unsupported: unknown setting " + n)
		}
		if set {
			return fmt.Errorf("%w: %s does not take --%s (%s)", ErrUnsupportedSetting, engine, n, why)
		}
	}
	return nil
}
