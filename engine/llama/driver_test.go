package llama_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama"
)

// TestDriverRegistered: importing engine/llama registers the "llama"
// driver, which refuses a configuration of another type and a Config
// without a model, before it loads any library.
func TestDriverRegistered(t *testing.T) {
	if !slices.Contains(engine.Drivers(), llama.DriverName) {
		t.Fatalf("drivers %v lack %q", engine.Drivers(), llama.DriverName)
	}
	if _, err := engine.Open(llama.DriverName, engine.Config{}, "model.gguf", nil); !errors.Is(err, engine.ErrDriverConfig) {
		t.Fatalf("a string config: err = %v", err)
	}
	if _, err := engine.Open(llama.DriverName, engine.Config{}, &llama.Config{}, nil); err == nil || err.Error() != "llama: no model file" {
		t.Fatalf("no model: err = %v", err)
	}
	// The shared settings are read from one place: a llama.Config that
	// sets them itself is refused, not merged.
	own := llama.Config{ModelPath: "model.gguf", Config: engine.Config{MaxModelLen: 512}}
	if _, err := engine.Open(llama.DriverName, engine.Config{}, own, nil); !errors.Is(err, engine.ErrDriverConfig) {
		t.Fatalf("shared settings in llama.Config: err = %v", err)
	}
}
