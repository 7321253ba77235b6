package llama

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
	"github.com/vajra-go/vajra/internal/eventually"
)

func TestGreedyStreamEqualsNonStream(t *testing.T) {
	e := newTestEngine(t, Config{}, tinymodel.Config{})
	req := chatReq("Tell me about the sea.", 40)
	req.Sampling.IgnoreEOS = true
	res, _ := run(t, e, req)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	c := res.Choices[0]
	if c.FinishReason != engine.FinishLength || len(c.TokenIDs) != 40 || res.Usage.CompletionTokens != 40 {
		t.Fatalf("finish %s, %d tokens, usage %+v; want length after 40", c.FinishReason, len(c.TokenIDs), res.Usage)
	}
	if res.Usage.PromptTokens != len(req.PromptTokens) || res.Usage.PromptTokens < 5 {
		t.Fatalf("prompt tokens %d, request had %d", res.Usage.PromptTokens, len(req.PromptTokens))
	}
	validUTF8(t, "text", c.Text)

	sreq := chatReq("Tell me about the sea.", 40)
	sreq.Sampling.IgnoreEOS = true
	sreq.Stream = true
	sres, rec := run(t, e, sreq)
	if sres.Err != nil {
		t.Fatal(sres.Err)
	}
	if got := rec.text(0, engine.DeltaText); got != c.Text {
		t.Fatalf("streamed text %q\nnon-streamed   %q", got, c.Text)
	}
	if sres.Choices[0].Text != c.Text {
		t.Fatalf("stream's result text %q, want %q", sres.Choices[0].Text, c.Text)
	}
	if rec.starts != 1 || len(rec.ends) != 1 || rec.ends[0].FinishReason != engine.FinishLength {
		t.Fatalf("starts %d, ends %+v", rec.starts, rec.ends)
	}
	var ids []int
	for _, d := range rec.deltas {
		ids = append(ids, d.ids...)
		validUTF8(t, "delta", d.text)
	}
	if len(ids) != 40 {
		t.Fatalf("deltas carried %d token ids, want 40", len(ids))
	}
}

func TestPrefixCacheReportsCachedTokens(t *testing.T) {
	e := newTestEngine(t, Config{PrefixCaching: true}, tinymodel.Config{})
	long := "The sea is calm tonight. The tide is full, the moon lies fair upon the straits. "
	first, _ := run(t, e, chatReq(long, 4))
	if first.Usage.CachedTokens != 0 {
		t.Fatalf("first request cached %d tokens", first.Usage.CachedTokens)
	}
	second, _ := run(t, e, chatReq(long, 4))
	if second.Usage.CachedTokens == 0 || second.Usage.CachedTokens >= second.Usage.PromptTokens {
		t.Fatalf("repeat cached %d of %d prompt tokens; want most but not all", second.Usage.CachedTokens, second.Usage.PromptTokens)
	}
	st := e.Stats()
	if st.PrefixHits == 0 || st.PrefixQueries < st.PrefixHits {
		t.Fatalf("stats %+v", st)
	}
}

func TestAbortFreesTheSlot(t *testing.T) {
	e := newTestEngine(t, Config{Config: engine.Config{MaxNumSeqs: 4}}, tinymodel.Config{})
	req := chatReq("Go on forever.", 0)
	req.Sampling.IgnoreEOS = true
	req.Stream = true
	r := newRecorder()
	req.Formatter = r
	if err := e.Prepare(req); err != nil {
		t.Fatal(err)
	}
	sess, err := e.Start(req, r)
	if err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "5 tokens generated", func() bool { return e.Stats().GenerationTokens >= 5 })
	if e.Stats().Running != 1 {
		t.Fatalf("running %d, want 1", e.Stats().Running)
	}
	t0 := time.Now()
	sess.Abort()
	<-r.done
	if r.res.Err == nil || r.res.Err.Kind != engine.KindAborted {
		t.Fatalf("result error %v, want aborted", r.res.Err)
	}
	if got := e.Stats().Running; got != 0 {
		t.Fatalf("running %d after abort, want 0", got)
	}
	t.Logf("abort to final result: %v", time.Since(t0))
}

// TestStreamInterval: with an interval of 4 the same text arrives in about
// a quarter of the deltas, each carrying its tokens.
func TestStreamInterval(t *testing.T) {
	e := newTestEngine(t, Config{}, tinymodel.Config{})
	mk := func(interval int) *engine.Request {
		r := chatReq("Tell me about the sea.", 32)
		r.Sampling.IgnoreEOS, r.Stream, r.StreamInterval = true, true, interval
		return r
	}
	_, one := run(t, e, mk(1))
	_, four := run(t, e, mk(4))
	if a, b := one.text(0, engine.DeltaText), four.text(0, engine.DeltaText); a != b {
		t.Fatalf("interval 4 text %q, interval 1 %q", b, a)
	}
	ids := 0
	for _, d := range four.deltas {
		ids += len(d.ids)
	}
	if ids != 32 || len(four.deltas) > 9 || len(one.deltas) < 24 {
		t.Fatalf("interval 4: %d deltas carrying %d ids; interval 1: %d deltas", len(four.deltas), ids, len(one.deltas))
	}
}

// TestChatTemplateOverride: --chat-template, as text or a file, replaces
// the model's own template.
func TestChatTemplateOverride(t *testing.T) {
	const tmpl = "{% for m in messages %}<|im_start|>{{ m.role }}: {{ m.content }}<|im_end|>{% endfor %}{% if add_generation_prompt %}<|im_start|>bot:{% endif %}"
	file := filepath.Join(t.TempDir(), "t.jinja")
	if err := os.WriteFile(file, []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	own := newTestEngine(t, Config{}, tinymodel.Config{})
	for _, src := range []string{tmpl, file} {
		e := newTestEngine(t, Config{Config: engine.Config{ChatTemplate: src}}, tinymodel.Config{})
		req := chatReq("Hi there", 1)
		if err := e.Prepare(req); err != nil {
			t.Fatal(err)
		}
		want := tinymodel.DefaultVocab().Encode("<|im_start|>user: Hi there<|im_end|><|im_start|>bot:", true)
		if got := fmt.Sprint(req.PromptTokens); got != fmt.Sprint(want) {
			t.Fatalf("template %q: prompt %v, want %v", src[:min(len(src), 20)], got, want)
		}
		ownReq := chatReq("Hi there", 1)
		if err := own.Prepare(ownReq); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(ownReq.PromptTokens) == fmt.Sprint(want) {
			t.Fatal("the model's own template renders the same prompt: the test proves nothing")
		}
	}
	if _, err := New(Config{Config: engine.Config{ChatTemplate: "{% if %}"}, ModelPath: "x.gguf"}); err == nil {
		t.Fatal("a missing model and a broken template started")
	}
}

// TestChatTemplateKwargs: chat_template_kwargs reach the template, and
// enable_thinking false turns the reasoning parser off (vLLM's behaviour).
func TestChatTemplateKwargs(t *testing.T) {
	const tmpl = "{% for m in messages %}{{ m.content }}{% endfor %}{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}{{ greeting | default('') }}"
	e := newTestEngine(t, Config{Config: engine.Config{ChatTemplate: tmpl, ReasoningParser: "qwen3"}}, tinymodel.Config{})
	req := chatReq("Hi", 8)
	req.ChatTemplateKwargs = []byte(`{"enable_thinking": false, "greeting": "Ahoy"}`)
	req.Sampling.IgnoreEOS = true
	res, _ := run(t, e, req)
	want := tinymodel.DefaultVocab().Encode("Hi<think>\n\n</think>\n\nAhoy", true)
	if fmt.Sprint(res.PromptTokens) != fmt.Sprint(want) {
		t.Fatalf("prompt %v, want %v", res.PromptTokens, want)
	}
	if c := res.Choices[0]; c.Reasoning != "" || c.Text == "" {
		t.Fatalf("thinking off: reasoning %q, text %q", c.Reasoning, c.Text)
	}
	// Without the kwarg the qwen3 parser reads the output as reasoning.
	res, _ = run(t, e, func() *engine.Request { r := chatReq("Hi", 8); r.Sampling.IgnoreEOS = true; return r }())
	if res.Choices[0].Reasoning == "" {
		t.Fatalf("thinking on: no reasoning in %+v", res.Choices[0])
	}
	bad := chatReq("Hi", 1)
	bad.ChatTemplateKwargs = []byte(`[1]`)
	if err := e.Prepare(bad); err == nil {
		t.Fatal("chat_template_kwargs [1] accepted")
	}
}
