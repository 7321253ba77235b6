package text

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine"
)

// argDeltas feeds in to a streaming Parser for opt in pieces of n bytes
// and returns, per call, the number of argument events and their text.
func argDeltas(t *testing.T, opt Options, in string, n int) (counts []int, texts []string) {
	t.Helper()
	opt.Stream = true
	p, err := NewParser(opt)
	if err != nil {
		t.Fatal(err)
	}
	var evs []Event
	take := func(evs []Event) {
		for _, e := range evs {
			switch e.Kind {
			case engine.DeltaToolCallStart:
				counts, texts = append(counts, 0), append(texts, "")
			case engine.DeltaToolCallArgs:
				if e.ToolIndex != len(counts)-1 {
					t.Fatalf("arguments of call %d while call %d is open", e.ToolIndex, len(counts)-1)
				}
				counts[e.ToolIndex]++
				texts[e.ToolIndex] += string(e.Text)
			}
		}
	}
	for _, piece := range tokenize(in, n) {
		evs, _ = p.Feed(evs[:0], piece)
		take(evs)
	}
	take(p.Finish(evs[:0]))
	calls := p.ToolCalls()
	if len(calls) != len(texts) {
		t.Fatalf("%d calls, %d starts", len(calls), len(texts))
	}
	for i, c := range calls {
		if c.Arguments != texts[i] {
			t.Fatalf("call %d: Arguments %q, deltas %q", i, c.Arguments, texts[i])
		}
	}
	return counts, texts
}

// TestArgsStreamAsGenerated: fed token by token, every format's arguments
// come in many pieces whose concatenation is the call's Arguments, the
// same as the non-streamed answer's.
func TestArgsStreamAsGenerated(t *testing.T) {
	args := `{"city": "Paris", "days": [1, 2, 3], "unit": "celsius"}`
	cases := []struct{ tools, in string }{
		{"hermes", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + args + "}\n</tool_call>"},
		{"llama3_json", `<|python_tag|>{"name": "get_weather", "parameters": ` + args + `}`},
		{"mistral", `[TOOL_CALLS]get_weather[ARGS]` + args},
		{"mistral", `[TOOL_CALLS][{"name": "get_weather", "arguments": ` + args + `}]`},
	}
	for _, c := range cases {
		for _, n := range []int{1, 3, 7} {
			counts, texts := argDeltas(t, Options{Tools: c.tools}, c.in, n)
			if len(counts) != 1 || texts[0] != args {
				t.Fatalf("%s by %d: calls %q", c.tools, n, texts)
			}
			if want := len(args) / n; counts[0] < want {
				t.Fatalf("%s by %d: %d argument deltas, want at least %d", c.tools, n, counts[0], want)
			}
		}
		// Not streamed: one piece, the same call.
		p, _ := NewParser(Options{Tools: c.tools})
		var evs []Event
		nargs := 0
		for _, piece := range tokenize(c.in, 1) {
			evs, _ = p.Feed(evs[:0], piece)
			for _, e := range evs {
				if e.Kind == engine.DeltaToolCallArgs {
					nargs++
				}
			}
		}
		p.Finish(nil)
		if calls := p.ToolCalls(); len(calls) != 1 || calls[0].Arguments != args || calls[0].Name != "get_weather" {
			t.Fatalf("%s not streamed: %+v", c.tools, calls)
		}
	}
}

// TestArgsStreamAllocs: streaming a call's arguments costs nothing per
// token: a call with four times the arguments allocates as often (its
// name, id and Arguments strings).
func TestArgsStreamAllocs(t *testing.T) {
	opt := Options{Tools: "hermes", Reasoning: "qwen3", Stream: true}
	p, _ := NewParser(opt)
	var evs []Event
	allocs := func(in string) float64 {
		toks := tokenize(in, 2)
		run := func() {
			_ = p.Reset(opt)
			for _, tok := range toks {
				evs, _ = p.Feed(evs[:0], tok)
			}
			evs = p.Finish(evs[:0])
			if len(p.ToolCalls()) != 1 {
				t.Fatalf("no call in %q", in)
			}
		}
		run()
		return testing.AllocsPerRun(50, run)
	}
	call := func(args string) string {
		return "ok</think><tool_call>{\"name\": \"f\", \"arguments\": {\"q\": \"" + args + "\"}}</tool_call>"
	}
	short, long := allocs(call(strings.Repeat("ab ", 20))), allocs(call(strings.Repeat("ab ", 80)))
	if short != long || short > 3 {
		t.Fatalf("allocations per call: %v with 60 bytes of arguments, %v with 240 (want equal, at most 3)", short, long)
	}
}

// forcedRun feeds in to a Forced for name in the given pieces and returns
// its calls, content and the streamed calls rebuilt from its events.
func forcedRun(t testing.TB, name string, stream bool, pieces [][]byte) (calls []engine.ToolCall, content string, events []engine.ToolCall, nargs int) {
	t.Helper()
	var f Forced
	f.Reset(name, stream)
	var evs []Event
	var text strings.Builder
	take := func(evs []Event) {
		for _, e := range evs {
			switch e.Kind {
			case engine.DeltaToolCallStart:
				if e.ToolIndex != len(events) {
					t.Fatalf("start of call %d, want %d", e.ToolIndex, len(events))
				}
				events = append(events, engine.ToolCall{ID: e.ToolID, Name: e.ToolName})
			case engine.DeltaToolCallArgs:
				if e.ToolIndex != len(events)-1 {
					t.Fatalf("arguments of call %d, open %d", e.ToolIndex, len(events)-1)
				}
				events[e.ToolIndex].Arguments += string(e.Text)
				nargs++
			case engine.DeltaText:
				text.Write(e.Text)
			}
		}
	}
	for _, piece := range pieces {
		evs = f.Feed(evs[:0], piece)
		take(evs)
	}
	take(f.Finish(evs[:0]))
	if stream {
		if len(events) != len(f.Calls()) {
			t.Fatalf("%d calls, %d streamed", len(f.Calls()), len(events))
		}
		for i, c := range f.Calls() {
			if events[i] != c {
				t.Fatalf("call %d %+v, streamed %+v", i, c, events[i])
			}
		}
		if text.String() != f.Content() {
			t.Fatalf("content %q, streamed %q", f.Content(), text.String())
		}
	}
	return f.Calls(), f.Content(), events, nargs
}

func sameCalls(a, b []engine.ToolCall) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Arguments != b[i].Arguments {
			return false
		}
	}
	return true
}

// TestForcedRequiredStreams: tool_choice required streams each call's
// arguments as they come; the calls equal the non-streamed ones, at every
// split.
func TestForcedRequiredStreams(t *testing.T) {
	in := `[{"name": "get_weather", "parameters": {"city": "Paris", "n": [1, 2]}}, {"name": "f", "parameters": {}}]`
	want, _, _, _ := forcedRun(t, "", false, [][]byte{[]byte(in)})
	if len(want) != 2 || want[0].Arguments != `{"city": "Paris", "n": [1, 2]}` || want[1].Name != "f" {
		t.Fatalf("not streamed: %+v", want)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, pieces := range splits(in, rng) {
		got, content, _, _ := forcedRun(t, "", true, pieces)
		if !sameCalls(got, want) || content != "" {
			t.Fatalf("pieces %q: %+v %q, want %+v", pieces, got, content, want)
		}
	}
	_, _, _, nargs := forcedRun(t, "", true, tokenize(in, 2))
	if nargs < 15 {
		t.Fatalf("%d argument deltas", nargs)
	}
	// Cut short inside a call: the streamed call keeps what was sent; not
	// streamed, the text is content.
	cut := `[{"name": "f", "parameters": {"a": 1}}, {"name": "g", "parameters": {"b": `
	got, content, _, _ := forcedRun(t, "", true, tokenize(cut, 3))
	if !sameCalls(got, []engine.ToolCall{{Name: "f", Arguments: `{"a": 1}`}, {Name: "g", Arguments: `{"b": `}}) || content != "" {
		t.Fatalf("cut, streamed: %+v %q", got, content)
	}
	got, content, _, _ = forcedRun(t, "", false, tokenize(cut, 3))
	if len(got) != 0 || content != cut {
		t.Fatalf("cut, not streamed: %+v %q", got, content)
	}
	// Named: the arguments as they come.
	got, _, _, nargs = forcedRun(t, "f", true, tokenize(`{"a": [1, 2, 3]}`, 1))
	if len(got) != 1 || got[0].Arguments != `{"a": [1, 2, 3]}` || nargs != 16 {
		t.Fatalf("named: %+v, %d deltas", got, nargs)
	}
}

// FuzzForcedRequired: for any output, the streamed events rebuild the
// calls, the result does not depend on the split, and a well-formed array
// gives the non-streamed calls.
func FuzzForcedRequired(f *testing.F) {
	f.Add([]byte(`[{"name": "a", "parameters": {"x": "}"}}, {"name": "b", "parameters": {}}]`), 7)
	f.Add([]byte(`[{"parameters": {}, "name": "a"}]`), 3)
	f.Add([]byte(`[{"name": "a", "parameters": {"x": [`), 11)
	f.Add([]byte(`[{"name": "a\"", "parameters": 1}]`), 2)
	f.Fuzz(func(t *testing.T, in []byte, cut int) {
		whole, wc, _, _ := forcedRun(t, "", true, [][]byte{in})
		if len(in) > 0 {
			cut = int(uint(cut) % uint(len(in)+1))
			got, gc, _, _ := forcedRun(t, "", true, [][]byte{in[:cut], in[cut:]})
			if !sameCalls(got, whole) || gc != wc {
				t.Fatalf("split at %d: %+v %q, whole %+v %q", cut, got, gc, whole, wc)
			}
		}
		got, gc, _, _ := forcedRun(t, "", true, tokenize(string(in), 1))
		if !sameCalls(got, whole) || gc != wc {
			t.Fatalf("bytewise: %+v %q, whole %+v %q", got, gc, whole, wc)
		}
		plain, _, _, _ := forcedRun(t, "", false, [][]byte{in})
		var arr []struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		}
		if json.Unmarshal(in, &arr) == nil && len(arr) > 0 && !sameCalls(whole, plain) {
			t.Fatalf("well formed: streamed %+v, not %+v", whole, plain)
		}
	})
}

// TestForcedStreamAllocs: a required call's arguments stream without
// allocating per token: four times the arguments cost as many
// allocations (the call's id, Arguments and the array's parse at the end).
func TestForcedStreamAllocs(t *testing.T) {
	var f Forced
	var evs []Event
	allocs := func(in string) float64 {
		toks := tokenize(in, 2)
		run := func() {
			f.Reset("", true)
			for _, tok := range toks {
				evs = f.Feed(evs[:0], tok)
			}
			evs = f.Finish(evs[:0])
			if len(f.Calls()) != 1 {
				t.Fatalf("no call in %q", in)
			}
		}
		run()
		return testing.AllocsPerRun(50, run)
	}
	call := func(args string) string {
		return `[{"name": "f", "parameters": {"q": "` + args + `"}}]`
	}
	short, long := allocs(call(strings.Repeat("ab ", 20))), allocs(call(strings.Repeat("ab ", 80)))
	if short != long {
		t.Fatalf("allocations per call: %v with 60 bytes of arguments, %v with 240", short, long)
	}
}

// BenchmarkFeedToolArgs is the per-token cost of a hermes tool call's
// arguments, held whole to the end (not streamed) or streamed as deltas.
func BenchmarkFeedToolArgs(b *testing.B) {
	in := "<tool_call>{\"name\": \"f\", \"arguments\": {\"q\": \"" + strings.Repeat("word ", 400) + "\"}}</tool_call>"
	toks := tokenize(in, 4)
	for _, stream := range []bool{false, true} {
		name := "whole"
		if stream {
			name = "streamed"
		}
		b.Run(name, func(b *testing.B) {
			opt := Options{Tools: "hermes", Stream: stream}
			p, _ := NewParser(opt)
			var evs []Event
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				_ = p.Reset(opt)
				for _, tok := range toks {
					evs, _ = p.Feed(evs[:0], tok)
				}
				evs = p.Finish(evs[:0])
			}
		})
	}
}
