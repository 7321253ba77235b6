package text

import (
	"strings"
	"testing"
)

// fuzzOptions picks the Parser configuration from mode.
func fuzzOptions(mode uint8) Options {
	var opt Options
	if mode&1 != 0 {
		opt.Stop = []string{"STOP", "</tool_call>", "é!"}
	}
	if mode&2 != 0 {
		opt.Reasoning = "deepseek_r1"
	}
	opt.Tools = []string{"", "hermes", "llama3_json", "mistral"}[mode>>2&3]
	opt.Stream = mode&16 != 0
	return opt
}

func FuzzParser(f *testing.F) {
	f.Add([]byte("<think>a</think>b<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>"), 5, uint8(2|1<<2))
	f.Add([]byte("<|python_tag|>{\"name\":\"a\",\"parameters\":{}}; {\"name\""), 9, uint8(2<<2))
	f.Add([]byte("x[TOOL_CALLS]f[ARGS]{\"a\":\"\xe4\xb8\"}[TOOL_CALLS][{\"name\":\"g\"}]"), 17, uint8(3<<2))
	f.Add([]byte("abSTOé!x\xf0\x9f"), 4, uint8(1))
	// Streamed tool-call arguments (mode bit 16).
	f.Add([]byte("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1, \"}\"]}}</tool_call>x"), 23, uint8(16|1<<2))
	f.Add([]byte("[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": 2}]"), 30, uint8(16|3<<2))
	f.Add([]byte("{\"name\": \"f\", \"parameters\": {\"a\": "), 12, uint8(16|2<<2))
	f.Fuzz(func(t *testing.T, in []byte, cut int, mode uint8) {
		opt := fuzzOptions(mode)
		whole := drive(t, opt, [][]byte{in})
		if len(in) > 0 {
			cut = int(uint(cut) % uint(len(in)+1))
			if got := drive(t, opt, [][]byte{in[:cut], in[cut:]}); !sameResult(got, whole) {
				t.Fatalf("split at %d: %+v, whole %+v", cut, got, whole)
			}
		}
		pieces := make([][]byte, len(in))
		for i := range in {
			pieces[i] = in[i : i+1]
		}
		if got := drive(t, opt, pieces); !sameResult(got, whole) {
			t.Fatalf("bytewise: %+v, whole %+v", got, whole)
		}

		// Nothing lost, where that can be said simply.
		text := decodeAll(in)
		if whole.Stop != "" {
			if opt.Reasoning == "" && opt.Tools == "" {
				if !strings.HasPrefix(text, whole.Content+whole.Stop) {
					t.Fatalf("stopped output %q+%q is not a prefix of %q", whole.Content, whole.Stop, text)
				}
			}
			for _, s := range opt.Stop {
				if strings.Contains(whole.Content, s) || strings.Contains(whole.Reasoning, s) {
					t.Fatalf("output contains stop string %q: %+v", s, whole)
				}
			}
			return
		}
		if opt.Stop != nil && whole.Stop == "" {
			for _, s := range opt.Stop {
				if strings.Contains(text, s) {
					t.Fatalf("stop string %q in %q not matched", s, text)
				}
			}
		}
		switch {
		case opt.Reasoning == "" && len(whole.Calls) == 0:
			if opt.Tools == "llama3_json" {
				// A leading <|python_tag|> without a call is dropped.
				if rest := strings.TrimLeft(text, " \t\r\n"); strings.HasPrefix(rest, pythonTag) {
					text = text[:len(text)-len(rest)] + rest[len(pythonTag):]
				}
			}
			if whole.Content != text {
				t.Fatalf("content %q, input %q", whole.Content, text)
			}
		case opt.Reasoning != "" && opt.Tools == "" && !strings.Contains(text, "</think>") && !strings.HasPrefix(text, "<think>"):
			if whole.Reasoning != text || whole.Content != "" {
				t.Fatalf("reasoning %q content %q, input %q", whole.Reasoning, whole.Content, text)
			}
		}
	})
}

// BenchmarkFeed measures the per-token path on plain text (no tool call):
// it must not allocate.
func BenchmarkFeed(b *testing.B) {
	body := strings.Repeat("The quick brown fox jumps over the lazy dog; 快速的棕色狐狸. ", 8)
	for _, bc := range []struct {
		name string
		opt  Options
		text string
	}{
		{"plain", Options{}, body},
		{"stop", Options{Stop: []string{"STOP", "\n\nUser:"}}, body},
		{"reasoning_hermes", Options{Reasoning: "qwen3", Tools: "hermes", Stop: []string{"STOP"}}, "Let me think. " + body + "</think>\n\n" + body},
		{"llama3_json", Options{Tools: "llama3_json"}, body},
		{"mistral", Options{Tools: "mistral"}, body},
	} {
		b.Run(bc.name, func(b *testing.B) {
			toks := tokenize(bc.text, 4)
			p, err := NewParser(bc.opt)
			if err != nil {
				b.Fatal(err)
			}
			var evs []Event
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.text)))
			for b.Loop() {
				_ = p.Reset(bc.opt)
				for _, tok := range toks {
					evs, _ = p.Feed(evs[:0], tok)
				}
				evs = p.Finish(evs[:0])
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(toks)), "ns/token")
		})
	}
}
