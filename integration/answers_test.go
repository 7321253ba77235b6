package integration_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine/llama"
	"github.com/vajra-go/vajra/engine/text/grammar"
	"github.com/vajra-go/vajra/internal/llamaserver"
	"github.com/vajra-go/vajra/internal/realmodel"
)

// What the real model says through Vajra, with the llama.cpp libraries
// the default install gives (`make llama`): plain questions with one right
// answer, which SmolLM2-135M-Instruct answers right greedily on llama.cpp
// built for the machine (llama-server of the same build gives the same
// text; the parity test compares them token for token).
//
// This 135M model is weak: on many questions its greedy path passes a near
// tie, and which side wins depends on the CPU kernels the build uses. On an
// AVX2 machine without AVX-512 (AMD EPYC) the native build and llama-server
// of that build answer "What is the capital of France?" with "L'Étoile, la
// Marseillaise, ..." ('L' at logprob -1.92 against 'The' at -2.01); on a
// Sapphire Rapids (AVX-512) build they say "The capital of France is
// Paris.". So the questions below are those whose greedy path to the right
// word leads its runner-up by at least 0.45 in logprob at every token, as
// llama-server measured on the AVX2 build (the weakest kernels this test
// meets); France is asked only as a completion, where it leads by 2.5. The
// near ties that were dropped: France as a chat (0.10 at the first token), 2 + 2
// (0.08), 3 times 4 (0.16), 100 divided by 4 (0.05), the opposite of big
// (0.05).

// answerMaxTokens is each question's output budget: the right answers come
// in the first sentence.
const answerMaxTokens = 32

// realAnswers are the questions and the word each answer must contain.
// Chosen among the questions this 135M model gets right greedily, with a
// margin, on llama-server (it gets others wrong on any build: "What is 12
// times 7?" is "72", "What is 5 + 5?" is "11", the capital of Italy is "Il
// Corriere").
var realAnswers = []struct {
	api      string // "chat", "messages" or "completions"
	question string
	want     string
}{
	{"chat", "What is the capital of Japan?", "Tokyo"},
	{"chat", "What is the capital of Germany?", "Berlin"},
	{"chat", "What is the capital of England?", "London"},
	{"chat", "What is the capital of Russia?", "Moscow"},
	{"chat", "What is the capital of China?", "Beijing"},
	{"chat", "What is the capital of Egypt?", "Cairo"},
	{"chat", "What is 1 + 1?", "2"},
	{"chat", "What is 2 + 3?", "5"},
	{"chat", "How many days are in a week?", "7"},
	{"chat", "What is the opposite of hot?", "cold"},
	{"chat", "What is the opposite of up?", "down"},
	{"chat", "What is the opposite of day?", "night"},
	{"chat", "What is the opposite of black?", "white"},
	{"chat", "What is the opposite of old?", "new"},
	{"chat", "What is the opposite of fast?", "slow"},
	{"chat", "What is the chemical symbol for water?", "H2O"},
	{"messages", "What is the capital of Germany?", "Berlin"},
	{"messages", "What is the opposite of hot?", "cold"},
	{"completions", "The capital of France is", "Paris"},
	{"completions", "The capital of Japan is", "Tokyo"},
	{"completions", "The opposite of hot is", "cold"},
}

// TestRealModelAnswers asks the real model each of realAnswers, greedily,
// and checks the answer holds the right word.
func TestRealModelAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("the real model")
	}
	// Without the prefix cache each prompt is computed whole (the chat
	// template's default system prompt would otherwise be cached, and the
	// rest computed alone gives logits that differ in the third decimal:
	// see TestLlamaServerParity).
	_, base := startReal(t, func(cfg *vajra.Config) { llamaConfig(cfg).PrefixCaching = false })
	lib, _ := llama.FindLibDir()
	t.Logf("llama.cpp libraries: %s", lib)
	wrong := 0
	for _, q := range realAnswers {
		var got string
		switch q.api {
		case "chat":
			res := postObject(t, base+"/v1/chat/completions", map[string]any{"model": realModelName, "temperature": 0,
				"max_tokens": answerMaxTokens, "messages": []chatMsg{{"role": "user", "content": q.question}}})
			got, _ = dig(res, "choices", 0, "message", "content").(string)
		case "messages":
			res := postObject(t, base+"/v1/messages", map[string]any{"model": realModelName, "temperature": 0,
				"max_tokens": answerMaxTokens, "messages": []chatMsg{{"role": "user", "content": q.question}}})
			got, _ = dig(res, "content", 0, "text").(string)
		case "completions":
			res := postObject(t, base+"/v1/completions", map[string]any{"model": realModelName, "temperature": 0,
				"max_tokens": answerMaxTokens, "prompt": q.question})
			got, _ = dig(res, "choices", 0, "text").(string)
		}
		if !strings.Contains(got, q.want) {
			wrong++
			t.Errorf("%s %q: answer %q does not say %q", q.api, q.question, got, q.want)
		}
	}
	if wrong > 0 {
		t.Errorf("%d of %d answers wrong (libraries %s)", wrong, len(realAnswers), lib)
	}
}

// TestRealModelConstrainedAnswers: vLLM's structured_outputs on the real
// model: constrained to a list of choices or to a regex, the model picks
// the right answer and says nothing else, and llama-server given the same
// constraint as a GBNF grammar says the same. (Asked for a bare city
// among six, this 135M model says "London" for France on both; the
// choices are whole sentences, as it answers unconstrained.)
func TestRealModelConstrainedAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("the real model")
	}
	model := realmodel.Need(t)
	llamaserver.Need(t)
	ls := llamaserver.Start(t, model, "-np", "1", "-c", "2048", "-t", "1", "--jinja", "--cache-reuse", "0")
	_, base := startReal(t, func(cfg *vajra.Config) { llamaConfig(cfg).PrefixCaching = false })
	capital := func(country string, cities ...string) []string {
		var c []string
		for _, city := range cities {
			c = append(c, "The capital of "+country+" is "+city+".")
		}
		return c
	}
	for _, q := range []struct {
		question string
		so       map[string]any
		want     string
	}{
		{"What is the capital of France?", map[string]any{"choice": capital("France", "Berlin", "London", "Madrid", "Paris", "Rome")}, "The capital of France is Paris."},
		{"What is the capital of Japan?", map[string]any{"choice": capital("Japan", "Beijing", "Seoul", "Tokyo", "Paris")}, "The capital of Japan is Tokyo."},
		{"What is the capital of Germany?", map[string]any{"choice": capital("Germany", "Berlin", "London", "Madrid", "Paris", "Rome")}, "The capital of Germany is Berlin."},
		{"What is 2 + 2?", map[string]any{"regex": `2 \+ 2 = \d{1,2}`}, "2 + 2 = 4"},
		{"What is 3 times 4?", map[string]any{"regex": `3 times 4 is [0-9]{1,2}`}, "3 times 4 is 12"},
		{"What is the opposite of hot?", map[string]any{"choice": []string{"The opposite of hot is cold.", "The opposite of hot is warm.", "The opposite of hot is big."}}, "The opposite of hot is cold."},
		{"What is the opposite of up?", map[string]any{"choice": []string{"The opposite of up is down.", "The opposite of up is left.", "The opposite of up is high."}}, "The opposite of up is down."},
	} {
		msgs := []chatMsg{{"role": "user", "content": q.question}}
		res := postObject(t, base+"/v1/chat/completions", map[string]any{"model": realModelName, "temperature": 0,
			"max_tokens": answerMaxTokens, "messages": msgs, "structured_outputs": q.so})
		got, _ := dig(res, "choices", 0, "message", "content").(string)
		if got != q.want {
			t.Errorf("%q constrained by %v: answer %q, want %q", q.question, q.so, got, q.want)
		}
		var g string
		if c, ok := q.so["choice"].([]string); ok {
			g = grammar.FromChoices(c)
		} else {
			var err error
			if g, err = grammar.FromRegex(q.so["regex"].(string)); err != nil {
				t.Fatal(err)
			}
		}
		lres := postObject(t, ls.URL()+"/v1/chat/completions", map[string]any{"temperature": 0,
			"max_tokens": answerMaxTokens, "messages": msgs, "grammar": g, "cache_prompt": false})
		if l, _ := dig(lres, "choices", 0, "message", "content").(string); l != got {
			t.Errorf("%q constrained by %v: Vajra %q, llama-server %q", q.question, q.so, got, l)
		}
		// The Responses API takes vLLM's structured_outputs too.
		rres := postObject(t, base+"/v1/responses", map[string]any{"model": realModelName, "temperature": 0,
			"max_output_tokens": answerMaxTokens, "input": q.question, "structured_outputs": q.so, "store": false})
		if r, _ := dig(rres, "output", 0, "content", 0, "text").(string); r != q.want {
			t.Errorf("%q constrained by %v through the Responses API: %q, want %q", q.question, q.so, r, q.want)
		}
	}
	// And vLLM's stop strings: the answer ends before " is".
	rres := postObject(t, base+"/v1/responses", map[string]any{"model": realModelName, "temperature": 0,
		"max_output_tokens": answerMaxTokens, "input": "What is the capital of France?", "store": false,
		"structured_outputs": map[string]any{"choice": capital("France", "Berlin", "Paris")}, "stop": []string{" is"}})
	if r, _ := dig(rres, "output", 0, "content", 0, "text").(string); r != "The capital of France" {
		t.Errorf("the Responses API with stop %q: %q, want %q", " is", r, "The capital of France")
	}
	// Anthropic's structured outputs (output_config.format), through its
	// Go SDK: the answer is JSON of the schema, and right.
	ac := newAnthropic(base)
	for _, q := range []struct{ question, want string }{
		{"What is the capital of France?", "Paris"},
		{"What is the capital of Japan?", "Tokyo"},
	} {
		msg, err := ac.Messages.New(context.Background(), anthropic.MessageNewParams{Model: realModelName, MaxTokens: answerMaxTokens,
			Messages: userText(q.question),
			OutputConfig: anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: map[string]any{
				"type": "object", "required": []string{"capital"}, "additionalProperties": false,
				"properties": map[string]any{"capital": map[string]any{"type": "string", "enum": []string{"Berlin", "Paris", "Rome", "Tokyo"}}}}}}},
			aoption.WithJSONSet("temperature", 0))
		if err != nil {
			t.Fatal(err)
		}
		var got struct{ Capital string }
		if len(msg.Content) != 1 || json.Unmarshal([]byte(msg.Content[0].Text), &got) != nil || got.Capital != q.want {
			t.Errorf("%q with output_config.format: %s, want capital %q", q.question, msg.RawJSON(), q.want)
		}
	}
}
