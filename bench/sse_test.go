package bench

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// collect records the events an SSEReader dispatches, copying them.
type collect struct {
	names, datas []string
}

func (c *collect) OnEvent(name, data []byte) {
	c.names = append(c.names, string(name))
	c.datas = append(c.datas, string(data))
}

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

func TestSSEFieldsAndFraming(t *testing.T) {
	f := func(in string, wantNames, wantDatas []string) {
		t.Helper()
		for _, variant := range []string{in, crlf(in)} {
			for split := 0; split <= len(variant); split++ {
				var r SSEReader
				var c collect
				if err := r.Feed([]byte(variant[:split]), &c); err != nil {
					t.Fatalf("split %d: %v", split, err)
				}
				if err := r.Feed([]byte(variant[split:]), &c); err != nil {
					t.Fatalf("split %d: %v", split, err)
				}
				if strings.Join(c.names, "|") != strings.Join(wantNames, "|") || strings.Join(c.datas, "|") != strings.Join(wantDatas, "|") {
					t.Fatalf("input %q split at %d:\n got names %q datas %q\nwant names %q datas %q", variant, split, c.names, c.datas, wantNames, wantDatas)
				}
			}
		}
	}
	f("data: a\n\n", []string{""}, []string{"a"})
	f("data:a\n\n", []string{""}, []string{"a"})
	f("data:  a\n\n", []string{""}, []string{" a"}) // only one space is stripped
	f("event: x\ndata: 1\n\nevent: y\ndata: 2\n\n", []string{"x", "y"}, []string{"1", "2"})
	f("data: a\ndata: b\n\n", []string{""}, []string{"a\nb"})
	f(": comment\ndata: a\n\n", []string{""}, []string{"a"})
	f("id: 7\nretry: 10\ndata: a\n\n", []string{""}, []string{"a"})
	f("event: lonely\n\ndata: b\n\n", []string{""}, []string{"b"}) // no data: not dispatched, name reset
	f("data\n\n", []string{""}, []string{""})
	f("data: unterminated", nil, nil)
	f("\n\n\ndata: a\n\n\n", []string{""}, []string{"a"})
}

func TestSSEPending(t *testing.T) {
	var r SSEReader
	var c collect
	_ = r.Feed([]byte("data: a\n\ndata: b\n"), &c)
	if !r.Pending() {
		t.Fatal("an event without its blank line must be pending")
	}
	_ = r.Feed([]byte("\n"), &c)
	if r.Pending() || len(c.datas) != 2 {
		t.Fatalf("pending=%v events=%q", r.Pending(), c.datas)
	}
}

func TestSSEEventTooLarge(t *testing.T) {
	var r SSEReader
	big := bytes.Repeat([]byte("x"), MaxEventBytes+1)
	err := r.Feed(append([]byte("data: "), big...), &collect{})
	if !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("err = %v, want ErrEventTooLarge", err)
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
					var r SSEReader
					c := counted{d: d}
					_ = r.Feed([]byte(variant[:split]), &c)
					_ = r.Feed([]byte(variant[split:]), &c)
					if c.tokens != 3 || c.usage != 3 || !c.terminal || c.errs != 0 || c.afterTerminal != 0 || r.Pending() {
						t.Fatalf("split %d: %+v pending=%v", split, c, r.Pending())
					}
				}
				// One byte at a time, reusing one buffer as a socket read would.
				var r SSEReader
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
			var r SSEReader
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
			var r SSEReader
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
	var r SSEReader
	s := &tokenSink{d: DialectChat}
	_ = r.Feed(ev[:10], s) // warm the scratch buffers
	_ = r.Feed(ev[10:], s)
	if n := testing.AllocsPerRun(100, func() { _ = r.Feed(ev[:10], s); _ = r.Feed(ev[10:], s) }); n != 0 {
		t.Fatalf("%v allocations per event, want 0", n)
	}
}
