package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra/internal/sse"
)

// counted classifies a dialect's stream with the instrument's rules.
type counted struct {
	d                     Dialect
	tokens, errs, usage   int
	terminal, failedFinal bool
	afterTerminal         int // events after the terminal one
}

func (c *counted) OnEvent(name, data []byte) {
	if c.terminal {
		c.afterTerminal++
	}
	switch classify(c.d, name, data) {
	case evToken:
		c.tokens++
	case evTerminal:
		c.terminal = true
	case evError:
		c.errs++
	case evFailed:
		c.errs++
		c.terminal, c.failedFinal = true, true
	}
	if u := usageTokens(data); u >= 0 {
		c.usage = u
	}
}

// TestSSEDialectsEverySplit parses every dialect's stream split at every
// offset (and in CRLF form) and checks the token count, the usage and the
// terminal event are always found.
func TestSSEDialectsEverySplit(t *testing.T) {
	for d, stream := range dialectStreams {
		t.Run(string(d), func(t *testing.T) {
			for _, variant := range []string{stream, crlf(stream)} {
				for split := 0; split <= len(variant); split++ {
					var r sse.Reader
					c := counted{d: d}
					_ = r.Feed([]byte(variant[:split]), &c)
					_ = r.Feed([]byte(variant[split:]), &c)
					if c.tokens != 3 || c.usage != 3 || !c.terminal || c.errs != 0 || c.afterTerminal != 0 || r.Pending() {
						t.Fatalf("split %d: %+v pending=%v", split, c, r.Pending())
					}
				}
				// One byte at a time, reusing one buffer as a socket read would.
				var r sse.Reader
				c := counted{d: d}
				buf := make([]byte, 1)
				for i := 0; i < len(variant); i++ {
					buf[0] = variant[i]
					_ = r.Feed(buf, &c)
				}
				if c.tokens != 3 || !c.terminal {
					t.Fatalf("byte by byte: %+v", c)
				}
			}
		})
	}
}

func TestClassifyErrors(t *testing.T) {
	f := func(d Dialect, name, data string, want eventKind) {
		t.Helper()
		if got := classify(d, []byte(name), []byte(data)); got != want {
			t.Errorf("classify(%s, %q, %q) = %d, want %d", d, name, data, got, want)
		}
	}
	f(DialectChat, "", `{"error":{"message":"boom","type":"server_error"}}`, evError)
	f(DialectChat, "", `{"choices":[{"delta":{"content":"{\"error\":{}}"}}]}`, evToken) // key inside a string is escaped
	f(DialectChat, "", `{"choices":[{"delta":{"content":null}}]}`, evOther)
	f(DialectCompletions, "", `{"error":{"message":"boom"}}`, evError)
	f(DialectResponses, "error", `{"type":"error","code":"x","message":"boom"}`, evError)
	f(DialectResponses, "response.failed", `{"type":"response.failed"}`, evFailed)
	f(DialectResponses, "response.incomplete", `{"type":"response.incomplete"}`, evTerminal)
	f(DialectResponses, "", `{"type":"response.output_text.delta","delta":"x"}`, evToken) // no event: line
	f(DialectResponses, "response.output_text.delta", `{"type":"response.output_text.delta","delta":""}`, evOther)
	f(DialectMessages, "error", `{"type":"error","error":{"type":"overloaded_error","message":"x"}}`, evError)
	f(DialectMessages, "content_block_delta", `{"type":"content_block_delta","delta":{"type":"input_json_delta","partial_json":"{}"}}`, evOther)
	f(DialectRealtime, "", `{"type":"error","error":{"type":"invalid_request_error"}}`, evError)
	f(DialectRealtime, "", `{"type":"response.done","response":{"status":"failed"}}`, evFailed)
	f(DialectRealtime, "", `{"type":"response.done","response":{"status":"completed"}}`, evTerminal)
	for _, ev := range realtimeEvents[3:6] {
		f(DialectRealtime, "", ev, evToken)
	}
}

func TestUsageTokens(t *testing.T) {
	f := func(in string, want int) {
		t.Helper()
		if got := usageTokens([]byte(in)); got != want {
			t.Errorf("usageTokens(%q) = %d, want %d", in, got, want)
		}
	}
	f(`{"usage":{"prompt_tokens":5,"completion_tokens":17}}`, 17)
	f(`{"usage":{"input_tokens":5,"output_tokens": 9}}`, 9)
	f(`{"usage":{}}`, -1)
	f(`{"completion_tokens":x}`, -1)
}

// tokenSink counts tokens like the hot path does, without recording.
type tokenSink struct {
	d Dialect
	n int
}

func (s *tokenSink) OnEvent(name, data []byte) {
	if classify(s.d, name, data) == evToken {
		s.n++
	}
}

// BenchmarkSSEEvent measures the per-event path: SSE framing plus the
// dialect's token classification, one event per Feed as a socket read
// delivers it. It must not allocate.
func BenchmarkSSEEvent(b *testing.B) {
	events := map[Dialect]string{
		DialectChat:      "data: {\"id\":\"chatcmpl-floor\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"floor\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" fox\"},\"finish_reason\":null}]}\n\n",
		DialectResponses: "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":6,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\" fox\"}\n\n",
		DialectMessages:  "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" fox\"}}\n\n",
	}
	for _, d := range []Dialect{DialectChat, DialectResponses, DialectMessages} {
		ev := []byte(events[d])
		b.Run(string(d), func(b *testing.B) {
			var r sse.Reader
			s := &tokenSink{d: d}
			b.ReportAllocs()
			b.SetBytes(int64(len(ev)))
			for b.Loop() {
				_ = r.Feed(ev, s)
			}
			if s.n == 0 {
				b.Fatal("no tokens counted")
			}
		})
		b.Run(string(d)+"/split", func(b *testing.B) {
			var r sse.Reader
			s := &tokenSink{d: d}
			half := len(ev) / 2
			b.ReportAllocs()
			b.SetBytes(int64(len(ev)))
			for b.Loop() {
				_ = r.Feed(ev[:half], s)
				_ = r.Feed(ev[half:], s)
			}
		})
	}
}

func TestSSEEventAllocs(t *testing.T) {
	ev := []byte(strings.Split(dialectStreams[DialectChat], "\n\n")[1] + "\n\n")
	var r sse.Reader
	s := &tokenSink{d: DialectChat}
	_ = r.Feed(ev[:10], s) // warm the scratch buffers
	_ = r.Feed(ev[10:], s)
	if n := testing.AllocsPerRun(100, func() { _ = r.Feed(ev[:10], s); _ = r.Feed(ev[10:], s) }); n != 0 {
		t.Fatalf("%v allocations per event, want 0", n)
	}
}

// TestEveryChunk: with -every-chunk an empty content (chat) or text
// (completions) chunk is a token, as vllm bench serve counts it; by
// default only chunks with text are. A role chunk with null content, the
// finish chunk and the usage chunk are never tokens.
func TestEveryChunk(t *testing.T) {
	chunks := map[Dialect][]string{
		DialectChat: {
			`{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}`,
			`{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"}}]}`,
			`{"choices":[{"index":0,"delta":{"content":""}}]}`,
			`{"choices":[{"index":0,"delta":{"content":" there"}}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`,
			`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3}}`,
		},
		DialectCompletions: {
			`{"choices":[{"index":0,"text":"Hi","logprobs":null,"finish_reason":null}]}`,
			`{"choices":[{"index":0,"text":"","logprobs":null,"finish_reason":null}]}`,
			`{"choices":[{"index":0,"text":" there","logprobs":null,"finish_reason":null}]}`,
			`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3}}`,
		},
	}
	for d, cs := range chunks {
		for _, every := range []bool{false, true} {
			s := stream{d: d, every: every, clk: &clock{}, rec: newRecorder(0, 1<<62, time.Minute)}
			s.reset(0, true)
			for i, c := range cs {
				s.now = int64(i + 1)
				s.OnEvent(nil, []byte(c))
			}
			if want := map[bool]int{false: 2, true: 3}[every]; s.tokens != want {
				t.Errorf("%s, every chunk %v: %d tokens, want %d", d, every, s.tokens, want)
			}
		}
	}
}
