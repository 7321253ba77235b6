package engine

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckCapabilities: a request that needs a capability the engine
// lacks is refused as invalid, naming it; anything else passes.
func TestCheckCapabilities(t *testing.T) {
	echo := &Request{PromptLogprobs: 1}
	err := CheckCapabilities(echo, CapPromptLogprobs, "this engine's workers")
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindInvalid || e.Param != "logprobs" ||
		!strings.Contains(e.Message, "this engine's workers do not return prompt logprobs") {
		t.Fatalf("refusal %v", err)
	}
	if err := CheckCapabilities(echo, 0, "x"); err != nil {
		t.Fatalf("an engine that lacks nothing refused: %v", err)
	}
	if err := CheckCapabilities(&Request{}, CapPromptLogprobs, "x"); err != nil {
		t.Fatalf("a request that needs nothing refused: %v", err)
	}
	if Lacks(nil) != 0 {
		t.Fatal("an engine that declares nothing lacks something")
	}
}
