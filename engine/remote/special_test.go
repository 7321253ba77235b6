package remote

import (
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine"
)

// markTok is byteTok with Mistral's control tokens [TOOL_CALLS] and
// [ARGS] and one other control token.
type markTok struct{ byteTok }

const (
	tokToolCalls = 258
	tokArgs      = 259
	tokCtl       = 260
)

var markTexts = map[int32]string{tokToolCalls: "[TOOL_CALLS]", tokArgs: "[ARGS]", tokCtl: "<|ctl|>"}

func (markTok) AppendPiece(dst []byte, id int32) []byte {
	if s, ok := markTexts[id]; ok {
		return append(dst, s...)
	}
	return byteTok{}.AppendPiece(dst, id)
}
func (markTok) VocabSize() int { return 261 }

// deltaRec records the streamed deltas by kind.
type deltaRec struct {
	*recorder
	content strings.Builder
	args    []strings.Builder
	names   []string
	nargs   int
}

func (r *deltaRec) AppendDelta(dst []byte, d *engine.Delta) []byte {
	switch d.Kind {
	case engine.DeltaText:
		r.content.Write(d.Text)
	case engine.DeltaToolCallStart:
		r.names = append(r.names, d.ToolName)
		r.args = append(r.args, strings.Builder{})
	case engine.DeltaToolCallArgs:
		r.args[d.ToolCallIndex].Write(d.Text)
		r.nargs++
	}
	return append(dst, 'd')
}

// TestSpecialTokens: a control token that is the tool parser's marker
// reaches the parser (the Mistral call is found, its arguments streamed
// token by token), other control tokens are left out, and
// skip_special_tokens=false puts every one's text in the content.
func TestSpecialTokens(t *testing.T) {
	e, f := newFake(t, Config{Config: engine.Config{ToolCallParser: "mistral"}, Tokenizer: markTok{}}, false)
	out := append(append(append(append(append(ids("Hi"), tokCtl, tokToolCalls), ids("get")...), tokArgs), ids(`{"a": 12}`)...), tokEOS)
	run := func(tools, keep bool) (*deltaRec, engine.Choice) {
		t.Helper()
		return runTokens(t, e, f, tools, keep, out)
	}
	rec, ch := run(true, false)
	if ch.Text != "Hi" || len(ch.ToolCalls) != 1 || ch.ToolCalls[0].Name != "get" || ch.ToolCalls[0].Arguments != `{"a": 12}` ||
		ch.FinishReason != engine.FinishToolCalls {
		t.Fatalf("with tools: %+v", ch)
	}
	if rec.content.String() != "Hi" || len(rec.names) != 1 || rec.args[0].String() != `{"a": 12}` || rec.nargs < 5 {
		t.Fatalf("with tools, streamed: %q %q %d argument deltas", rec.content.String(), rec.names, rec.nargs)
	}
	if _, ch = run(false, false); ch.Text != `Higet{"a": 12}` || len(ch.ToolCalls) != 0 {
		t.Fatalf("no tools: %+v", ch)
	}
	if _, ch = run(false, true); ch.Text != `Hi<|ctl|>[TOOL_CALLS]get[ARGS]{"a": 12}` {
		t.Fatalf("skip_special_tokens=false: %+v", ch)
	}
}

// TestToolArgsTokenAllocs: inside a streamed tool call, each token of its
// arguments (detokenized, parsed, framed as an arguments delta) allocates
// nothing in steady state.
func TestToolArgsTokenAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	e, f := newFakeCtx(t, Config{Config: engine.Config{ToolCallParser: "mistral"}, Tokenizer: markTok{}}, false, 1<<24)
	ns := &nopStream{}
	req := chat("hi", 0)
	req.Formatter = ns
	req.Tools = []engine.Tool{{Name: "get", Parameters: []byte(`{"type":"object"}`)}}
	if err := e.Prepare(req); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(req, ns); err != nil {
		t.Fatal(err)
	}
	c := <-f.gens
	r := c.rx.(*request)
	r.Tokens(&Chunk{TokenIDs: append(append(append([]int32{tokToolCalls}, ids("get")...), tokArgs), ids(`{"q": "`)...)})
	ck := &Chunk{TokenIDs: []int32{'a'}}
	for range 20000 {
		r.Tokens(ck)
	}
	if n := testing.AllocsPerRun(5000, func() { r.Tokens(ck) }); n != 0 {
		t.Fatalf("%.3f allocations per arguments token", n)
	}
	if r.out.Done() || len(r.out.ToolCalls(0)) != 0 || r.out.Generated(0) < 25000 {
		t.Fatalf("done %v, calls %v, %d tokens", r.out.Done(), r.out.ToolCalls(0), r.out.Generated(0))
	}
}

// runTokens runs one streamed chat request on e whose worker f answers
// out, one token per chunk; tools offers one tool, keep is
// skip_special_tokens=false.
func runTokens(t *testing.T, e *Engine, f *fakeClient, tools, keep bool, out []int32) (*deltaRec, engine.Choice) {
	t.Helper()
	req := chat("hi", 200)
	if tools {
		req.Tools = []engine.Tool{{Name: "get", Parameters: []byte(`{"type":"object"}`)}}
	}
	req.Sampling.KeepSpecialTokens = keep
	rec := &deltaRec{recorder: newRecorder()}
	req.Formatter = rec
	if err := e.Prepare(req); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(req, rec); err != nil {
		t.Fatal(err)
	}
	c := <-f.gens
	for _, id := range out {
		c.tokens(0, id)
	}
	c.end(&End{})
	return rec, rec.wait(t).Choices[0]
}
