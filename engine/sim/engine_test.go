package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine"
)

func TestStreamText(t *testing.T) {
	e := newEngine(t, nil)
	req := chatReq("Tell me about the river.", 40)
	req.Sampling.IgnoreEOS = true
	res, f, _ := run(t, e, req, true)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	c := res.Choices[0]
	if len(c.TokenIDs) != 40 || c.FinishReason != engine.FinishLength {
		t.Fatalf("got %d tokens, finish %q", len(c.TokenIDs), c.FinishReason)
	}
	if got := f.text(0, engine.DeltaText); got != c.Text {
		t.Fatalf("streamed %q, final %q", got, c.Text)
	}
	if e.Detokenize(c.TokenIDs) != c.Text {
		t.Fatalf("token ids do not detokenize to the text")
	}
	if f.starts != 1 || len(f.ends) != 1 || f.endRes != res || !f.deltas[0].first || f.deltas[1].first {
		t.Fatalf("frame structure: starts %d ends %d", f.starts, len(f.ends))
	}
	want := len(e.Tokenize(RenderChatML(req.Messages, nil)))
	if res.Usage.PromptTokens != want || res.Usage.CompletionTokens != 40 {
		t.Fatalf("usage %+v, want prompt %d", res.Usage, want)
	}
	t.Logf("%q", c.Text)
}

func TestNaturalEnd(t *testing.T) {
	e := newEngine(t, nil)
	res, _, _ := run(t, e, chatReq("Hello there.", 0), false)
	c := res.Choices[0]
	if c.FinishReason != engine.FinishStop || !strings.HasSuffix(c.Text, ".") && !strings.HasSuffix(c.Text, "?") && !strings.HasSuffix(c.Text, "!") {
		t.Fatalf("finish %q text %q", c.FinishReason, c.Text)
	}
}

func TestEchoMode(t *testing.T) {
	e := newEngine(t, func(c *Config) { c.Mode = ModeEcho })
	res, _, _ := run(t, e, chatReq("Repeat after me: héllo wörld!", 100), true)
	if got := res.Choices[0].Text; got != "Repeat after me: héllo wörld!" || res.Choices[0].FinishReason != engine.FinishStop {
		t.Fatalf("echo %q %q", got, res.Choices[0].FinishReason)
	}
	req := chatReq("ab", 5)
	req.Sampling.IgnoreEOS = true
	res, _, _ = run(t, e, req, false)
	if got := res.Choices[0].Text; got != "ababababab" && len(res.Choices[0].TokenIDs) != 5 {
		t.Fatalf("echo loop %q", got)
	}
}

func TestContextLength(t *testing.T) {
	e := newEngine(t, func(c *Config) { c.MaxModelLen = 100; c.KVCacheTokens = 1024 })
	req := chatReq("hello", 95)
	err := e.Prepare(req)
	if !errors.Is(err, engine.ErrContextLength) {
		t.Fatalf("err %v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "100") || !strings.Contains(msg, "95") {
		t.Fatalf("message %q", msg)
	}
	if err := e.Prepare(chatReq("hello", 0)); err != nil {
		t.Fatal(err)
	}
	if req := chatReq("hello", 0); e.Prepare(req) == nil && req.Prepared.(*prepared).maxTokens != 100-len(req.PromptTokens) {
		t.Fatal("max_tokens 0 should mean the rest of the context")
	}
}
