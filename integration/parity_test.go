package integration_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine/llama"
	"github.com/vajra-go/vajra/internal/llamaserver"
	"github.com/vajra-go/vajra/internal/realmodel"
)

// Parity with llama-server (llama.cpp's own server, the same build of the
// pinned release as the libraries Vajra loads: `make llama`) on the real
// model: greedy output token
// for token, prompt token counts, and the chat template's rendering, for
// chat (single and multi-turn, system prompts, tools), completions and
// Messages. Both run without prompt caching and one sequence at a time:
// llama.cpp's logits depend in the third decimal on how a prompt is split
// into batches (a cached prefix computes the rest alone), which flips
// near-ties, so each prompt is computed whole on both sides.

// parityMaxTokens is each case's output budget.
const parityMaxTokens = 24

type chatMsg = map[string]any

var parityWeather = []any{map[string]any{"type": "function", "function": map[string]any{
	"name": "get_weather", "description": "Get the current weather in a city",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
}}}

// parityChats are the chat conversations (also sent as Messages where they
// have no tools).
var parityChats = []struct {
	name  string
	msgs  []chatMsg
	tools []any
}{
	{"capital", []chatMsg{{"role": "user", "content": "What is the capital of France?"}}, nil},
	{"haiku", []chatMsg{{"role": "user", "content": "Write a haiku about the sea."}}, nil},
	{"math", []chatMsg{{"role": "user", "content": "What is 12 times 7?"}}, nil},
	{"list", []chatMsg{{"role": "user", "content": "List three primary colours."}}, nil},
	{"code", []chatMsg{{"role": "user", "content": "Write a Python function that adds two numbers."}}, nil},
	{"unicode", []chatMsg{{"role": "user", "content": "Traduis en anglais : « Où est la gare ? » 🚉"}}, nil},
	{"system", []chatMsg{{"role": "system", "content": "You are a pirate. Answer like one."}, {"role": "user", "content": "How are you today?"}}, nil},
	{"system-brief", []chatMsg{{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": "What colour is the sky?"}}, nil},
	{"system-long", []chatMsg{{"role": "system", "content": "You are a helpful assistant that explains science to children, using simple words and short sentences."}, {"role": "user", "content": "Why is the sky blue?"}}, nil},
	{"multi-turn", []chatMsg{
		{"role": "user", "content": "My name is Ada."},
		{"role": "assistant", "content": "Nice to meet you, Ada!"},
		{"role": "user", "content": "What is my name?"}}, nil},
	{"multi-turn-system", []chatMsg{
		{"role": "system", "content": "You are terse."},
		{"role": "user", "content": "Name a fruit."},
		{"role": "assistant", "content": "Apple."},
		{"role": "user", "content": "Another one."}}, nil},
	{"multi-turn-long", []chatMsg{
		{"role": "user", "content": "Let's count. One."},
		{"role": "assistant", "content": "Two."},
		{"role": "user", "content": "Three."},
		{"role": "assistant", "content": "Four."},
		{"role": "user", "content": "Five."}}, nil},
	{"tools", []chatMsg{{"role": "user", "content": "What is the weather in Paris?"}}, parityWeather},
	{"tools-system", []chatMsg{{"role": "system", "content": "Use the tools when they help."}, {"role": "user", "content": "Is it raining in Oslo?"}}, parityWeather},
	{"tools-result", []chatMsg{
		{"role": "user", "content": "What is the weather in Paris?"},
		{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
			"function": map[string]any{"name": "get_weather", "arguments": `{"city":"Paris"}`}}}},
		{"role": "tool", "tool_call_id": "call_1", "content": `{"temperature":18,"sky":"cloudy"}`}}, parityWeather},
	{"tools-es", []chatMsg{{"role": "user", "content": "¿Qué tiempo hace en Madrid?"}}, parityWeather},
	// Other languages.
	{"fr", []chatMsg{{"role": "user", "content": "Quelle est la plus grande ville de France ?"}}, nil},
	{"fr-system", []chatMsg{{"role": "system", "content": "Tu es un assistant utile. Réponds en français."}, {"role": "user", "content": "Qu'est-ce qu'un arc-en-ciel ?"}}, nil},
	{"de", []chatMsg{{"role": "user", "content": "Was ist die Hauptstadt von Deutschland?"}}, nil},
	{"de-multi-turn", []chatMsg{
		{"role": "user", "content": "Ich heiße Jürgen."},
		{"role": "assistant", "content": "Hallo Jürgen, schön dich kennenzulernen!"},
		{"role": "user", "content": "Wie heiße ich?"}}, nil},
	{"es", []chatMsg{{"role": "user", "content": "¿Cuál es la capital de España?"}}, nil},
	{"es-system", []chatMsg{{"role": "system", "content": "Responde siempre en español."}, {"role": "user", "content": "Dame una receta sencilla de tortilla."}}, nil},
	{"zh", []chatMsg{{"role": "user", "content": "中国的首都是哪里？"}}, nil},
	{"zh-system", []chatMsg{{"role": "system", "content": "请用中文回答。"}, {"role": "user", "content": "天空为什么是蓝色的？"}}, nil},
	{"ja", []chatMsg{{"role": "user", "content": "日本の首都はどこですか？"}}, nil},
	{"ru", []chatMsg{{"role": "user", "content": "Какая столица России?"}}, nil},
}

// parityPrompts are the completions prompts.
var parityPrompts = []string{
	"The capital of France is",
	"Once upon a time",
	"def fibonacci(n):",
	"1, 2, 3, 4,",
	"The quick brown fox",
	"Q: What is the boiling point of water?\nA:",
	"<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
	"In 1969, the first",
	"Les mots français les plus courants sont",
	"import numpy as np\n",
	"Die Hauptstadt von Deutschland ist",
	"Había una vez un",
	"北京是中国的",
	"東京は日本の",
	"Москва — это",
	"Translate to French: Good morning, how are you? ->",
}

// parityMinPrompts is the least number of prompts (parityChats and
// parityPrompts together) the comparison must cover.
const parityMinPrompts = 30

func postObject(t *testing.T, url string, body any) map[string]any {
	t.Helper()
	m, err := tryPost(url, body)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// tryPost POSTs body as JSON to url and decodes the 200 answer's object.
// The client's 60 s timeout is a stall detector: a parity case (24
// tokens of a 135M model) takes 1-3 s on a loaded two-core machine.
func tryPost(url string, body any) (map[string]any, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer test-key")
	c := http.Client{Timeout: 60 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || resp.StatusCode != 200 {
		return nil, fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, raw)
	}
	return m, nil
}

// postBoth POSTs body to path on Vajra (vbase) and llama-server (lbase)
// at the same time (each server still runs one sequence at a time, so
// nothing of the computation changes; the two take turns on the cores
// instead of the test waiting for each in turn).
func postBoth(t *testing.T, vbase, lbase, path string, body any) (v, l map[string]any) {
	t.Helper()
	var lerr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		l, lerr = tryPost(lbase+path, body)
	}()
	v, verr := tryPost(vbase+path, body)
	<-done
	if verr != nil || lerr != nil {
		t.Fatalf("vajra: %v; llama-server: %v", verr, lerr)
	}
	return v, l
}

// dig walks m along keys (strings index objects, ints arrays).
func dig(m any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			o, _ := m.(map[string]any)
			m = o[k]
		case int:
			a, _ := m.([]any)
			if k >= len(a) {
				return nil
			}
			m = a[k]
		}
	}
	return m
}

// logprobBytes is the bytes of a chat choice's logprobs entries, all
// together. Vajra gives one entry per token, as OpenAI and vLLM do (a
// character split across tokens has entries of its partial bytes);
// llama-server merges the tokens of such a character into one entry. The
// bytes are the same.
func logprobBytes(res map[string]any) []byte {
	var out []byte
	content, _ := dig(res, "choices", 0, "logprobs", "content").([]any)
	for _, c := range content {
		bs, _ := dig(c, "bytes").([]any)
		for _, b := range bs {
			f, _ := b.(float64)
			out = append(out, byte(f))
		}
	}
	return out
}

// trimPartial is b without an incomplete UTF-8 character at its end, whose
// tokens llama-server leaves out of the logprobs (see text).
func trimPartial(b []byte) string {
	for k := 0; k < utf8.UTFMax && len(b) > 0 && !utf8.Valid(b); k++ {
		b = b[:len(b)-1]
	}
	return string(b)
}

// text is a response's text without an incomplete UTF-8 character at its
// end (a choice cut by max_tokens inside one): Vajra renders those bytes
// as U+FFFD, as vLLM does; llama-server drops them.
func text(v any) any {
	s, ok := v.(string)
	if !ok {
		return v
	}
	return strings.TrimRight(s, "\uFFFD")
}

// toolCalls is a chat response's tool calls as "name arguments" (their
// ids are each server's own).
func toolCalls(res map[string]any) []string {
	var out []string
	calls, _ := dig(res, "choices", 0, "message", "tool_calls").([]any)
	for _, c := range calls {
		name, _ := dig(c, "function", "name").(string)
		args, _ := dig(c, "function", "arguments").(string)
		out = append(out, name+" "+args)
	}
	return out
}

// TestLlamaServerParity compares Vajra in process (the llama engine on the
// libraries the default search finds: the pinned release built for this
// machine by `make llama`, .llama/server/bin) against llama-server of the
// same build, started on a loopback port, on every case of parityChats
// (as chat completions, and as Messages where they have no tools) and
// parityPrompts. Greedy, each prompt computed whole (see above), one
// sequence at a time on one thread on both sides, so the two run the same
// computation and must give the same tokens. With node-llama-cpp's
// prebuilt libraries (VAJRA_LLAMA_LIB=.llama/linux-x64) on a Sapphire
// Rapids machine the texts of 38 of the 64 cases differed (measured),
// "What is the capital of France?" from the first token on; on an AMD
// EPYC with AVX-512 (VNNI, BF16, no AMX) 25 of the 64 differed (16 of the
// 42 prompts; measured 2026-12-07), where the native build passes all 64;
// on an AVX2 machine they agree with the native build to about 0.07 in
// logprob on the France chat (engine/llama/install.sh). SmolLM2's chat template ignores tools (its
// rendering has none), so the tool cases compare the rendering and the
// text; the model calls no tool.
func TestLlamaServerParity(t *testing.T) {
	if testing.Short() {
		t.Skip("two servers on the real model")
	}
	model := realmodel.Need(t)
	bin := llamaserver.Need(t)
	ls := llamaserver.Start(t, model, "-np", "1", "-c", "2048", "-t", "1", "--jinja", "--cache-reuse", "0")
	_, vbase := startReal(t, func(cfg *vajra.Config) { llamaConfig(cfg).PrefixCaching = false })
	lib, _ := llama.FindLibDir()
	t.Logf("Vajra's llama.cpp libraries: %s; llama-server: %s", lib, bin)
	lbase := ls.URL()
	cases := 0
	diff := func(kind, name string, v, l any) {
		t.Helper()
		if !reflect.DeepEqual(v, l) {
			t.Errorf("%s %s:\n  vajra        %#v\n  llama-server %#v", kind, name, v, l)
		}
	}
	for _, c := range parityChats {
		body := map[string]any{"model": realModelName, "messages": c.msgs, "max_tokens": parityMaxTokens, "temperature": 0,
			"logprobs": true, "cache_prompt": false}
		if c.tools != nil {
			body["tools"] = c.tools
		}
		v, l := postBoth(t, vbase, lbase, "/v1/chat/completions", body)
		cases++
		diff("chat text", c.name, text(dig(v, "choices", 0, "message", "content")), text(dig(l, "choices", 0, "message", "content")))
		diff("chat tool calls", c.name, toolCalls(v), toolCalls(l))
		diff("chat token bytes", c.name, trimPartial(logprobBytes(v)), trimPartial(logprobBytes(l)))
		diff("chat finish_reason", c.name, dig(v, "choices", 0, "finish_reason"), dig(l, "choices", 0, "finish_reason"))
		diff("chat usage", c.name, []any{dig(v, "usage", "prompt_tokens"), dig(v, "usage", "completion_tokens")},
			[]any{dig(l, "usage", "prompt_tokens"), dig(l, "usage", "completion_tokens")})

		// The template: llama-server's rendering, tokenized by it, against
		// Vajra's /tokenize of the same conversation (equal ids are equal
		// bytes: a token's text is fixed).
		tb := map[string]any{"messages": c.msgs}
		if c.tools != nil {
			tb["tools"] = c.tools
		}
		rendered, _ := postObject(t, lbase+"/apply-template", tb)["prompt"].(string)
		ltok := postObject(t, lbase+"/tokenize", map[string]any{"content": rendered, "add_special": true, "parse_special": true})["tokens"]
		tb["model"] = realModelName
		vtok := postObject(t, vbase+"/tokenize", tb)["tokens"]
		if !reflect.DeepEqual(vtok, ltok) {
			vtext := postObject(t, lbase+"/detokenize", map[string]any{"tokens": vtok})["content"]
			t.Errorf("template %s:\n  vajra        %q\n  llama-server %q", c.name, vtext, rendered)
		}

		if c.tools != nil {
			continue
		}
		mb := map[string]any{"model": realModelName, "max_tokens": parityMaxTokens, "temperature": 0, "cache_prompt": false}
		var msgs []chatMsg
		for _, m := range c.msgs {
			if m["role"] == "system" {
				mb["system"] = m["content"]
			} else {
				msgs = append(msgs, m)
			}
		}
		mb["messages"] = msgs
		v, l = postBoth(t, vbase, lbase, "/v1/messages", mb)
		cases++
		diff("messages text", c.name, text(dig(v, "content", 0, "text")), text(dig(l, "content", 0, "text")))
		diff("messages stop_reason", c.name, dig(v, "stop_reason"), dig(l, "stop_reason"))
		vin, _ := dig(v, "usage", "input_tokens").(float64)
		vcache, _ := dig(v, "usage", "cache_read_input_tokens").(float64)
		lin, _ := dig(l, "usage", "input_tokens").(float64)
		lcache, _ := dig(l, "usage", "cache_read_input_tokens").(float64)
		diff("messages usage", c.name, []any{vin + vcache, dig(v, "usage", "output_tokens")}, []any{lin + lcache, dig(l, "usage", "output_tokens")})
	}
	for i, p := range parityPrompts {
		name := fmt.Sprintf("prompt %d %q", i, strings.SplitN(p, "\n", 2)[0])
		body := map[string]any{"model": realModelName, "prompt": p, "max_tokens": parityMaxTokens, "temperature": 0, "cache_prompt": false}
		v, l := postBoth(t, vbase, lbase, "/v1/completions", body)
		cases++
		diff("completions text", name, text(dig(v, "choices", 0, "text")), text(dig(l, "choices", 0, "text")))
		diff("completions finish_reason", name, dig(v, "choices", 0, "finish_reason"), dig(l, "choices", 0, "finish_reason"))
		diff("completions usage", name, []any{dig(v, "usage", "prompt_tokens"), dig(v, "usage", "completion_tokens")},
			[]any{dig(l, "usage", "prompt_tokens"), dig(l, "usage", "completion_tokens")})
	}
	if n := len(parityChats) + len(parityPrompts); n < parityMinPrompts || cases < parityMinPrompts {
		t.Fatalf("%d prompts in %d cases, want at least %d", n, cases, parityMinPrompts)
	}
	t.Logf("%d cases compared", cases)
}
