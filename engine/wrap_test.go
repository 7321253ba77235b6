package engine_test

import (
	"testing"

	"github.com/vajra-go/vajra/engine"
)

// base is an engine that parses its output and lacks priorities.
type base struct{ engine.Engine }

func (*base) ParsesOutput() bool       { return true }
func (*base) Lacks() engine.Capability { return engine.CapPriority }
func (*base) MaxModelLen() int         { return 300 }

// hiding embeds the Engine interface, which hides what the engine it
// wraps implements beyond it, and unwraps to it.
type hiding struct{ engine.Engine }

func (h hiding) Unwrap() engine.Engine { return h.Engine }

// opaque embeds it and does not unwrap.
type opaque struct{ engine.Engine }

// overriding wraps and says otherwise itself.
type overriding struct{ engine.Engine }

func (o overriding) Unwrap() engine.Engine { return o.Engine }
func (overriding) ParsesOutput() bool      { return false }

func TestAsThroughWrappers(t *testing.T) {
	b := &base{}
	twice := hiding{hiding{b}}
	if !engine.ParsesOutput(twice) || engine.Lacks(twice) != engine.CapPriority {
		t.Fatalf("through two wrappers: parses %v, lacks %v", engine.ParsesOutput(twice), engine.Lacks(twice))
	}
	if m, ok := engine.As[interface{ MaxModelLen() int }](twice); !ok || m.MaxModelLen() != 300 {
		t.Fatalf("MaxModelLen through two wrappers: %v", ok)
	}
	if got, ok := engine.As[*base](twice); !ok || got != b {
		t.Fatal("the concrete engine is not found through its wrappers")
	}
	// A wrapper that does not unwrap hides it, as before.
	if engine.ParsesOutput(opaque{b}) || engine.Lacks(opaque{b}) != 0 {
		t.Fatal("an engine that does not unwrap showed what it wraps")
	}
	// A wrapper's own implementation comes first.
	if engine.ParsesOutput(overriding{b}) {
		t.Fatal("the wrapper's own ParsesOutput was not asked first")
	}
	if engine.ParsesOutput(nil) || engine.ParsesOutput(hiding{nil}) {
		t.Fatal("a nil engine parses output")
	}
}
