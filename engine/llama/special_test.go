package llama

import (
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
	"github.com/vajra-go/vajra/engine/text"
)

// TestControlTokens: a control token renders as nothing unless
// skip_special_tokens=false or it is a marker of a parser that runs for
// the request; user-defined tokens (<think> here) are text.
func TestControlTokens(t *testing.T) {
	e := newTestEngine(t, Config{Config: engine.Config{ToolCallParser: "mistral"}}, tinymodel.Config{})
	im := int32(tinymodel.TokenIMStart)
	if e.kind[im] != text.TokenSpecial || e.kind[tinymodel.TokenThink] != text.TokenText {
		t.Fatalf("kinds: <|im_start|> %d, <think> %d", e.kind[im], e.kind[tinymodel.TokenThink])
	}
	tools := &text.Options{Tools: "mistral"}
	// outPiece is the text a choice's parser gets for t (as pipeline.Out
	// asks the engine's vocabulary for it).
	outPiece := func(t int32, opt *text.Options, keep bool) []byte {
		v := vocab{e}
		return v.AppendText(nil, t, text.KeepToken(v.TokenKind(t), opt, keep))
	}
	if got := outPiece(im, tools, false); len(got) != 0 {
		t.Fatalf("skipped control token: %q", got)
	}
	if got := string(outPiece(im, tools, true)); got != "<|im_start|>" {
		t.Fatalf("kept control token: %q", got)
	}
	// As a tool parser's marker it reaches the parser when tools are on.
	e.kind[im] = text.TokenToolMarker
	if got := string(outPiece(im, tools, false)); got != "<|im_start|>" {
		t.Fatalf("marker with tools: %q", got)
	}
	if got := outPiece(im, &text.Options{Tools: "mistral", ToolsOff: true}, false); len(got) != 0 {
		t.Fatalf("marker without tools: %q", got)
	}
	e.kind[im] = text.TokenSpecial

	// Generated: forced by logit_bias, three <|im_start|> tokens.
	gen := func(keep bool) string {
		req := &engine.Request{Prompt: "The sea is", Stream: true, Sampling: engine.Sampling{MaxTokens: 3,
			LogitBias: []engine.TokenBias{{TokenID: int(im), Bias: 100}}, KeepSpecialTokens: keep}}
		res, rec := run(t, e, req)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		if s := rec.text(0, engine.DeltaText); s != res.Choices[0].Text {
			t.Fatalf("streamed %q, result %q", s, res.Choices[0].Text)
		}
		return res.Choices[0].Text
	}
	if got := gen(false); got != "" {
		t.Fatalf("skip_special_tokens: %q", got)
	}
	if got := gen(true); got != strings.Repeat("<|im_start|>", 3) {
		t.Fatalf("skip_special_tokens=false: %q", got)
	}
}
