package anthropic

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// script is one streamed response as an engine would drive a Formatter.
type script struct {
	name   string
	deltas []engine.Delta
	end    engine.ChoiceEnd
	res    engine.Result
	err    *engine.Error // set: the stream fails after the deltas
}

func text(kind engine.DeltaKind, s string) engine.Delta {
	return engine.Delta{Kind: kind, Text: []byte(s), TokenIDs: []int{1}}
}

var usage = engine.Usage{PromptTokens: 12, CachedTokens: 4, CompletionTokens: 5}

var scripts = []script{
	{
		name:   "text",
		deltas: []engine.Delta{text(engine.DeltaText, "Hello"), text(engine.DeltaText, ", \"world\"\n"), text(engine.DeltaText, "<&>")},
		end:    engine.ChoiceEnd{FinishReason: engine.FinishStop, StopTokenID: -1, Usage: &usage},
		res:    engine.Result{Choices: []engine.Choice{{Text: "Hello, \"world\"\n<&>", FinishReason: engine.FinishStop, StopTokenID: -1}}, Usage: usage},
	},
	{
		name:   "reasoning",
		deltas: []engine.Delta{text(engine.DeltaReasoning, "Let me think."), text(engine.DeltaReasoning, " Done."), text(engine.DeltaText, "42")},
		end:    engine.ChoiceEnd{FinishReason: engine.FinishStop, StopString: "END", StopTokenID: -1, Usage: &usage},
		res:    engine.Result{Choices: []engine.Choice{{Reasoning: "Let me think. Done.", Text: "42", FinishReason: engine.FinishStop, StopString: "END", StopTokenID: -1}}, Usage: usage},
	},
	{
		name: "tool_call",
		deltas: []engine.Delta{
			text(engine.DeltaText, "Checking."),
			{Kind: engine.DeltaToolCallStart, ToolCallID: "call_abc", ToolName: "get_weather"},
			text(engine.DeltaToolCallArgs, `{"city":`),
			text(engine.DeltaToolCallArgs, `"Paris"}`),
			{Kind: engine.DeltaToolCallStart, ToolCallIndex: 1, ToolName: "get_time"},
			text(engine.DeltaToolCallArgs, `{}`),
		},
		end: engine.ChoiceEnd{FinishReason: engine.FinishToolCalls, StopTokenID: -1, Usage: &usage},
		res: engine.Result{Choices: []engine.Choice{{Text: "Checking.", FinishReason: engine.FinishToolCalls, StopTokenID: -1,
			ToolCalls: []engine.ToolCall{{ID: "call_abc", Name: "get_weather", Arguments: `{"city":"Paris"}`}, {Name: "get_time", Arguments: `{}`}}}}, Usage: usage},
	},
	{
		name:   "length",
		deltas: []engine.Delta{text(engine.DeltaText, "cut")},
		end:    engine.ChoiceEnd{FinishReason: engine.FinishLength, StopTokenID: -1},
		res:    engine.Result{Choices: []engine.Choice{{Text: "cut", FinishReason: engine.FinishLength, StopTokenID: -1}}, Usage: engine.Usage{PromptTokens: 12, CachedTokens: 4, CompletionTokens: 1}},
	},
	{
		name:   "error",
		deltas: []engine.Delta{text(engine.DeltaText, "partial")},
		err:    &engine.Error{Kind: engine.KindOverloaded, Message: "engine overloaded"},
	},
}

const (
	testID    = "msg_01XyZ"
	testModel = "vajra-test"
)

func run(s *script, f *StreamFormatter) []byte { return runInto(nil, s, f) }

// runInto drives f through s, appending to dst.
func runInto(dst []byte, s *script, f *StreamFormatter) []byte {
	dst = f.AppendStart(dst, &engine.Start{PromptTokens: 12, CachedTokens: 4, N: 1})
	for i := range s.deltas {
		d := s.deltas[i]
		d.First = i == 0
		dst = f.AppendDelta(dst, &d)
	}
	if s.err != nil {
		return f.AppendError(dst, s.err)
	}
	dst = f.AppendChoiceEnd(dst, &s.end)
	return f.AppendEnd(dst, &s.res)
}

func dechunk(t testing.TB, b []byte) []byte {
	t.Helper()
	out, err := io.ReadAll(httputil.NewChunkedReader(bufio.NewReader(bytes.NewReader(b))))
	if err != nil {
		t.Fatalf("dechunk: %v", err)
	}
	return out
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden:\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

func TestStreamGolden(t *testing.T) {
	for i := range scripts {
		s := &scripts[i]
		t.Run(s.name, func(t *testing.T) {
			raw := run(s, NewStreamFormatter(StreamConfig{ID: testID, Model: testModel, Framing: codegen.FramingRaw, Ping: true}))
			golden(t, "stream_"+s.name, raw)

			// Chunked framing carries the same bytes, one chunk per event.
			chunked := run(s, NewStreamFormatter(StreamConfig{ID: testID, Model: testModel, Framing: codegen.FramingChunked, Ping: true}))
			if got := dechunk(t, chunked); !bytes.Equal(got, raw) {
				t.Fatalf("chunked body differs from raw:\n%s", got)
			}
			if events, chunks := bytes.Count(raw, []byte("\n\n")), countChunks(chunked); events != chunks {
				t.Fatalf("%d events in %d chunks", events, chunks)
			}
		})
	}
}

// countChunks counts the non-empty chunks of a chunked body.
func countChunks(b []byte) int {
	n := 0
	r := bufio.NewReader(bytes.NewReader(b))
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return n
		}
		var size int
		if _, err := fmtSscanHex(strings.TrimSpace(line), &size); err != nil || size == 0 {
			return n
		}
		n++
		r.Discard(size + 2)
	}
}

func fmtSscanHex(s string, v *int) (int, error) {
	n := 0
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			n = n*16 + int(c-'0')
		case c >= 'a' && c <= 'f':
			n = n*16 + int(c-'a'+10)
		default:
			return 0, errors.New("not hex")
		}
	}
	*v = n
	return 1, nil
}

// sdkStream decodes a raw SSE body with the official SDK's stream decoder,
// as a client would.
func sdkStream(body []byte) *ssestream.Stream[sdk.MessageStreamEventUnion] {
	res := &http.Response{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(bytes.NewReader(body)),
		Request:    httptest.NewRequest("POST", "/v1/messages", nil),
	}
	return ssestream.NewStream[sdk.MessageStreamEventUnion](ssestream.NewDecoder(res), nil)
}

// TestStreamSDKAccumulate feeds every stream to anthropic-sdk-go's decoder
// and Message.Accumulate, and checks the accumulated message against the
// non-streamed body of the same result.
func TestStreamSDKAccumulate(t *testing.T) {
	for i := range scripts {
		s := &scripts[i]
		if s.err != nil {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			raw := run(s, NewStreamFormatter(StreamConfig{ID: testID, Model: testModel, Framing: codegen.FramingRaw, Ping: true}))
			stream := sdkStream(raw)
			var acc sdk.Message
			var types []string
			for stream.Next() {
				ev := stream.Current()
				types = append(types, ev.Type)
				if ev.AsAny() == nil {
					t.Fatalf("SDK does not know event %q", ev.Type)
				}
				if err := acc.Accumulate(ev); err != nil {
					t.Fatalf("Accumulate(%s): %v", ev.Type, err)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
			if types[0] != "message_start" || types[len(types)-1] != "message_stop" {
				t.Fatalf("event order %v", types)
			}

			var want sdk.Message
			body := AppendMessage(nil, testID, testModel, &s.res)
			if err := json.Unmarshal(body, &want); err != nil {
				t.Fatalf("SDK rejects the non-stream body %s: %v", body, err)
			}
			if acc.ID != want.ID || acc.Model != want.Model || acc.StopReason != want.StopReason ||
				acc.StopSequence != want.StopSequence || acc.Usage.InputTokens != want.Usage.InputTokens ||
				acc.Usage.OutputTokens != want.Usage.OutputTokens || acc.Usage.CacheReadInputTokens != want.Usage.CacheReadInputTokens {
				t.Fatalf("accumulated %+v\nnon-stream %+v", acc, want)
			}
			if len(acc.Content) != len(want.Content) {
				t.Fatalf("accumulated %d blocks, body has %d", len(acc.Content), len(want.Content))
			}
			for j := range acc.Content {
				a, w := acc.Content[j], want.Content[j]
				if a.Type != w.Type || a.Text != w.Text || a.Thinking != w.Thinking || a.Signature != w.Signature ||
					a.ID != w.ID || a.Name != w.Name || !jsonEqual(a.Input, w.Input) {
					t.Fatalf("block %d: stream %s, body %s", j, a.RawJSON(), w.RawJSON())
				}
			}
		})
	}
}

func jsonEqual(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func TestStreamErrorSDK(t *testing.T) {
	s := &scripts[len(scripts)-1]
	raw := run(s, NewStreamFormatter(StreamConfig{ID: testID, Model: testModel, Framing: codegen.FramingRaw}))
	stream := sdkStream(raw)
	for stream.Next() {
	}
	var apiErr *sdk.Error
	if !errors.As(stream.Err(), &apiErr) {
		t.Fatalf("stream error %v is not an *anthropic.Error", stream.Err())
	}
	if apiErr.Type() != "overloaded_error" || apiErr.Message != "engine overloaded" {
		t.Fatalf("type %q message %q", apiErr.Type(), apiErr.Message)
	}
}

func TestFormatterReset(t *testing.T) {
	f := NewStreamFormatter(StreamConfig{ID: testID, Model: testModel, Framing: codegen.FramingRaw, Ping: true})
	first := run(&scripts[2], f)
	f.Reset(StreamConfig{ID: testID, Model: testModel, Framing: codegen.FramingRaw, Ping: true})
	if again := run(&scripts[2], f); !bytes.Equal(first, again) {
		t.Fatalf("a reset formatter writes different bytes")
	}
}

func TestAppendEndWithoutChoiceEnd(t *testing.T) {
	f := NewStreamFormatter(StreamConfig{ID: testID, Model: testModel, Framing: codegen.FramingRaw})
	var dst []byte
	dst = f.AppendStart(dst, &engine.Start{PromptTokens: 3, N: 1})
	d := text(engine.DeltaText, "hi")
	dst = f.AppendDelta(dst, &d)
	dst = f.AppendEnd(dst, &scripts[0].res)
	if !bytes.Contains(dst, []byte("event: content_block_stop\n")) || !bytes.Contains(dst, []byte(`"stop_reason":"end_turn"`)) {
		t.Fatalf("AppendEnd did not close the message:\n%s", dst)
	}
}

func TestFormatterAllocs(t *testing.T) {
	f := NewStreamFormatter(StreamConfig{ID: testID, Model: testModel, Framing: codegen.FramingChunked})
	buf := make([]byte, 0, 64<<10)
	for i := range scripts {
		s := &scripts[i]
		allocs := testing.AllocsPerRun(100, func() {
			f.Reset(StreamConfig{ID: testID, Model: testModel, Framing: codegen.FramingChunked})
			buf = runInto(buf[:0], s, f)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocs per stream", s.name, allocs)
		}
	}
}

func BenchmarkStreamDelta(b *testing.B) {
	for _, kind := range []struct {
		name string
		kind engine.DeltaKind
	}{{"text", engine.DeltaText}, {"thinking", engine.DeltaReasoning}, {"tool_args", engine.DeltaToolCallArgs}} {
		b.Run(kind.name, func(b *testing.B) {
			f := NewStreamFormatter(StreamConfig{ID: testID, Model: testModel, Framing: codegen.FramingChunked})
			buf := make([]byte, 0, 4096)
			buf = f.AppendStart(buf, &engine.Start{PromptTokens: 10, N: 1})
			d := engine.Delta{Kind: kind.kind, Text: []byte(" token"), TokenIDs: []int{42}}
			buf = f.AppendDelta(buf[:0], &d) // opens the block
			b.ReportAllocs()
			b.SetBytes(int64(len(f.AppendDelta(buf[:0], &d))))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				buf = f.AppendDelta(buf[:0], &d)
			}
		})
	}
}
