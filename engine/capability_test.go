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

func TestCheckRank(t *testing.T) {
	pin := func(r int) *Request { return &Request{VLLM: &VLLMExtensions{PinRank: true, DataParallelRank: r}} }
	for _, c := range []struct {
		req   *Request
		ranks int
		want  string // "" when accepted
	}{
		{&Request{}, 1, ""},
		{&Request{VLLM: &VLLMExtensions{Priority: 1}}, 1, ""}, // extensions, no pin: rank 0 is not implied
		{pin(0), 1, ""},
		{pin(1), 1, "data_parallel_rank 1 is out of range [0, 1)."},
		{pin(3), 4, ""},
		{pin(4), 4, "data_parallel_rank 4 is out of range [0, 4)."},
		{pin(7), 0, ""}, // ranks unknown
		{pin(-1), 0, "data_parallel_rank -1 is out of range: ranks are not negative."},
		{pin(-1), 2, "data_parallel_rank -1 is out of range [0, 2)."},
	} {
		err := CheckRank(c.req, c.ranks)
		if c.want == "" {
			if err != nil {
				t.Errorf("%+v of %d: %v", c.req.VLLM, c.ranks, err)
			}
			continue
		}
		e, ok := err.(*Error)
		if !ok || e.Kind != KindInvalid || e.Param != "X-data-parallel-rank" || e.Message != c.want {
			t.Errorf("%+v of %d: %v, want %q", c.req.VLLM, c.ranks, err, c.want)
		}
	}
}
