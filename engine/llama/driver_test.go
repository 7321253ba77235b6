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
	if _, err := engine.Open(llama.DriverName, "model.gguf", nil); !errors.Is(err, engine.ErrDriverConfig) {
		t.Fatalf("a string config: err = %v", err)
	}
	if _, err := engine.Open(llama.DriverName, &llama.Config{}, nil); err == nil || err.Error() != "llama: no model file" {
		t.Fatalf("no model: err = %v", err)
	}
}
