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

// TestNeedsEveryCapability: each request parameter that needs a
// capability is found, and refused by an engine that lacks it with that
// parameter named.
func TestNeedsEveryCapability(t *testing.T) {
	cases := []struct {
		req   Request
		c     Capability
		param string
	}{
		{Request{ResponseFormat: ResponseFormat{Type: FormatRegex}, VLLM: &VLLMExtensions{Pattern: "[0-9]+"}}, CapGrammar, "structured_outputs"},
		{Request{ResponseFormat: ResponseFormat{Type: FormatChoice}, VLLM: &VLLMExtensions{Choices: []string{"a"}}}, CapGrammar, "structured_outputs"},
		{Request{ResponseFormat: ResponseFormat{Type: FormatGrammar}, VLLM: &VLLMExtensions{Pattern: `root ::= "a"`}}, CapGrammar, "structured_outputs"},
		{Request{VLLM: &VLLMExtensions{BadWords: []string{"no"}}}, CapBadWords, "bad_words"},
		{Request{VLLM: &VLLMExtensions{AllowedTokenIDs: []int{1}}}, CapAllowedTokenIDs, "allowed_token_ids"},
		{Request{VLLM: &VLLMExtensions{Priority: -3}}, CapPriority, "priority"},
	}
	for _, c := range cases {
		if got := Needs(&c.req); got != c.c {
			t.Errorf("%s: needs %b, want %b", c.param, got, c.c)
		}
		var e *Error
		if err := CheckCapabilities(&c.req, c.c, "sim"); !errors.As(err, &e) || e.Param != c.param || !strings.HasPrefix(e.Message, "sim do") {
			t.Errorf("%s: refusal %v", c.param, err)
		}
		if err := CheckCapabilities(&c.req, ^c.c, "sim"); err != nil {
			t.Errorf("%s: refused by an engine that lacks everything else: %v", c.param, err)
		}
	}
	if Needs(&Request{ResponseFormat: ResponseFormat{Type: FormatJSONSchema}, VLLM: &VLLMExtensions{}}) != 0 {
		t.Error("a JSON schema needs a capability")
	}
}
