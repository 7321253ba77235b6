package integration_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tiktoken-go/tokenizer"

	"github.com/vajra-go/vajra"
)

// TestSamplingPenaltiesEndToEnd: logit_bias, the OpenAI penalties and
// vLLM's repetition_penalty and min_p reach the engine from openai-go over
// loopback. At temperature 0, -100 on the token the plain answer repeats
// most removes it; presence and frequency penalties make the answer repeat
// fewer tokens; repetition_penalty 1 and min_p (greedy ignores it) change
// nothing. Bad values are 400s naming the parameter.
func TestSamplingPenaltiesEndToEnd(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	ctx := context.Background()
	const maxTokens = 120
	params := func() openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{
			Model:               vajra.DefaultModelName,
			Messages:            userMsg(question),
			Temperature:         openai.Float(0),
			MaxCompletionTokens: openai.Int(maxTokens),
			Logprobs:            openai.Bool(true),
		}
	}
	ignoreEOS := option.WithJSONSet("ignore_eos", true)
	// tokens returns the answer's tokens (from its logprobs).
	tokens := func(p openai.ChatCompletionNewParams, opts ...option.RequestOption) []string {
		t.Helper()
		res, err := client.Chat.Completions.New(ctx, p, append(opts, ignoreEOS)...)
		if err != nil {
			t.Fatal(err)
		}
		c := res.Choices[0]
		if res.Usage.CompletionTokens != maxTokens || len(c.Logprobs.Content) != maxTokens {
			t.Fatalf("%d tokens, %d logprobs, want %d", res.Usage.CompletionTokens, len(c.Logprobs.Content), maxTokens)
		}
		out := make([]string, maxTokens)
		for i, lp := range c.Logprobs.Content {
			out[i] = lp.Token
		}
		return out
	}
	repeats := func(toks []string) int {
		seen := map[string]bool{}
		n := 0
		for _, s := range toks {
			if seen[s] {
				n++
			}
			seen[s] = true
		}
		return n
	}

	plain := tokens(params())
	count := map[string]int{}
	top := ""
	for _, s := range plain {
		count[s]++
		if strings.HasPrefix(s, " ") && (count[s] > count[top] || count[s] == count[top] && s < top) {
			top = s
		}
	}
	if count[top] < 3 {
		t.Fatalf("the plain answer repeats no word: %q", strings.Join(plain, ""))
	}
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	ids, _, err := enc.Encode(top)
	if err != nil || len(ids) != 1 {
		t.Fatalf("%q is not one token: %v %v", top, ids, err)
	}

	p := params()
	p.LogitBias = map[string]int64{strconv.Itoa(int(ids[0])): -100}
	for _, s := range tokens(p) {
		if s == top {
			t.Fatalf("logit_bias -100 on %q (%d times without it): still emitted", top, count[top])
		}
	}

	p = params()
	p.PresencePenalty, p.FrequencyPenalty = openai.Float(2), openai.Float(1)
	if a, b := repeats(tokens(p)), repeats(plain); !(a < b*3/4) {
		t.Errorf("presence_penalty 2, frequency_penalty 1: %d repeated tokens, plain %d", a, b)
	}

	same := tokens(params(), option.WithJSONSet("repetition_penalty", 1), option.WithJSONSet("min_p", 0.5))
	if strings.Join(same, "") != strings.Join(plain, "") {
		t.Errorf("repetition_penalty 1 and min_p at temperature 0 changed the answer")
	}

	// Refusals: syntax and ranges in the dialect, the vocabulary in the
	// engine's Prepare; the same shape either way.
	for _, bc := range []struct {
		name  string
		bias  map[string]int64
		opt   option.RequestOption
		param string
	}{
		{"non-integer id", map[string]int64{"the": 5}, nil, "logit_bias"},
		{"negative id", map[string]int64{"-3": 5}, nil, "logit_bias"},
		{"bias over 100", map[string]int64{"11": 101}, nil, "logit_bias.11"},
		{"id outside the vocabulary", map[string]int64{"9999999": 1}, nil, "logit_bias"},
		{"repetition_penalty 0", nil, option.WithJSONSet("repetition_penalty", 0), "repetition_penalty"},
		{"min_p 2", nil, option.WithJSONSet("min_p", 2), "min_p"},
	} {
		p := params()
		p.LogitBias = bc.bias
		var opts []option.RequestOption
		if bc.opt != nil {
			opts = append(opts, bc.opt)
		}
		_, err := client.Chat.Completions.New(ctx, p, opts...)
		var apiErr *openai.Error
		if !asError(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != bc.param || apiErr.Type != "invalid_request_error" {
			t.Errorf("%s: got %v, want a 400 naming %q", bc.name, err, bc.param)
		}
	}
	_, err = client.Completions.New(ctx, openai.CompletionNewParams{
		Model:     openai.CompletionNewParamsModel(vajra.DefaultModelName),
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("The river")},
		LogitBias: map[string]int64{"1.5": 1},
	})
	var apiErr *openai.Error
	if !asError(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "logit_bias" {
		t.Errorf("completions, non-integer logit_bias id: got %v", err)
	}
	// Completions honour them too.
	comp := func(bias map[string]int64) []string {
		t.Helper()
		res, err := client.Completions.New(ctx, openai.CompletionNewParams{
			Model:       openai.CompletionNewParamsModel(vajra.DefaultModelName),
			Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("The river")},
			Temperature: openai.Float(0),
			MaxTokens:   openai.Int(maxTokens),
			Logprobs:    openai.Int(0),
			LogitBias:   bias,
		}, ignoreEOS)
		if err != nil {
			t.Fatal(err)
		}
		return res.Choices[0].Logprobs.Tokens
	}
	if pt := comp(nil); !slices.Contains(pt, top) {
		t.Fatalf("the plain completion lacks %q: %q", top, strings.Join(pt, ""))
	}
	if bt := comp(map[string]int64{strconv.Itoa(int(ids[0])): -100}); slices.Contains(bt, top) {
		t.Errorf("completions: logit_bias -100 on %q ignored: %q", top, strings.Join(bt, ""))
	}
}
