package integration_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

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
	runParams(t, paramsBackend{base: base, model: tinyName, forceEOS: true})
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
}
