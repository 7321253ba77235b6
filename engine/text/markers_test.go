package text

import "testing"

// TestMarkers: each parser's markers, and which kinds of token reach the
// parser for which request.
func TestMarkers(t *testing.T) {
	texts := func(ms []Marker) (out []string) {
		for _, m := range ms {
			out = append(out, m.Text)
		}
		return out
	}
	for _, c := range []struct {
		reasoning, tools string
		want             []string
	}{
		{"", "", nil},
		{"qwen3", "", []string{"<think>", "</think>"}},
		{"", "hermes", []string{"<tool_call>", "</tool_call>"}},
		{"deepseek_r1", "llama3_json", []string{"<think>", "</think>", "<|python_tag|>"}},
		{"", "mistral", []string{"[TOOL_CALLS]", "[ARGS]"}},
		{"nope", "nope", nil},
	} {
		got := texts(Markers(c.reasoning, c.tools))
		if len(got) != len(c.want) {
			t.Fatalf("%q %q: %q", c.reasoning, c.tools, got)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("%q %q: %q", c.reasoning, c.tools, got)
			}
		}
	}
	ms := Markers("qwen3", "mistral")
	if MarkerKind(ms, []byte("[TOOL_CALLS]")) != TokenToolMarker || MarkerKind(ms, []byte("</think>")) != TokenThinkMarker ||
		MarkerKind(ms, []byte("<|im_end|>")) != TokenSpecial {
		t.Fatal("MarkerKind")
	}
	on := &Options{Reasoning: "qwen3", Tools: "mistral"}
	off := &Options{Reasoning: "qwen3", Tools: "mistral", ToolsOff: true, ReasoningOff: true}
	for _, c := range []struct {
		k          uint8
		opt        *Options
		keep, want bool
	}{
		{TokenText, off, false, true},
		{TokenSpecial, on, false, false},
		{TokenSpecial, on, true, true},
		{TokenToolMarker, on, false, true},
		{TokenToolMarker, off, false, false},
		{TokenToolMarker, off, true, true},
		{TokenThinkMarker, on, false, true},
		{TokenThinkMarker, off, false, false},
		{TokenThinkMarker, &Options{Tools: "mistral"}, false, false},
	} {
		if got := KeepToken(c.k, c.opt, c.keep); got != c.want {
			t.Errorf("KeepToken(%d, %+v, %v) = %v", c.k, *c.opt, c.keep, got)
		}
	}
}
