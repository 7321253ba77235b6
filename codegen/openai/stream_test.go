package openai

import (
	"bytes"
	"flag"
	"io"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"testing"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// step is one Formatter call of a scripted stream.
type step struct {
	start *engine.Start
	delta *engine.Delta
	end   *engine.ChoiceEnd
	res   *engine.Result
	err   *engine.Error
}

// drive runs the script through f and returns the bytes written.
func drive(f engine.Formatter, steps []step) []byte {
	var dst []byte
	for _, s := range steps {
		switch {
		case s.start != nil:
			dst = f.AppendStart(dst, s.start)
		case s.delta != nil:
			dst = f.AppendDelta(dst, s.delta)
		case s.end != nil:
			dst = f.AppendChoiceEnd(dst, s.end)
		case s.err != nil:
			dst = f.AppendError(dst, s.err)
		default:
			dst = f.AppendEnd(dst, s.res)
		}
	}
	return dst
}

func text(choice int, first bool, s string) step {
	return step{delta: &engine.Delta{Choice: choice, Kind: engine.DeltaText, First: first, Text: []byte(s), TokenIDs: []int{1}}}
}

func finish(choice int, r engine.FinishReason) step {
	return step{end: &engine.ChoiceEnd{Choice: choice, FinishReason: r, StopTokenID: -1}}
}

func done(u engine.Usage) step { return step{res: &engine.Result{Usage: u}} }

func start(n int) step { return step{start: &engine.Start{PromptTokens: 7, N: n}} }

var usage = engine.Usage{PromptTokens: 7, CompletionTokens: 3, CachedTokens: 4, ReasoningTokens: 1}

// chatScripts are the scripted chat streams with golden files.
var chatScripts = []struct {
	name string
	opts ChatStreamOptions
	sdk  bool // decodable by openai-go's accumulator (no error event)
	s    []step
}{
	{"text", ChatStreamOptions{Framing: codegen.FramingRaw}, true, []step{
		start(1), text(0, true, "Hello"), text(0, false, ", \"world\"\n<&>"), finish(0, engine.FinishStop), done(usage)}},
	{"text_chunked", ChatStreamOptions{Framing: codegen.FramingChunked}, true, []step{
		start(1), text(0, true, "Hi"), text(0, false, "!"), finish(0, engine.FinishLength), done(usage)}},
	{"n2", ChatStreamOptions{Framing: codegen.FramingRaw}, true, []step{
		start(2), text(0, true, "A"), text(1, true, "B"), text(1, false, "b"),
		{end: &engine.ChoiceEnd{Choice: 1, FinishReason: engine.FinishStop, StopString: "###", StopTokenID: -1}},
		text(0, false, "a"), finish(0, engine.FinishLength), done(usage)}},
	{"empty_choice", ChatStreamOptions{Framing: codegen.FramingRaw}, true, []step{
		start(1), {end: &engine.ChoiceEnd{Choice: 0, FinishReason: engine.FinishStop, StopTokenID: 2}}, done(usage)}},
	{"tool_call", ChatStreamOptions{Framing: codegen.FramingRaw}, true, []step{
		start(1),
		{delta: &engine.Delta{Choice: 0, Kind: engine.DeltaToolCallStart, First: true, ToolCallIndex: 0, ToolCallID: "call_abc123", ToolName: "get_weather"}},
		{delta: &engine.Delta{Choice: 0, Kind: engine.DeltaToolCallArgs, ToolCallIndex: 0, Text: []byte(`{"city":`)}},
		{delta: &engine.Delta{Choice: 0, Kind: engine.DeltaToolCallArgs, ToolCallIndex: 0, Text: []byte(`"Paris"}`)}},
		{delta: &engine.Delta{Choice: 0, Kind: engine.DeltaToolCallStart, ToolCallIndex: 1, ToolCallID: "call_def456", ToolName: "get_time"}},
		{delta: &engine.Delta{Choice: 0, Kind: engine.DeltaToolCallArgs, ToolCallIndex: 1, Text: []byte(`{}`)}},
		finish(0, engine.FinishToolCalls), done(usage)}},
	{"reasoning", ChatStreamOptions{Framing: codegen.FramingRaw}, true, []step{
		start(1),
		{delta: &engine.Delta{Choice: 0, Kind: engine.DeltaReasoning, First: true, Text: []byte("Think.")}},
		text(0, false, "Answer"), finish(0, engine.FinishStop), done(usage)}},
	{"logprobs", ChatStreamOptions{Framing: codegen.FramingRaw}, true, []step{
		start(1),
		{delta: &engine.Delta{Choice: 0, Kind: engine.DeltaText, First: true, Text: []byte("Hé"), TokenIDs: []int{5},
			Logprobs: []engine.TokenLogprob{{TokenID: 5, Token: "Hé", Logprob: -0.25, Top: []engine.TopLogprob{
				{TokenID: 5, Token: "Hé", Logprob: -0.25}, {TokenID: 6, Token: "Hi", Logprob: -1.5}}}}}},
		{delta: &engine.Delta{Choice: 0, Kind: engine.DeltaText, Text: []byte("!"), TokenIDs: []int{7},
			Logprobs: []engine.TokenLogprob{{TokenID: 7, Token: "!", Logprob: 0, Top: []engine.TopLogprob{{TokenID: 7, Token: "!", Logprob: 0}}}}}},
		finish(0, engine.FinishStop), done(usage)}},
	{"include_usage", ChatStreamOptions{Framing: codegen.FramingRaw, IncludeUsage: true}, true, []step{
		start(1), text(0, true, "Hi"), finish(0, engine.FinishStop), done(usage)}},
	{"continuous_usage", ChatStreamOptions{Framing: codegen.FramingRaw, IncludeUsage: true, ContinuousUsage: true}, true, []step{
		start(1),
		{delta: &engine.Delta{Choice: 0, First: true, Text: []byte("Hi"), Usage: &engine.Usage{PromptTokens: 7, CompletionTokens: 1}}},
		{end: &engine.ChoiceEnd{Choice: 0, FinishReason: engine.FinishStop, StopTokenID: -1, Usage: &engine.Usage{PromptTokens: 7, CompletionTokens: 2}}},
		done(engine.Usage{PromptTokens: 7, CompletionTokens: 2})}},
	{"error", ChatStreamOptions{Framing: codegen.FramingChunked, IncludeUsage: true}, false, []step{
		start(1), text(0, true, "Hi"),
		{err: &engine.Error{Kind: engine.KindInternal, Message: "cuda: device lost"}}}},
}

// checkGolden compares got with testdata/name.golden (or rewrites it).
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: output differs from golden file\n got: %q\nwant: %q", name, got, want)
	}
}

func TestChatStreamGolden(t *testing.T) {
	for _, sc := range chatScripts {
		t.Run(sc.name, func(t *testing.T) {
			f := NewChatFormatter("chatcmpl-test123", "vajra-sim", 1767225600, sc.opts)
			checkGolden(t, "chat_"+sc.name, drive(f, sc.s))
		})
	}
}

// TestChatFormatterReset checks that a pooled formatter renders the same
// bytes after Reset as a new one.
func TestChatFormatterReset(t *testing.T) {
	sc := chatScripts[2]
	want := drive(NewChatFormatter("chatcmpl-test123", "vajra-sim", 1767225600, sc.opts), sc.s)
	f := NewChatFormatter("chatcmpl-other", "other-model", 1, ChatStreamOptions{IncludeUsage: true})
	drive(f, chatScripts[0].s)
	f.Reset("chatcmpl-test123", "vajra-sim", 1767225600, sc.opts)
	if got := drive(f, sc.s); !bytes.Equal(got, want) {
		t.Errorf("after Reset:\n got %q\nwant %q", got, want)
	}
}

// sseBody returns the SSE body inside a stream's framing.
func sseBody(t *testing.T, b []byte, f codegen.Framing) []byte {
	t.Helper()
	if f != codegen.FramingChunked {
		return b
	}
	out, err := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(b)))
	if err != nil {
		t.Fatalf("chunked framing: %v", err)
	}
	return out
}

func sseResponse(body []byte) *http.Response {
	return &http.Response{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": []string{"text/event-stream"}},
		Body:       io.NopCloser(bytes.NewReader(body)),
	}
}
