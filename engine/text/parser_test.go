package text

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/vajra-go/vajra/engine"
)

// call is a tool call without its random id.
type call struct{ Name, Args string }

// result is everything a Parser produced for one output, from its events.
type result struct {
	Content, Reasoning string
	Calls              []call
	Stop               string
}

// drive feeds pieces to a fresh Parser for opt and checks the invariants
// every output must keep: event texts are valid UTF-8; the concatenated
// events equal Content, Reasoning and each call's Arguments; a call's start
// comes before its arguments and carries its id and name; arguments are
// valid JSON objects.
func drive(t testing.TB, opt Options, pieces [][]byte) result {
	t.Helper()
	p, err := NewParser(opt)
	if err != nil {
		t.Fatal(err)
	}
	var content, reasoning strings.Builder
	var args []strings.Builder
	var starts []Event
	check := func(evs []Event) {
		for _, e := range evs {
			if !utf8.Valid(e.Text) {
				t.Fatalf("event %+v: invalid UTF-8", e)
			}
			switch e.Kind {
			case engine.DeltaText:
				content.Write(e.Text)
			case engine.DeltaReasoning:
				reasoning.Write(e.Text)
			case engine.DeltaToolCallStart:
				if e.ToolIndex != len(starts) {
					t.Fatalf("start of call %d, want %d", e.ToolIndex, len(starts))
				}
				e.Text = nil
				starts = append(starts, e)
				args = append(args, strings.Builder{})
			case engine.DeltaToolCallArgs:
				if e.ToolIndex >= len(args) {
					t.Fatalf("arguments of call %d before its start", e.ToolIndex)
				}
				args[e.ToolIndex].Write(e.Text)
			}
		}
	}
	var evs []Event
	stopped := false
	for _, piece := range pieces {
		evs, stopped = p.Feed(evs[:0], piece)
		check(evs)
		if stopped {
			break
		}
	}
	check(p.Finish(evs[:0]))
	if stopped != p.Stopped() {
		t.Fatalf("Feed said stopped=%v, Stopped() %v", stopped, p.Stopped())
	}
	if got := p.Content(); got != content.String() {
		t.Fatalf("Content() %q, events %q", got, content.String())
	}
	if got := p.Reasoning(); got != reasoning.String() {
		t.Fatalf("Reasoning() %q, events %q", got, reasoning.String())
	}
	res := result{Content: content.String(), Reasoning: reasoning.String(), Stop: p.StopString()}
	calls := p.ToolCalls()
	if len(calls) != len(starts) || p.ToolCalled() != (len(calls) > 0) {
		t.Fatalf("%d calls, %d start events, ToolCalled %v", len(calls), len(starts), p.ToolCalled())
	}
	for i, c := range calls {
		if starts[i].ToolID != c.ID || starts[i].ToolName != c.Name {
			t.Fatalf("call %d: start event %+v, call %+v", i, starts[i], c)
		}
		if args[i].String() != c.Arguments {
			t.Fatalf("call %d: argument events %q, Arguments %q", i, args[i].String(), c.Arguments)
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(c.Arguments), &obj); err != nil && !opt.Stream {
			// (A streamed call cut short keeps the arguments sent.)
			t.Fatalf("call %d: arguments %q: %v", i, c.Arguments, err)
		}
		checkID(t, opt.Tools, c.ID)
		res.Calls = append(res.Calls, call{c.Name, c.Arguments})
	}
	return res
}

func checkID(t testing.TB, parser, id string) {
	t.Helper()
	n, rest := callIDLen, strings.TrimPrefix(id, "call_")
	if parser == "mistral" {
		n, rest = mistralCallIDLen, id
	} else if rest == id {
		t.Fatalf("id %q lacks call_", id)
	}
	if len(rest) != n || strings.TrimLeft(rest, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		t.Fatalf("id %q: want %d alphanumerics", id, n)
	}
}

// splits returns in cut into pieces in many ways: whole, byte by byte, at
// every single offset, at every pair of offsets (short inputs), and at
// random.
func splits(in string, rng *rand.Rand) [][][]byte {
	b := []byte(in)
	out := [][][]byte{{b}}
	var bytewise [][]byte
	for i := range b {
		bytewise = append(bytewise, b[i:i+1])
	}
	out = append(out, bytewise)
	for i := 1; i < len(b); i++ {
		out = append(out, [][]byte{b[:i], b[i:]})
		if len(b) <= 80 {
			for j := i + 1; j < len(b); j++ {
				out = append(out, [][]byte{b[:i], b[i:j], b[j:]})
			}
		}
	}
	for range 50 {
		var pieces [][]byte
		for rest := b; len(rest) > 0; {
			n := min(1+rng.IntN(6), len(rest))
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		out = append(out, pieces)
	}
	return out
}

func sameResult(a, b result) bool {
	if a.Content != b.Content || a.Reasoning != b.Reasoning || a.Stop != b.Stop || len(a.Calls) != len(b.Calls) {
		return false
	}
	for i := range a.Calls {
		if a.Calls[i] != b.Calls[i] {
			return false
		}
	}
	return true
}

// check: every split of in must give want, streamed or not.
func check(t *testing.T, opt Options, in string, want result) {
	t.Helper()
	checkOne(t, opt, in, want)
	opt.Stream = true
	checkOne(t, opt, in, want)
}

// checkBoth: every split of in must give plain without Options.Stream and
// streamed with it.
func checkBoth(t *testing.T, opt Options, in string, plain, streamed result) {
	t.Helper()
	checkOne(t, opt, in, plain)
	opt.Stream = true
	checkOne(t, opt, in, streamed)
}

func checkOne(t *testing.T, opt Options, in string, want result) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, uint64(len(in))))
	for _, pieces := range splits(in, rng) {
		if got := drive(t, opt, pieces); !sameResult(got, want) {
			t.Fatalf("%+v\ninput %q in %d pieces %q\ngot  %+v\nwant %+v", opt, in, len(pieces), pieces, got, want)
		}
	}
}

func TestPlainAndUTF8(t *testing.T) {
	check(t, Options{}, "héllo 世界 🎉!", result{Content: "héllo 世界 🎉!"})
	check(t, Options{}, "a\xffb\xe4\xb8", result{Content: "a\uFFFDb\uFFFD"})
	check(t, Options{}, "", result{})
}

func TestStop(t *testing.T) {
	o := func(stop ...string) Options { return Options{Stop: stop} }
	check(t, o("END"), "abcENDxyz", result{Content: "abc", Stop: "END"})
	check(t, o("END"), "abcEN", result{Content: "abcEN"}) // held back, released at the end
	check(t, o("END"), "ENENDx", result{Content: "EN", Stop: "END"})
	check(t, o("aab"), "aaab", result{Content: "a", Stop: "aab"})
	check(t, o("b", "a"), "xab", result{Content: "x", Stop: "a"}) // earliest match wins
	check(t, o("é!"), "café!", result{Content: "caf", Stop: "é!"})
	check(t, o("世"), "a世界", result{Content: "a", Stop: "世"})
	check(t, o("", "zz"), "abc", result{Content: "abc"})
	// Stop strings apply to the raw text: inside reasoning too, and a tag
	// can be one.
	check(t, Options{Stop: []string{"STOP"}, Reasoning: "deepseek_r1"}, "abSTOPcd</think>x",
		result{Reasoning: "ab", Stop: "STOP"})
	check(t, Options{Stop: []string{"</think>"}, Reasoning: "qwen3"}, "ab</think>x",
		result{Reasoning: "ab", Stop: "</think>"})
	check(t, Options{Stop: []string{"</tool_call>"}, Tools: "hermes"},
		`a<tool_call>{"name":"f","arguments":{}}</tool_call>`,
		result{Content: "a", Calls: []call{{"f", "{}"}}, Stop: "</tool_call>"})
}

func TestIncludeStop(t *testing.T) {
	o := Options{Stop: []string{"END", "!"}, IncludeStop: true}
	check(t, o, "abcENDxyz", result{Content: "abcEND", Stop: "END"})
	check(t, o, "ENENDx", result{Content: "ENEND", Stop: "END"})
	check(t, o, "hi!there", result{Content: "hi!", Stop: "!"})
	check(t, o, "abcEN", result{Content: "abcEN"})
}

// TestMinTokensStop: a stop string counts only once a token after the
// first MinTokens completes it (one Feed per token).
func TestMinTokensStop(t *testing.T) {
	f := func(minTokens int, pieces []string, want result) {
		t.Helper()
		var bs [][]byte
		for _, p := range pieces {
			bs = append(bs, []byte(p))
		}
		if got := drive(t, Options{Stop: []string{"X"}, MinTokens: minTokens}, bs); !sameResult(got, want) {
			t.Fatalf("min %d, %q: got %+v, want %+v", minTokens, pieces, got, want)
		}
	}
	f(0, []string{"a", "X", "b"}, result{Content: "a", Stop: "X"})
	f(2, []string{"a", "X", "b", "X", "c"}, result{Content: "aXb", Stop: "X"})
	f(2, []string{"X", "a", "X"}, result{Content: "Xa", Stop: "X"})
	f(3, []string{"X", "X", "X"}, result{Content: "XXX"}) // never armed: all content
}

func TestReasoning(t *testing.T) {
	for _, name := range []string{"deepseek_r1", "qwen3"} {
		o := Options{Reasoning: name}
		check(t, o, "<think>abc</think>def", result{Reasoning: "abc", Content: "def"})
		check(t, o, "abc</think>\n\ndef", result{Reasoning: "abc", Content: "\n\ndef"})
		check(t, o, "abc", result{Reasoning: "abc"}) // never closed: all reasoning
		check(t, o, "<think>abc", result{Reasoning: "abc"})
		check(t, o, "<thi", result{Reasoning: "<thi"})
		check(t, o, "<thinkx</think>y", result{Reasoning: "<thinkx", Content: "y"})
		check(t, o, "a</thinkb</think>c</think>", result{Reasoning: "a</thinkb", Content: "c</think>"})
		check(t, o, "a</thi", result{Reasoning: "a</thi"})
		check(t, o, "</think>", result{})
		check(t, o, "x<think>y</think>z", result{Reasoning: "x<think>y", Content: "z"})
		off := Options{Reasoning: name, ReasoningOff: true}
		check(t, off, "<think>a</think>b", result{Content: "<think>a</think>b"})
	}
	check(t, Options{}, "<think>a</think>b", result{Content: "<think>a</think>b"})
}

func TestHermes(t *testing.T) {
	o := Options{Tools: "hermes"}
	tc := func(name, args string) string {
		return "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": " + args + "}\n</tool_call>"
	}
	check(t, o, "Let me look.\n"+tc("get_weather", `{"city": "Paris"}`),
		result{Content: "Let me look.\n", Calls: []call{{"get_weather", `{"city": "Paris"}`}}})
	check(t, o, tc("a", `{"x": [1, {"y": "</tool"}]}`)+"\n"+tc("b", `{}`)+"\n",
		result{Calls: []call{{"a", `{"x": [1, {"y": "</tool"}]}`}, {"b", "{}"}}})
	check(t, o, tc("a", "{}")+"\nDone.", result{Content: "\nDone.", Calls: []call{{"a", "{}"}}})
	check(t, o, "a <tool_c b <tool_call", result{Content: "a <tool_c b <tool_call"})
	check(t, o, "x<tool_call>{bad}</tool_call>y", result{Content: "x<tool_call>{bad}</tool_call>y"})
	check(t, o, `<tool_call>{"name": 3}</tool_call>`, result{Content: `<tool_call>{"name": 3}</tool_call>`})
	check(t, o, `<tool_call>{"name": "f", "arguments": "x"}</tool_call>`,
		result{Content: `<tool_call>{"name": "f", "arguments": "x"}</tool_call>`})
	// Malformed at the end of output: content, never lost.
	check(t, o, tc("a", "{}")+`<tool_call>{"name": "f", "argu`,
		result{Content: `<tool_call>{"name": "f", "argu`, Calls: []call{{"a", "{}"}}})
	// Cut short inside the arguments: streamed, the call keeps what was
	// sent; else content.
	checkBoth(t, o, `<tool_call>{"name": "f", "arguments": {"a": "x`,
		result{Content: `<tool_call>{"name": "f", "arguments": {"a": "x`},
		result{Calls: []call{{"f", `{"a": "x`}}})
	// The end tag inside the arguments cuts them.
	checkBoth(t, o, `<tool_call>{"name": "f", "arguments": {"a": 1</tool_call>z`,
		result{Content: `<tool_call>{"name": "f", "arguments": {"a": 1</tool_call>z`},
		result{Content: "z", Calls: []call{{"f", `{"a": 1`}}})
	// Other orders and escapes are not streamed but still parsed whole.
	check(t, o, `<tool_call>{"arguments": {"a": 1}, "name": "f"}</tool_call>`, result{Calls: []call{{"f", `{"a": 1}`}}})
	check(t, o, `<tool_call>{"id": 1, "name": "f", "arguments": {}}</tool_call>`, result{Calls: []call{{"f", `{}`}}})
	check(t, o, `<tool_call>{"name": "f\u0041", "arguments": {"b": "\""}}</tool_call>`, result{Calls: []call{{"fA", `{"b": "\""}`}}})
	// Unterminated but complete: a call (vLLM's `<tool_call>(.*)`).
	check(t, o, `<tool_call>{"name":"f","parameters":{"q":1}}`, result{Calls: []call{{"f", `{"q":1}`}}})
	check(t, o, `<tool_call>{"name":"f"}</tool_call>`, result{Calls: []call{{"f", "{}"}}})
	// Reasoning first, then calls.
	check(t, Options{Reasoning: "qwen3", Tools: "hermes"}, "hmm <tool_call></think>\n\n"+tc("f", `{"a":"é"}`),
		result{Reasoning: "hmm <tool_call>", Content: "\n\n", Calls: []call{{"f", `{"a":"é"}`}}})
	check(t, Options{Tools: "hermes", ToolsOff: true}, tc("f", "{}"), result{Content: tc("f", "{}")})
}

func TestLlama3JSON(t *testing.T) {
	for _, name := range []string{"llama3_json", "llama4_json"} {
		o := Options{Tools: name}
		check(t, o, `{"name": "f", "parameters": {"x": "}{"}}`, result{Calls: []call{{"f", `{"x": "}{"}`}}})
		check(t, o, `<|python_tag|>{"name":"a","arguments":{}}; {"name":"b","arguments":{"y":[1,2]}}`,
			result{Calls: []call{{"a", "{}"}, {"b", `{"y":[1,2]}`}}})
		check(t, o, "\n "+`{"name":"a","parameters":{}} ;`, result{Calls: []call{{"a", "{}"}}})
		check(t, o, "Hello {x}", result{Content: "Hello {x}"})
		check(t, o, `{"answer": 42}`, result{Content: `{"answer": 42}`})
		check(t, o, `{"name":"f"`, result{Content: `{"name":"f"`})
		check(t, o, `<|python_tag|>{"name":"f"`, result{Content: `{"name":"f"`})
		check(t, o, `<|python_tag|>hi`, result{Content: `hi`})
		check(t, o, " <|python_tag|> print(1)", result{Content: "  print(1)"})
		check(t, o, `<|python`, result{Content: `<|python`})
		check(t, o, `{"name":"f","parameters":{}} and more`, result{Content: " and more", Calls: []call{{"f", "{}"}}})
		check(t, o, `{"name":"f","parameters":{}}; {"name":`, result{Content: `; {"name":`, Calls: []call{{"f", "{}"}}})
		// Streamed, the call is out before the second arguments come.
		checkBoth(t, o, `{"name":"f","parameters":{},"arguments":{}}`,
			result{Content: `{"name":"f","parameters":{},"arguments":{}}`}, result{Calls: []call{{"f", "{}"}}})
	}
}

func TestMistral(t *testing.T) {
	o := Options{Tools: "mistral"}
	check(t, o, `Sure.[TOOL_CALLS] [{"name": "f", "arguments": {"a": 1}}, {"name": "g"}]`,
		result{Content: "Sure.", Calls: []call{{"f", `{"a": 1}`}, {"g", "{}"}}})
	check(t, o, `[TOOL_CALLS]f[ARGS]{"a": "[TOOL_CALLS]"}[TOOL_CALLS]g[ARGS]{}`,
		result{Calls: []call{{"f", `{"a": "[TOOL_CALLS]"}`}, {"g", "{}"}}})
	check(t, o, `[TOOL_CALLS]f{"a": 1}`, result{Calls: []call{{"f", `{"a": 1}`}}})
	// Cut short or malformed: content, but a streamed call keeps what was
	// sent.
	checkBoth(t, o, `[TOOL_CALLS]f[ARGS]{"a": `, result{Content: `[TOOL_CALLS]f[ARGS]{"a": `},
		result{Calls: []call{{"f", `{"a": `}}})
	checkBoth(t, o, `[TOOL_CALLS]f[ARGS]{"a" 1}x`, result{Content: `[TOOL_CALLS]f[ARGS]{"a" 1}x`},
		result{Content: "x", Calls: []call{{"f", `{"a" 1}`}}})
	checkBoth(t, o, `[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}, {"name": 2}]`,
		result{Content: `[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}, {"name": 2}]`},
		result{Calls: []call{{"f", `{"a": 1}`}}})
	checkBoth(t, o, `[TOOL_CALLS][{"name": "f", "arguments": {"a": [1, `,
		result{Content: `[TOOL_CALLS][{"name": "f", "arguments": {"a": [1, `},
		result{Calls: []call{{"f", `{"a": [1, `}}})
	// Arguments before the name: not streamed, whole at the end.
	check(t, o, `[TOOL_CALLS][{"arguments": {"a": 1}, "name": "f"}, {"name": "g", "arguments": {}}]`,
		result{Calls: []call{{"f", `{"a": 1}`}, {"g", "{}"}}})
	check(t, o, `[TOOL_CALLS][{"name": 1}]x`, result{Content: `[TOOL_CALLS][{"name": 1}]x`})
	check(t, o, `[TOOL_CALLS]`, result{Content: `[TOOL_CALLS]`})
	check(t, o, `a [TOOL_ b`, result{Content: `a [TOOL_ b`})
	check(t, o, `[TOOL_CALLS]no call here`, result{Content: `[TOOL_CALLS]no call here`})
	long := `[TOOL_CALLS]` + strings.Repeat("n", maxToolNameBytes+1) + `{}`
	check(t, o, long, result{Content: long})
}

func TestUnknownParser(t *testing.T) {
	for _, opt := range []Options{{Reasoning: "nope"}, {Tools: "nope"}} {
		_, err := NewParser(opt)
		if !errors.Is(err, ErrUnknownParser) {
			t.Fatalf("%+v: err %v", opt, err)
		}
		if !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "known: ") {
			t.Fatalf("error %q should name the parser and the known ones", err)
		}
	}
	if got := strings.Join(ReasoningParsers(), ","); got != "deepseek_r1,qwen3" {
		t.Fatalf("ReasoningParsers %s", got)
	}
	if got := strings.Join(ToolParsers(), ","); got != "hermes,llama3_json,llama4_json,mistral" {
		t.Fatalf("ToolParsers %s", got)
	}
}

func TestFeedAfterEnd(t *testing.T) {
	p, _ := NewParser(Options{Stop: []string{"x"}})
	evs, stopped := p.Feed(nil, []byte("axb"))
	if !stopped || len(evs) != 1 || string(evs[0].Text) != "a" {
		t.Fatalf("%v %+v", stopped, evs)
	}
	if evs, stopped = p.Feed(nil, []byte("c")); !stopped || len(evs) != 0 {
		t.Fatalf("after stop: %v %+v", stopped, evs)
	}
	if evs = p.Finish(nil); len(evs) != 0 || p.Content() != "a" {
		t.Fatalf("finish: %+v %q", evs, p.Content())
	}
	if evs = p.Finish(nil); len(evs) != 0 {
		t.Fatal("second Finish emitted")
	}
	// Reset reuses the parser.
	if err := p.Reset(Options{Reasoning: "qwen3"}); err != nil {
		t.Fatal(err)
	}
	p.Feed(nil, []byte("r</think>c"))
	p.Finish(nil)
	if p.Reasoning() != "r" || p.Content() != "c" || p.Stopped() {
		t.Fatalf("after Reset: %q %q %v", p.Reasoning(), p.Content(), p.Stopped())
	}
}

// TestZeroAllocs: a reused Parser handles a whole plain-text choice, with
// stop strings and both parsers configured, without allocating.
func TestZeroAllocs(t *testing.T) {
	for _, opt := range []Options{
		{Stop: []string{"STOP", "\n\nUser:"}, Reasoning: "qwen3", Tools: "hermes"},
		// vLLM's min_tokens and include_stop_str_in_output cost nothing either.
		{Stop: []string{"STOP", "said"}, Reasoning: "qwen3", Tools: "hermes", MinTokens: 30, IncludeStop: true},
	} {
		zeroAllocs(t, opt)
	}
}

func zeroAllocs(t *testing.T, opt Options) {
	p, _ := NewParser(opt)
	tokens := tokenize("I should think about <this> carefully. 世界</think>\n\nThe answer: <b>42</b>, said the model; "+
		strings.Repeat("more text é ", 20), 3)
	var evs []Event
	run := func() {
		if err := p.Reset(opt); err != nil {
			t.Fatal(err)
		}
		for _, tok := range tokens {
			evs, _ = p.Feed(evs[:0], tok)
		}
		evs = p.Finish(evs[:0])
	}
	run()
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Fatalf("%v allocations per choice", n)
	}
}

// tokenize cuts s into n-byte pieces, like a tokenizer that splits
// characters.
func tokenize(s string, n int) [][]byte {
	var out [][]byte
	for b := []byte(s); len(b) > 0; {
		k := min(n, len(b))
		out = append(out, b[:k])
		b = b[k:]
	}
	return out
}
