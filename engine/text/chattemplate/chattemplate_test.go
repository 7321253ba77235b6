package chattemplate

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"encoding/json"
	"github.com/vajra-go/vajra/engine"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fixedNow is the clock of every test render.
func fixedNow() time.Time { return time.Date(2025, time.March, 7, 14, 5, 9, 0, time.UTC) }

func parseFile(t *testing.T, name string, opts Options) *Template {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	opts.Now = fixedNow
	tm, err := Parse(string(src), opts)
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return tm
}

// checkGolden compares got with testdata/name, or rewrites it under -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s: rendered prompt differs from the golden file\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

func boolPtr(b bool) *bool { return &b }

// TestRenderGolden renders real models' templates (copied from llama.cpp's
// models/templates, which takes them from the models' tokenizer_config.json)
// and compares with prompts checked by hand against the template text.
func TestRenderGolden(t *testing.T) {
	cases := []struct {
		name     string
		template string
		opts     Options
		msgs     []engine.Message
		tools    []engine.Tool
		render   RenderOptions
	}{
		{"qwen2.5-tools", "qwen2.5-7b-instruct.jinja", Options{EOSToken: "<|im_end|>"}, conversation(), weatherTools(), RenderOptions{AddGenerationPrompt: true}},
		{"qwen2.5-default-system", "qwen2.5-7b-instruct.jinja", Options{EOSToken: "<|im_end|>"}, conversation()[1:2], nil, RenderOptions{AddGenerationPrompt: true}},
		{"qwen3-tools-nothink", "qwen3.jinja", Options{EOSToken: "<|im_end|>"}, conversation(), weatherTools(), RenderOptions{AddGenerationPrompt: true, EnableThinking: boolPtr(false)}},
		{"qwen3-reasoning-think", "qwen3.jinja", Options{EOSToken: "<|im_end|>"}, reasoningConversation(), nil, RenderOptions{AddGenerationPrompt: true, EnableThinking: boolPtr(true)}},
		{"llama3.1-tools", "llama-3.1-8b-instruct.jinja", Options{BOSToken: "<|begin_of_text|>", EOSToken: "<|eot_id|>"}, conversation(), weatherTools(), RenderOptions{AddGenerationPrompt: true, Extra: map[string]any{"date_string": "07 Mar 2025"}}},
		{"llama3.1-plain", "llama-3.1-8b-instruct.jinja", Options{BOSToken: "<|begin_of_text|>", EOSToken: "<|eot_id|>"}, conversation()[:2], nil, RenderOptions{AddGenerationPrompt: true}},
		{"mistral-nemo-tools", "mistral-nemo-instruct-2407.jinja", Options{BOSToken: "<s>", EOSToken: "</s>"}, conversation(), weatherTools(), RenderOptions{AddGenerationPrompt: true}},
		{"deepseek-r1-distill", "deepseek-r1-distill-qwen.jinja", Options{BOSToken: "<｜begin▁of▁sentence｜>", EOSToken: "<｜end▁of▁sentence｜>"}, conversation(), weatherTools(), RenderOptions{AddGenerationPrompt: true}},
		{"chatml", "chatml.jinja", Options{}, conversation()[:2], nil, RenderOptions{AddGenerationPrompt: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tm := parseFile(t, c.template, c.opts)
			got, err := tm.Render(c.msgs, c.tools, c.render)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			checkGolden(t, c.name+".golden", got)
		})
	}
}

// reasoningConversation has an assistant turn with kept reasoning after the
// last user query (Qwen3 shows it there), a tool call and its result.
func reasoningConversation() []engine.Message {
	return []engine.Message{
		{Role: "user", Content: "Weather in Paris?"},
		{Role: "assistant", Reasoning: "\nI need the weather tool.\n", ToolCalls: []engine.ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
		{Role: "tool", Content: "sunny"},
	}
}

// TestChatMLFallback checks the fallback against the literal format
// llama.cpp uses, and that the testdata copy is the same template.
func TestChatMLFallback(t *testing.T) {
	got, err := ChatML(Options{}).Render(conversation()[:2], nil, RenderOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n" +
		"<|im_start|>user\nWhat's the weather in Paris? Answer in <celsius> & be brief.<|im_end|>\n" +
		"<|im_start|>assistant\n"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	src, err := os.ReadFile("testdata/chatml.jinja")
	if err != nil {
		t.Fatal(err)
	}
	if string(src) != ChatMLSource {
		t.Error("testdata/chatml.jinja differs from ChatMLSource")
	}
	got, err = ChatML(Options{}).Render(conversation()[:2], nil, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSuffix(want, "<|im_start|>assistant\n"); got != want {
		t.Errorf("without generation prompt: got %q\nwant %q", got, want)
	}
}

// TestQwen3ThinkingSwitch: enable_thinking=false adds the empty think block
// after the generation prompt; true or unset does not.
func TestQwen3ThinkingSwitch(t *testing.T) {
	tm := parseFile(t, "qwen3.jinja", Options{})
	msgs := []engine.Message{{Role: "user", Content: "hi"}}
	f := func(think *bool, want string) {
		t.Helper()
		got, err := tm.Render(msgs, nil, RenderOptions{AddGenerationPrompt: true, EnableThinking: think})
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("enable_thinking=%v: got %q, want %q", think, got, want)
		}
	}
	base := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
	f(boolPtr(false), base+"<think>\n\n</think>\n\n")
	f(boolPtr(true), base)
	f(nil, base)
	// chat_template_kwargs can set it too; the typed option wins.
	got, err := tm.Render(msgs, nil, RenderOptions{AddGenerationPrompt: true, Extra: map[string]any{"enable_thinking": false}})
	if err != nil || got != base+"<think>\n\n</think>\n\n" {
		t.Errorf("Extra enable_thinking=false: got %q, %v", got, err)
	}
	got, err = tm.Render(msgs, nil, RenderOptions{AddGenerationPrompt: true, EnableThinking: boolPtr(true), Extra: map[string]any{"enable_thinking": false}})
	if err != nil || got != base {
		t.Errorf("EnableThinking=true over Extra false: got %q, %v", got, err)
	}
}

// TestRaiseException: a template's raise_exception becomes a *RaiseError
// carrying its message.
func TestRaiseException(t *testing.T) {
	f := func(template string, msgs []engine.Message, want string) {
		t.Helper()
		tm := parseFile(t, template, Options{})
		_, err := tm.Render(msgs, weatherTools(), RenderOptions{AddGenerationPrompt: true})
		if !errors.Is(err, ErrRaised) {
			t.Fatalf("%s: err = %v, want ErrRaised", template, err)
		}
		var re *RaiseError
		if !errors.As(err, &re) || re.Message != want {
			t.Fatalf("%s: err = %#v, want message %q", template, err, want)
		}
	}
	f("mistral-nemo-instruct-2407.jinja", []engine.Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}},
		"After the optional system message, conversation roles must alternate user/assistant/user/assistant/...")
	f("llama-3.1-8b-instruct.jinja", []engine.Message{
		{Role: "user", Content: "a"},
		{Role: "assistant", ToolCalls: []engine.ToolCall{{Name: "x", Arguments: "{}"}, {Name: "y"}}},
	}, "This model only supports single tool-calls at once!")
	// raise_exception inside a macro, with a computed message.
	tm, err := Parse(`{% macro check(m) %}{% if m.role == 'bad' %}{{ raise_exception('role ' + m.role + ' refused') }}{% endif %}{% endmacro %}{% for m in messages %}{{ check(m) }}{% endfor %}`, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tm.Render([]engine.Message{{Role: "bad"}}, nil, RenderOptions{})
	var re *RaiseError
	if !errors.As(err, &re) || re.Message != "role bad refused" {
		t.Fatalf("macro: err = %v", err)
	}
}

func TestErrors(t *testing.T) {
	if _, err := Parse("{% if x %}", Options{}); !errors.Is(err, ErrSyntax) {
		t.Errorf("unclosed if: %v, want ErrSyntax", err)
	}
	if _, err := Parse("{{ x ", Options{}); !errors.Is(err, ErrSyntax) {
		t.Errorf("unclosed tag: %v, want ErrSyntax", err)
	}
	tm := ChatML(Options{})
	bad := []engine.Message{{Role: "assistant", ToolCalls: []engine.ToolCall{{Name: "f", Arguments: `{"a":`}}}}
	if _, err := tm.Render(bad, nil, RenderOptions{}); !errors.Is(err, ErrToolArguments) {
		t.Errorf("bad arguments: %v, want ErrToolArguments", err)
	}
	badTool := []engine.Tool{{Name: "f", Parameters: []byte(`{"type": "object"} x`)}}
	if _, err := tm.Render(nil, badTool, RenderOptions{}); !errors.Is(err, ErrToolArguments) {
		t.Errorf("bad parameters: %v, want ErrToolArguments", err)
	}
	tm, err := Parse("{{ x | nosuchfilter }}", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Render(nil, nil, RenderOptions{}); !errors.Is(err, ErrRender) {
		t.Errorf("unknown filter: %v, want ErrRender", err)
	}
	if _, err := ChatML(Options{}).Render(nil, nil, RenderOptions{Extra: map[string]any{"k": struct{}{}}}); !errors.Is(err, ErrRender) {
		t.Errorf("bad kwargs: %v, want ErrRender", err)
	}
}

// TestTemplateValues checks the shape of what a template sees, through
// tojson of the whole value.
func TestTemplateValues(t *testing.T) {
	f := func(src string, msgs []engine.Message, tools []engine.Tool, o RenderOptions, want string) {
		t.Helper()
		tm, err := Parse(src, Options{BOSToken: "<s>", EOSToken: "</s>", Now: fixedNow})
		if err != nil {
			t.Fatalf("Parse(%q): %v", src, err)
		}
		got, err := tm.Render(msgs, tools, o)
		if err != nil {
			t.Fatalf("Render(%q): %v", src, err)
		}
		if got != want {
			t.Errorf("%q:\n got %s\nwant %s", src, got, want)
		}
	}
	f(`{{ messages | tojson }}`, conversation()[2:4], nil, RenderOptions{},
		`[{"role": "assistant", "content": "", "tool_calls": [{"id": "call12345", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "days": 1, "ratio": 1.0}}}]}, {"role": "tool", "content": "{\"temperature\": 18.5, \"condition\": \"sunny\"}", "tool_call_id": "call12345"}]`)
	f(`{{ messages | tojson }}`, []engine.Message{{Role: "assistant", Name: "bot", Content: "x", Reasoning: "r", ToolCalls: []engine.ToolCall{{Name: "noargs"}}}}, nil, RenderOptions{},
		`[{"role": "assistant", "content": "x", "name": "bot", "reasoning_content": "r", "tool_calls": [{"type": "function", "function": {"name": "noargs", "arguments": {}}}]}]`)
	f(`{{ tools | tojson }}`, nil, []engine.Tool{{Name: "a"}, {Name: "b", Description: "d", Parameters: []byte(`{"z": 1, "a": [true, null]}`)}}, RenderOptions{},
		`[{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "b", "description": "d", "parameters": {"z": 1, "a": [true, null]}}}]`)
	f(`{{ tools is none }} {{ tools is defined }} {{ enable_thinking is defined }}`, nil, nil, RenderOptions{}, `True True False`)
	f(`{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}`, nil, nil, RenderOptions{AddGenerationPrompt: true}, `<s>|</s>|True`)
	f(`{{ strftime_now("%d %b %Y") }} {{ strftime_now("%-d %B %Y, %A %I:%M:%S %p %j %%") }}`, nil, nil, RenderOptions{}, `07 Mar 2025 7 March 2025, Friday 02:05:09 PM 066 %`)
	f(`{{ k | tojson }} {{ n }} {{ m.b }}{{ m.a }}`, nil, nil, RenderOptions{Extra: map[string]any{"k": []any{1.0, 2.5, "x", nil}, "n": 3.0, "m": map[string]any{"b": "B", "a": "A"}}}, `[1, 2.5, "x", null] 3 BA`)
	// chat_template_kwargs do not replace the conversation.
	f(`{{ messages | length }}`, conversation(), nil, RenderOptions{Extra: map[string]any{"messages": []any{}}}, `6`)
}

// TestTojson checks the replacement tojson against Python's json.dumps.
func TestTojson(t *testing.T) {
	f := func(expr, value, want string) {
		t.Helper()
		tm, err := Parse("{{ v | "+expr+" }}", Options{})
		if err != nil {
			t.Fatal(err)
		}
		raw := []byte(value)
		got, err := tm.Render(nil, nil, RenderOptions{Extra: map[string]any{"v": rawJSON(raw)}})
		if err != nil {
			t.Fatalf("%s of %s: %v", expr, value, err)
		}
		if got != want {
			t.Errorf("%s of %s:\n got %s\nwant %s", expr, value, got, want)
		}
	}
	f("tojson", `{"b": [1, 2.0, -0.5, 1e-5, 1e16, 123456789012.5], "a": {}}`, `{"b": [1, 2.0, -0.5, 1e-05, 1e+16, 123456789012.5], "a": {}}`)
	f("tojson", `"<a> & 'b' \"c\" \\ \n\t\b\f\u0001 é 😀 \u2028"`, `"<a> & 'b' \"c\" \\ \n\t\b\f\u0001 é 😀 `+"\u2028"+`"`)
	f("tojson(ensure_ascii=true)", `"é😀"`, `"\u00e9\ud83d\ude00"`)
	f("tojson(indent=2)", `{"z": [1, {"y": null}], "e": [], "o": {}}`, "{\n  \"z\": [\n    1,\n    {\n      \"y\": null\n    }\n  ],\n  \"e\": [],\n  \"o\": {}\n}")
	f("tojson(indent=4, sort_keys=true)", `{"b": 1, "a": "<x>"}`, "{\n    \"a\": \"<x>\",\n    \"b\": 1\n}")
	f("tojson(separators=(',', ':'))", `{"a": [1, 2]}`, `{"a":[1,2]}`)
	f("tojson", `[true, false, null]`, `[true, false, null]`)
	// "tojson" in a string literal or as part of a longer name is left alone.
	tm, err := Parse(`{{ '| tojson' }}{% raw %}{{ x | tojson }}{% endraw %}{# | tojson #}`, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tm.Render(nil, nil, RenderOptions{})
	if err != nil || got != `| tojson{{ x | tojson }}` {
		t.Errorf("literal and raw: got %q, %v", got, err)
	}
}

// rawJSON passes a JSON value through chat_template_kwargs with its order.
type rawJSON = json.RawMessage

// TestConcurrentRender renders one template from many goroutines (run
// with -race) and checks every result is the same.
func TestConcurrentRender(t *testing.T) {
	tm := parseFile(t, "qwen3.jinja", Options{})
	want, err := tm.Render(conversation(), weatherTools(), RenderOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				got, err := tm.Render(conversation(), weatherTools(), RenderOptions{AddGenerationPrompt: true})
				if err != nil || got != want {
					t.Errorf("concurrent render differs: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkRenderQwen3(b *testing.B) {
	src, err := os.ReadFile("testdata/qwen3.jinja")
	if err != nil {
		b.Fatal(err)
	}
	tm, err := Parse(string(src), Options{})
	if err != nil {
		b.Fatal(err)
	}
	msgs, tools := conversation(), weatherTools()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tm.Render(msgs, tools, RenderOptions{AddGenerationPrompt: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRenderRequestPrefill: add_generation_prompt false leaves the
// assistant header out; continue_final_message renders the final
// assistant turn open (its end-of-turn cut), as transformers does.
func TestRenderRequestPrefill(t *testing.T) {
	tmpl := ChatML(Options{})
	msgs := []engine.Message{{Role: "user", Content: "Count"}, {Role: "assistant", Content: "1, 2, "}}
	f := func(req engine.Request, want string) {
		t.Helper()
		got, _, err := tmpl.RenderRequest(&req)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("got %q\nwant %q", got, want)
		}
	}
	user := "<|im_start|>user\nCount<|im_end|>\n"
	f(engine.Request{Messages: msgs[:1]}, user+"<|im_start|>assistant\n")
	f(engine.Request{Messages: msgs[:1], NoGenerationPrompt: true}, user)
	f(engine.Request{Messages: msgs, NoGenerationPrompt: true}, user+"<|im_start|>assistant\n1, 2, <|im_end|>\n")
	f(engine.Request{Messages: msgs, NoGenerationPrompt: true, ContinueFinalMessage: true}, user+"<|im_start|>assistant\n1, 2, ")

	c := func(rendered, final, want string, wantOK bool) {
		t.Helper()
		if got, ok := ContinueFinal(rendered, final); got != want || ok != wantOK {
			t.Errorf("ContinueFinal(%q, %q) = %q, %v; want %q, %v", rendered, final, got, ok, want, wantOK)
		}
	}
	c("<a>x y <e>", "x y ", "<a>x y ", true) // trailing space kept where the template kept it
	c("<a>x y<e>", "x y ", "<a>x y", true)   // a template that trimmed it
	c("<a>ab<e><a>ab<e>", "ab", "<a>ab<e><a>ab", true)
	c("<a>ab<e>", "zz", "", false)
}
