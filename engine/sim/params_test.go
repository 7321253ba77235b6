package sim

import (
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine"
)

// TestMinTokensEcho: an echo answer ends with the echo; with min_tokens
// it repeats until at least that many tokens, and ends (stop) there.
func TestMinTokensEcho(t *testing.T) {
	e := newEngine(t, func(c *Config) { c.Mode = ModeEcho })
	res, _, _ := run(t, e, chatReq("hello there", 50), false)
	n := res.Usage.CompletionTokens
	if n == 0 || n >= 20 || res.Choices[0].FinishReason != engine.FinishStop {
		t.Fatalf("echo: %d tokens, finish %s", n, res.Choices[0].FinishReason)
	}
	for _, stream := range []bool{false, true} {
		req := chatReq("hello there", 50)
		req.Sampling.MinTokens = 20
		res, f, _ := run(t, e, req, stream)
		c := res.Choices[0]
		if res.Usage.CompletionTokens < 20 || res.Usage.CompletionTokens >= 20+n || c.FinishReason != engine.FinishStop {
			t.Fatalf("min_tokens 20: %d tokens, finish %s", res.Usage.CompletionTokens, c.FinishReason)
		}
		if !strings.HasPrefix(c.Text, "hello there") || len(c.Text) <= len("hello there") {
			t.Fatalf("min_tokens 20: text %q", c.Text)
		}
		if stream && f.text(0, engine.DeltaText) != c.Text {
			t.Fatalf("streamed %q, want %q", f.text(0, engine.DeltaText), c.Text)
		}
	}
}

// TestMinTokensStopAndInclude: a stop string ends the text at its first
// occurrence, kept with include_stop_str_in_output; with min_tokens only
// an occurrence completed after the first min_tokens tokens counts.
func TestMinTokensStopAndInclude(t *testing.T) {
	e := newEngine(t, nil)
	full := func() *engine.Result {
		req := chatReq("Tell me about the sea.", 80)
		req.Sampling.IgnoreEOS = true
		res, _, _ := run(t, e, req, false)
		return res
	}()
	text := full.Choices[0].Text
	// A word of the first half of the text as the stop string.
	words := strings.Fields(text[:len(text)/2])
	if len(words) < 4 {
		t.Fatalf("text %q", text)
	}
	stop := " " + words[2]
	at := strings.Index(text, stop)
	for _, include := range []bool{false, true} {
		for _, stream := range []bool{false, true} {
			req := chatReq("Tell me about the sea.", 80)
			req.Sampling.IgnoreEOS = true
			req.Sampling.Stop = []string{stop}
			req.Sampling.IncludeStopStr = include
			res, f, _ := run(t, e, req, stream)
			want := text[:at]
			if include {
				want = text[:at+len(stop)]
			}
			c := res.Choices[0]
			if c.Text != want || c.StopString != stop {
				t.Fatalf("include %v: text %q stop %q, want %q", include, c.Text, c.StopString, want)
			}
			if stream && f.text(0, engine.DeltaText) != want {
				t.Fatalf("include %v: streamed %q, want %q", include, f.text(0, engine.DeltaText), want)
			}
		}
	}
	req := chatReq("Tell me about the sea.", 80)
	req.Sampling.IgnoreEOS = true
	req.Sampling.Stop = []string{stop}
	req.Sampling.MinTokens = 40
	res, _, _ := run(t, e, req, false)
	c := res.Choices[0]
	if res.Usage.CompletionTokens < 40 || !strings.HasPrefix(text, c.Text) || len(c.Text) <= at {
		t.Fatalf("min_tokens 40: %d tokens, text %q (full %q)", res.Usage.CompletionTokens, c.Text, text)
	}
}

// TestMinTokensAboveContext: without max_tokens, min_tokens above the room
// the prompt leaves is a 400, as in vLLM once max_tokens is resolved.
func TestMinTokensAboveContext(t *testing.T) {
	e := newEngine(t, func(c *Config) { c.MaxModelLen = 256 })
	req := chatReq("hi", 0)
	req.Sampling.MinTokens = 250
	if err := e.Prepare(req); err == nil || err.(*engine.Error).Param != "min_tokens" {
		t.Fatalf("min_tokens above the context: %v", err)
	}
	req = chatReq("hi", 0)
	req.Sampling.MinTokens = 100
	if err := e.Prepare(req); err != nil {
		t.Fatal(err)
	}
}

// TestPrefillTemplate: add_generation_prompt false closes the last turn;
// continue_final_message leaves the final assistant turn open.
func TestPrefillTemplate(t *testing.T) {
	e := newEngine(t, nil)
	msgs := []engine.Message{{Role: "user", Content: "Count"}, {Role: "assistant", Content: "1, 2,"}}
	f := func(noGen, cont bool, want string) {
		t.Helper()
		req := &engine.Request{Messages: msgs, NoGenerationPrompt: noGen, ContinueFinalMessage: cont,
			Sampling: engine.Sampling{MaxTokens: 4}}
		if got := RenderChatMLRequest(req); got != want {
			t.Fatalf("rendered %q, want %q", got, want)
		}
		res, _, _ := run(t, e, req, false)
		if ids := e.vocab.encodePrompt(want, true); res.Usage.PromptTokens != len(ids) {
			t.Fatalf("prompt tokens %d, want %d", res.Usage.PromptTokens, len(ids))
		}
	}
	closed := "<|im_start|>user\nCount<|im_end|>\n<|im_start|>assistant\n1, 2,<|im_end|>\n"
	f(false, false, closed+"<|im_start|>assistant\n")
	f(true, false, closed)
	f(true, true, "<|im_start|>user\nCount<|im_end|>\n<|im_start|>assistant\n1, 2,")
	bad := &engine.Request{Messages: msgs, ContinueFinalMessage: true, Sampling: engine.Sampling{MaxTokens: 4}}
	if err := e.Prepare(bad); err == nil || err.(*engine.Error).Param != "continue_final_message" {
		t.Fatalf("both switches on: %v", err)
	}
}
