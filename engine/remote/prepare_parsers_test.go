package remote

import (
	"testing"

	"github.com/vajra-go/vajra/engine"
)

// An engine with an output parser says so (engine.OutputParser), so that
// include_reasoning false hides the generated tokens' ids and logprobs;
// without one it shows them, as vLLM does.
func TestParsesOutput(t *testing.T) {
	for _, c := range []struct {
		cfg  engine.Config
		want bool
	}{{engine.Config{}, false}, {engine.Config{ReasoningParser: "qwen3"}, true}, {engine.Config{ToolCallParser: "hermes"}, true}} {
		e, _ := newFake(t, Config{Config: c.cfg}, false)
		if got := engine.ParsesOutput(e); got != c.want {
			t.Errorf("%+v: ParsesOutput %v, want %v", c.cfg, got, c.want)
		}
	}
}
