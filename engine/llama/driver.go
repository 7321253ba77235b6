package llama

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/vajra-go/vajra/engine"
)

// DriverName is the name this package registers its engine under
// (engine.Register): a program that imports engine/llama serves a GGUF
// model with vajra.Config{Driver: llama.DriverName, DriverConfig:
// llama.Config{ModelPath: ...}}.
const DriverName = "llama"

func init() { engine.Register(DriverName, driver{}) }

// driver opens the llama.cpp engine from a Config or a *Config, whose
// embedded engine.Config must be zero: the shared settings come from
// Open's shared alone (vajra.Config.EngineConfig), so that they are set
// in one place.
type driver struct{}

func (driver) Open(shared engine.Config, own any, log *zap.Logger) (engine.Engine, error) {
	var cfg Config
	switch c := own.(type) {
	case Config:
		cfg = c
	case *Config:
		if c != nil {
			cfg = *c
		}
	case nil:
	default:
		return nil, fmt.Errorf("%w: %s takes a llama.Config, not a %T", engine.ErrDriverConfig, DriverName, own)
	}
	if cfg.Config != (engine.Config{}) {
		return nil, fmt.Errorf("%w: %s: the settings every engine shares (%+v) are set in engine.Config (vajra.Config.EngineConfig), not in llama.Config",
			engine.ErrDriverConfig, DriverName, cfg.Config)
	}
	cfg.Config = shared
	cfg.Logger = log
	return New(cfg)
}
