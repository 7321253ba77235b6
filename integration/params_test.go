package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
	"github.com/vajra-go/vajra/engine/sim"
)

// vLLM's sampling and template parameters min_tokens,
// include_stop_str_in_output, add_generation_prompt and
// continue_final_message, through the official Go SDK against the sim,
// engine/llama on a tiny model, and a real llama-server worker.

// paramsBackend is one server under test. forceEOS says a logit_bias of
// 100 on the end-of-generation token forces it (a real model's sampler).
type paramsBackend struct {
	base     string
	model    string
	forceEOS bool
	// unnamed: the worker's stream names no id for a token that ends
	// inside a UTF-8 character (llama-server sends only the last token's
	// id with the character's text), so token_ids lack those tokens.
	unnamed bool
}

func TestParamsSim(t *testing.T) {
	_, _, base := startServer(t, nil)
	b := paramsBackend{base: base, model: "vajra-sim"}
	runParams(t, b)
	// min_tokens on the sim: its echo answer ends with the echo, and with
	// min_tokens repeats until at least that many tokens.
	_, _, echo := startServer(t, func(c *vajra.Config) { c.Sim.Mode = sim.ModeEcho })
	client := newClient(echo)
	for _, stream := range []bool{false, true} {
		text, usage, finish := chatOnce(t, client, stream, openai.ChatCompletionNewParams{
			Model: b.model, Messages: userMsg("hello there"), MaxTokens: openai.Int(60),
		}, option.WithJSONSet("min_tokens", 25))
		if usage.CompletionTokens < 25 || finish != "stop" || !strings.HasPrefix(text, "hello there") {
			t.Fatalf("stream %v, min_tokens 25: %d tokens, finish %q, text %q", stream, usage.CompletionTokens, finish, text)
		}
	}
}

func TestParamsLlama(t *testing.T) {
	_, base := startLlama(t, nil)
	runParams(t, paramsBackend{base: base, model: tinyName, forceEOS: true})
}

func TestParamsLlamaServer(t *testing.T) {
	w := startWorker(t)
	_, base := startRemote(t, nil, workerURL(w))
	runParams(t, paramsBackend{base: base, model: tinyName, forceEOS: true, unnamed: true})
}

// chatOnce runs one chat request, streamed (with usage) or not, and
// returns what a user sees: the text, the usage and the finish reason.
func chatOnce(t *testing.T, client openai.Client, stream bool, p openai.ChatCompletionNewParams, opts ...option.RequestOption) (string, openai.CompletionUsage, string) {
	t.Helper()
	ctx := context.Background()
	if !stream {
		res, err := client.Chat.Completions.New(ctx, p, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return res.Choices[0].Message.Content, res.Usage, res.Choices[0].FinishReason
	}
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := client.Chat.Completions.NewStreaming(ctx, p, opts...)
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return acc.Choices[0].Message.Content, acc.Usage, acc.Choices[0].FinishReason
}

// wantParamError checks that err is a 400 naming param.
func wantParamError(t *testing.T, err error, param string) {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != param {
		t.Fatalf("want a 400 naming %q, got %v", param, err)
	}
}

func runParams(t *testing.T, b paramsBackend) {
	client := newClient(b.base)
	ctx := context.Background()
	greedy := func(msgs []openai.ChatCompletionMessageParamUnion, max int) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: b.model, Messages: msgs, Temperature: openai.Float(0), MaxTokens: openai.Int(int64(max))}
	}

	t.Run("min_tokens", func(t *testing.T) {
		if b.forceEOS {
			// The end-of-generation token forced by logit_bias would end
			// the answer at its first token; min_tokens 5 bans it for five.
			bias := map[string]int64{strconv.Itoa(tinymodel.TokenIMEnd): 100}
			p := greedy(userMsg(question), 30)
			p.LogitBias = bias
			if _, usage, _ := chatOnce(t, client, false, p); usage.CompletionTokens != 1 {
				t.Fatalf("forced end without min_tokens: %d tokens", usage.CompletionTokens)
			}
			for _, stream := range []bool{false, true} {
				_, usage, finish := chatOnce(t, client, stream, p, option.WithJSONSet("min_tokens", 5))
				if usage.CompletionTokens != 6 || finish != "stop" {
					t.Fatalf("stream %v, min_tokens 5: %d tokens, finish %q; want 6, stop", stream, usage.CompletionTokens, finish)
				}
			}
			// A stop token id, forced likewise, waits for min_tokens too.
			p.LogitBias = map[string]int64{strconv.Itoa('z'): 100}
			_, usage, finish := chatOnce(t, client, false, p,
				option.WithJSONSet("min_tokens", 3), option.WithJSONSet("stop_token_ids", []int{'z'}))
			if usage.CompletionTokens != 4 || finish != "stop" {
				t.Fatalf("stop token id with min_tokens 3: %d tokens, finish %q", usage.CompletionTokens, finish)
			}
			// And on /v1/completions.
			res, err := client.Completions.New(ctx, openai.CompletionNewParams{
				Model:     openai.CompletionNewParamsModel(b.model),
				Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("The sea is")},
				MaxTokens: openai.Int(12), Temperature: openai.Float(0), LogitBias: bias,
			}, option.WithJSONSet("min_tokens", 7))
			if err != nil {
				t.Fatal(err)
			}
			if res.Usage.CompletionTokens != 8 || res.Choices[0].FinishReason != "stop" {
				t.Fatalf("completions, min_tokens 7: %d tokens, finish %q", res.Usage.CompletionTokens, res.Choices[0].FinishReason)
			}
		}
		_, err := client.Chat.Completions.New(ctx, greedy(userMsg(question), 4), option.WithJSONSet("min_tokens", 5))
		wantParamError(t, err, "min_tokens")
		_, err = client.Chat.Completions.New(ctx, greedy(userMsg(question), 4), option.WithJSONSet("min_tokens", -1))
		wantParamError(t, err, "min_tokens")
		_, err = client.Completions.New(ctx, openai.CompletionNewParams{
			Model:  openai.CompletionNewParamsModel(b.model),
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The sea is")},
		}, option.WithJSONSet("min_tokens", 17)) // above the default max_tokens of 16
		wantParamError(t, err, "min_tokens")
	})

	t.Run("include_stop_str_in_output", func(t *testing.T) {
		full, _, _ := chatOnce(t, client, false, greedy(userMsg(question), 32), greedyEOS...)
		runes := []rune(full)
		if len(runes) < 8 {
			t.Fatalf("text %q too short", full)
		}
		stop := string(runes[3:5])
		at := strings.Index(full, stop)
		for _, include := range []bool{false, true} {
			want := full[:at]
			if include {
				want = full[:at+len(stop)]
			}
			for _, stream := range []bool{false, true} {
				p := greedy(userMsg(question), 32)
				p.Stop = openai.ChatCompletionNewParamsStopUnion{OfString: openai.String(stop)}
				text, _, finish := chatOnce(t, client, stream, p, option.WithJSONSet("ignore_eos", true),
					option.WithJSONSet("include_stop_str_in_output", include))
				if text != want || finish != "stop" {
					t.Fatalf("include %v stream %v, stop %q: text %q finish %q; want %q", include, stream, stop, text, finish, want)
				}
			}
		}
	})

	t.Run("continue_final_message", func(t *testing.T) {
		prefill := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Count"), openai.AssistantMessage("1, 2,")}
		cont := []option.RequestOption{option.WithJSONSet("ignore_eos", true),
			option.WithJSONSet("add_generation_prompt", false), option.WithJSONSet("continue_final_message", true)}
		text, usage, _ := chatOnce(t, client, false, greedy(prefill, 8), cont...)
		// The model continues the open assistant turn: the same as a raw
		// completion of the rendered prompt, which ends in "1, 2,".
		rendered := "<|im_start|>user\nCount<|im_end|>\n<|im_start|>assistant\n1, 2,"
		raw, err := client.Completions.New(ctx, openai.CompletionNewParams{
			Model:     openai.CompletionNewParamsModel(b.model),
			Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(rendered)},
			MaxTokens: openai.Int(8), Temperature: openai.Float(0),
		}, greedyEOS...)
		if err != nil {
			t.Fatal(err)
		}
		if b.forceEOS {
			if text != raw.Choices[0].Text || usage.PromptTokens != raw.Usage.PromptTokens {
				t.Fatalf("continued %q (%d prompt tokens), raw completion of the open turn %q (%d)",
					text, usage.PromptTokens, raw.Choices[0].Text, raw.Usage.PromptTokens)
			}
		}
		streamed, _, _ := chatOnce(t, client, true, greedy(prefill, 8), cont...)
		if streamed != text {
			t.Fatalf("streamed %q, non-streamed %q", streamed, text)
		}
		// Closed (add_generation_prompt false) and the default (a new
		// assistant turn) each have more prompt tokens.
		_, closed, _ := chatOnce(t, client, false, greedy(prefill, 2), option.WithJSONSet("add_generation_prompt", false))
		_, open, _ := chatOnce(t, client, false, greedy(prefill, 2))
		if !(usage.PromptTokens < closed.PromptTokens && closed.PromptTokens < open.PromptTokens) {
			t.Fatalf("prompt tokens: continued %d, closed %d, with generation prompt %d",
				usage.PromptTokens, closed.PromptTokens, open.PromptTokens)
		}
		// vLLM's /tokenize renders alike.
		msgs := []map[string]string{{"role": "user", "content": "Count"}, {"role": "assistant", "content": "1, 2,"}}
		for _, c := range []struct {
			body map[string]any
			want int64
		}{
			{map[string]any{"model": b.model, "messages": msgs}, open.PromptTokens},
			{map[string]any{"model": b.model, "messages": msgs, "add_generation_prompt": false}, closed.PromptTokens},
			{map[string]any{"model": b.model, "messages": msgs, "add_generation_prompt": false, "continue_final_message": true}, usage.PromptTokens},
		} {
			var tok struct {
				Count int64 `json:"count"`
			}
			postJSON(t, b.base+"/tokenize", c.body, &tok)
			if tok.Count != c.want {
				t.Fatalf("/tokenize %v: count %d, want %d", c.body, tok.Count, c.want)
			}
		}
		_, err = client.Chat.Completions.New(ctx, greedy(prefill, 2), option.WithJSONSet("continue_final_message", true))
		wantParamError(t, err, "continue_final_message") // add_generation_prompt defaults to true
		_, err = client.Chat.Completions.New(ctx, greedy(userMsg("Count"), 2),
			option.WithJSONSet("add_generation_prompt", false), option.WithJSONSet("continue_final_message", true))
		wantParamError(t, err, "continue_final_message") // no assistant message to continue
	})

	t.Run("return_token_ids", func(t *testing.T) { returnTokenIDs(t, b) })
}

// tokenIDsBody is what vLLM's return_token_ids adds to a chat or
// completions body or chunk.
type tokenIDsBody struct {
	PromptTokenIDs []int `json:"prompt_token_ids"`
	Choices        []struct {
		Text           string `json:"text"`
		Message        struct{ Content string }
		Delta          struct{ Content string }
		TokenIDs       []int  `json:"token_ids"`
		PromptTokenIDs []int  `json:"prompt_token_ids"`
		FinishReason   string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// returnTokenIDs: vLLM's return_token_ids through the official Go SDK. The
// prompt's ids are those /tokenize gives for the same request, the
// generated ids are as many as usage counts, detokenize to the answer,
// and are the same streamed (joined) and not; the forced
// end-of-generation token is among them, as vLLM counts it.
// decodeTokenIDs reads what return_token_ids adds to a body or chunk.
func decodeTokenIDs(t *testing.T, raw string) tokenIDsBody {
	t.Helper()
	var b tokenIDsBody
	if err := json.Unmarshal([]byte(raw), &b); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return b
}

// hasMultibyte reports whether s holds a character of more than one
// byte: one that a byte-level vocabulary may split across tokens.
func hasMultibyte(s string) bool {
	for _, r := range s {
		if r >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

// tokenIDsAnswer is what return_token_ids tells of one chat answer.
type tokenIDsAnswer struct {
	text           string
	prompt, tokens []int
	promptN, n     int
}

// chatTokenIDs asks for one chat answer with return_token_ids, streamed
// (with usage; the prompt's ids must come in exactly one chunk) or not.
func chatTokenIDs(t *testing.T, client openai.Client, stream bool, p openai.ChatCompletionNewParams, opts ...option.RequestOption) tokenIDsAnswer {
	t.Helper()
	ctx := context.Background()
	opts = append(opts, option.WithJSONSet("return_token_ids", true))
	var a tokenIDsAnswer
	if !stream {
		res, err := client.Chat.Completions.New(ctx, p, opts...)
		if err != nil {
			t.Fatal(err)
		}
		body := decodeTokenIDs(t, res.RawJSON())
		c := body.Choices[0]
		return tokenIDsAnswer{c.Message.Content, body.PromptTokenIDs, c.TokenIDs, body.Usage.PromptTokens, body.Usage.CompletionTokens}
	}
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := client.Chat.Completions.NewStreaming(ctx, p, opts...)
	prompts := 0
	for s.Next() {
		ch := decodeTokenIDs(t, s.Current().RawJSON())
		if ch.PromptTokenIDs != nil {
			a.prompt = ch.PromptTokenIDs
			prompts++
		}
		for _, c := range ch.Choices {
			a.text += c.Delta.Content
			a.tokens = append(a.tokens, c.TokenIDs...)
		}
		if ch.Usage != nil {
			a.promptN, a.n = ch.Usage.PromptTokens, ch.Usage.CompletionTokens
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if prompts != 1 {
		t.Fatalf("prompt_token_ids in %d chunks, want the first only", prompts)
	}
	return a
}

func returnTokenIDs(t *testing.T, b paramsBackend) {
	client := newClient(b.base)
	ctx := context.Background()
	ids := option.WithJSONSet("return_token_ids", true)
	chat := func(stream bool, p openai.ChatCompletionNewParams, opts ...option.RequestOption) tokenIDsAnswer {
		t.Helper()
		return chatTokenIDs(t, client, stream, p, opts...)
	}
	detok := func(tokens []int) string {
		var out struct{ Prompt string }
		postJSON(t, b.base+"/detokenize", map[string]any{"model": b.model, "tokens": tokens}, &out)
		return out.Prompt
	}
	var tok struct{ Tokens []int }
	postJSON(t, b.base+"/tokenize", map[string]any{"model": b.model, "messages": []map[string]string{{"role": "user", "content": question}}}, &tok)

	p := openai.ChatCompletionNewParams{Model: b.model, Messages: userMsg(question), Temperature: openai.Float(0), MaxTokens: openai.Int(12)}
	whole := chat(false, p, greedyEOS...)
	for _, stream := range []bool{false, true} {
		a := chat(stream, p, greedyEOS...)
		if !slices.Equal(a.prompt, tok.Tokens) || len(a.prompt) != a.promptN {
			t.Fatalf("stream %v: prompt_token_ids %v (usage %d), /tokenize %v", stream, a.prompt, a.promptN, tok.Tokens)
		}
		if !slices.Equal(a.tokens, whole.tokens) || a.n != 12 {
			t.Fatalf("stream %v: token_ids %v (usage %d), not streamed %v", stream, a.tokens, a.n, whole.tokens)
		}
		if b.unnamed && len(a.tokens) < a.n {
			// The tiny model's answer splits characters across tokens
			// (on this machine's llama.cpp build, one of the 12):
			// llama-server names only the last token of each.
			if len(a.tokens) == 0 || !strings.ContainsRune(a.text, utf8.RuneError) && !hasMultibyte(a.text) {
				t.Fatalf("stream %v: %d token_ids of %d tokens for %q, which splits no character", stream, len(a.tokens), a.n, a.text)
			}
			continue
		}
		if len(a.tokens) != a.n {
			t.Fatalf("stream %v: token_ids %v, usage %d", stream, a.tokens, a.n)
		}
		if got := detok(a.tokens); got != a.text || a.text == "" {
			t.Fatalf("stream %v: token_ids detokenize to %q, the answer is %q", stream, got, a.text)
		}
	}
	if !b.unnamed {
		// Without ignore_eos the answer may end at the model's own end
		// token: the ids still number the tokens usage counts.
		for _, stream := range []bool{false, true} {
			free := p
			free.MaxTokens = openai.Int(48)
			if a := chat(stream, free); len(a.tokens) != a.n || a.n == 0 {
				t.Fatalf("stream %v, no ignore_eos: %d token_ids, usage %d", stream, len(a.tokens), a.n)
			}
		}
	}
	if b.forceEOS {
		// The end-of-generation token ends the answer and is its one id.
		fp := p
		fp.LogitBias = map[string]int64{strconv.Itoa(tinymodel.TokenIMEnd): 100}
		for _, stream := range []bool{false, true} {
			if a := chat(stream, fp); !slices.Equal(a.tokens, []int{tinymodel.TokenIMEnd}) || a.n != 1 || a.text != "" {
				t.Fatalf("stream %v, forced end: token_ids %v, %d tokens, text %q", stream, a.tokens, a.n, a.text)
			}
		}
	}

	// Completions: the prompt's ids in the choice.
	postJSON(t, b.base+"/tokenize", map[string]any{"model": b.model, "prompt": "The sea is"}, &tok)
	cp := openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(b.model),
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("The sea is")},
		MaxTokens: openai.Int(6), Temperature: openai.Float(0)}
	res, err := client.Completions.New(ctx, cp, append(greedyEOS, ids)...)
	if err != nil {
		t.Fatal(err)
	}
	c := decodeTokenIDs(t, res.RawJSON()).Choices[0]
	named := len(c.TokenIDs) == 6 && detok(c.TokenIDs) == c.Text
	if b.unnamed && len(c.TokenIDs) < 6 { // as above
		named = len(c.TokenIDs) > 0 && (strings.ContainsRune(c.Text, utf8.RuneError) || hasMultibyte(c.Text))
	}
	if !slices.Equal(c.PromptTokenIDs, tok.Tokens) || !named {
		t.Fatalf("completion: prompt_token_ids %v (/tokenize %v), token_ids %v for %q", c.PromptTokenIDs, tok.Tokens, c.TokenIDs, c.Text)
	}
	s := client.Completions.NewStreaming(ctx, cp, append(greedyEOS, ids)...)
	var streamed []int
	var prompt []int
	for s.Next() {
		for _, c := range decodeTokenIDs(t, s.Current().RawJSON()).Choices {
			streamed = append(streamed, c.TokenIDs...)
			if c.PromptTokenIDs != nil {
				prompt = c.PromptTokenIDs
			}
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(streamed, c.TokenIDs) || !slices.Equal(prompt, tok.Tokens) {
		t.Fatalf("streamed completion: token_ids %v prompt %v; not streamed %v prompt %v", streamed, prompt, c.TokenIDs, tok.Tokens)
	}
}
