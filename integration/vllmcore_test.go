package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/engine/remote/vllmcore"
	"github.com/vajra-go/vajra/internal/eventually"
	"github.com/vajra-go/vajra/internal/vllmserver"
)

// genConfig is the generation_config.json of TestVLLMCoreWorker's front
// ends: sampling defaults, a cap on answers that set none.
const (
	genMaxNewTokens = 200
	genConfig       = `{"temperature": 0.8, "top_k": 8, "max_new_tokens": 200}`
)

// TestVLLMCoreWorker: Vajra as the front end of a real vLLM engine core
// (`vllm serve --headless`, the CPU build on the tiny Llama), which
// attaches to the address `--worker vllm-core://HOST:PORT` binds, with no
// Python between them. Greedy output is token for token what vLLM's own
// OpenAI server (started once beside it, on the same model) answers, in
// every dialect through the official Go SDKs; a client that leaves
// mid-stream is aborted on the engine (its running count); the engine
// killed mid-stream ends the streams with an error event, requests get
// 503, and the engine started again attaches again. Two vLLM processes
// serve every subtest (start-up takes minutes on two shared cores), one
// more after the kill. Skips without the venv, fails with
// VAJRA_REQUIRE_VLLM set.
func TestVLLMCoreWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts vLLM (minutes)")
	}
	bin := vllmserver.Need(t)
	model := vllmserver.Model(t, bin)
	// Sampling defaults as a model's generation_config.json recommends
	// them, for both front ends (vLLM's --generation-config): requests
	// that leave temperature, top_k or max_tokens out take these.
	genDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(genDir, "generation_config.json"), []byte(genConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	ref := vllmserver.Start(t, false, "--generation-config", genDir) // vLLM's own OpenAI server: the reference
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := lis.Addr().String()
	lis.Close()
	srv, base := startRemote(t, func(cfg *vajra.Config) {
		cfg.Remote.TokenizerPath, cfg.Remote.GenerationConfig = model, genDir
	}, "vllm-core://"+hs)
	eng := vllmserver.StartHeadless(t, hs)
	re := srv.Engine().(*remote.Engine)
	attached := func() *vllmcore.Engine {
		for _, w := range re.Workers() {
			if w.Healthy() && !w.Draining() {
				return w.Client().(*vllmcore.Engine)
			}
		}
		return nil
	}
	ctx := context.Background()
	refClient := newClient("http://" + ref.Addr)
	ref.Wait(t, 15*time.Minute, func() bool {
		resp, err := http.Get("http://" + ref.Addr + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	eng.Wait(t, 15*time.Minute, func() bool { return attached() != nil })
	client := newClient(base)

	greedy := func(prompt string, maxTokens int64) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{
			Model: tinyName, Messages: userMsg(prompt), MaxTokens: openai.Int(maxTokens), Temperature: openai.Float(0),
		}
	}
	prompts := []string{question, "What is the capital of France?", "Écris un poème sur la mer.", "1, 2, 3, 4,"}
	// vLLM's answers, asked once.
	refChat := map[string]*openai.ChatCompletion{}
	for _, p := range prompts {
		res, err := refClient.Chat.Completions.New(ctx, greedy(p, 16))
		if err != nil {
			t.Fatalf("vLLM's server: %v", err)
		}
		refChat[p] = res
	}

	t.Run("ChatParity", func(t *testing.T) {
		for _, p := range prompts {
			want := refChat[p]
			if want.Choices[0].Message.Content == "" {
				t.Fatalf("%q: vLLM answered nothing", p)
			}
			got, err := client.Chat.Completions.New(ctx, greedy(p, 16))
			if err != nil {
				t.Fatal(err)
			}
			w, g := want.Choices[0], got.Choices[0]
			if g.Message.Content != w.Message.Content || g.FinishReason != w.FinishReason ||
				got.Usage.CompletionTokens != want.Usage.CompletionTokens || got.Usage.PromptTokens != want.Usage.PromptTokens {
				t.Errorf("%q: Vajra %q (%s, %d+%d tokens), vLLM %q (%s, %d+%d tokens)", p,
					g.Message.Content, g.FinishReason, got.Usage.PromptTokens, got.Usage.CompletionTokens,
					w.Message.Content, w.FinishReason, want.Usage.PromptTokens, want.Usage.CompletionTokens)
			}
			stream := client.Chat.Completions.NewStreaming(ctx, greedy(p, 16))
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if acc.Choices[0].Message.Content != w.Message.Content {
				t.Errorf("%q streamed: Vajra %q, vLLM %q", p, acc.Choices[0].Message.Content, w.Message.Content)
			}
		}
	})

	t.Run("CompletionsTokenParity", func(t *testing.T) {
		// Token by token: logprobs name each generated token.
		for _, p := range []string{"The sea", "Once upon a time", "def main():"} {
			params := openai.CompletionNewParams{
				Model: openai.CompletionNewParamsModel(tinyName), Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(p)},
				MaxTokens: openai.Int(16), Temperature: openai.Float(0), Logprobs: openai.Int(1),
			}
			want, err := refClient.Completions.New(ctx, params)
			if err != nil {
				t.Fatalf("vLLM's server: %v", err)
			}
			got, err := client.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			w, g := want.Choices[0], got.Choices[0]
			if g.Text != w.Text || !slices.Equal(g.Logprobs.Tokens, w.Logprobs.Tokens) || g.FinishReason != w.FinishReason {
				t.Errorf("%q: Vajra %q %q (%s), vLLM %q %q (%s)", p, g.Text, g.Logprobs.Tokens, g.FinishReason, w.Text, w.Logprobs.Tokens, w.FinishReason)
			}
			for i := range min(len(g.Logprobs.TokenLogprobs), len(w.Logprobs.TokenLogprobs)) {
				if d := g.Logprobs.TokenLogprobs[i] - w.Logprobs.TokenLogprobs[i]; d > 1e-3 || d < -1e-3 {
					t.Errorf("%q token %d: logprob %v, vLLM %v", p, i, g.Logprobs.TokenLogprobs[i], w.Logprobs.TokenLogprobs[i])
				}
			}
		}
	})

	t.Run("ReturnTokenIDsParity", func(t *testing.T) {
		// vLLM's return_token_ids: the prompt's ids and the generated
		// ids, streamed and not, are vLLM's own.
		for _, p := range prompts[:2] {
			want := chatTokenIDs(t, refClient, false, greedy(p, 16))
			if len(want.tokens) != want.n || len(want.prompt) != want.promptN {
				t.Fatalf("%q: vLLM gave %d ids for %d tokens, %d prompt ids for %d", p, len(want.tokens), want.n, len(want.prompt), want.promptN)
			}
			for _, stream := range []bool{false, true} {
				got := chatTokenIDs(t, client, stream, greedy(p, 16))
				if !slices.Equal(got.prompt, want.prompt) || !slices.Equal(got.tokens, want.tokens) || got.text != want.text {
					t.Errorf("%q stream %v: Vajra prompt %v tokens %v %q; vLLM prompt %v tokens %v %q", p, stream,
						got.prompt, got.tokens, got.text, want.prompt, want.tokens, want.text)
				}
			}
		}
		params := openai.CompletionNewParams{
			Model: openai.CompletionNewParamsModel(tinyName), Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The sea")},
			MaxTokens: openai.Int(8), Temperature: openai.Float(0),
		}
		// With add_special_tokens (vLLM's default true, and false) the
		// prompt's ids are vLLM's too. (The tiny Llama's tokenizer adds no
		// BOS, so both give the same ids here; TestRealAddSpecialTokens
		// checks one that does.)
		for _, special := range []bool{true, false} {
			var bodies [2]tokenIDsBody
			for i, c := range []openai.Client{refClient, client} {
				res, err := c.Completions.New(ctx, params, option.WithJSONSet("return_token_ids", true),
					option.WithJSONSet("add_special_tokens", special))
				if err != nil {
					t.Fatal(err)
				}
				bodies[i] = decodeTokenIDs(t, res.RawJSON())
			}
			w, g := bodies[0].Choices[0], bodies[1].Choices[0]
			if len(w.TokenIDs) != 8 || !slices.Equal(g.TokenIDs, w.TokenIDs) || !slices.Equal(g.PromptTokenIDs, w.PromptTokenIDs) {
				t.Errorf("completions, add_special_tokens %v: Vajra prompt %v tokens %v; vLLM prompt %v tokens %v", special,
					g.PromptTokenIDs, g.TokenIDs, w.PromptTokenIDs, w.TokenIDs)
			}
		}
	})

	t.Run("ResponsesAndMessagesParity", func(t *testing.T) {
		// The same chat template renders the same prompt: the Responses
		// API and Anthropic's Messages say what vLLM's chat said.
		want := refChat[question].Choices[0].Message.Content
		res, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model: tinyName, Input: textInput(question), MaxOutputTokens: openai.Int(16), Temperature: openai.Float(0),
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.OutputText() != want {
			t.Errorf("responses: %q, vLLM's chat %q", res.OutputText(), want)
		}
		ac := newAnthropic(base)
		mp := anthropic.MessageNewParams{Model: tinyName, MaxTokens: 16, Messages: userText(question)}
		msg, err := ac.Messages.New(ctx, mp, aoption.WithJSONSet("temperature", 0))
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) == 0 || msg.Content[0].Text != want {
			t.Errorf("messages: %s, vLLM's chat %q", msg.RawJSON(), want)
		}
		ms := ac.Messages.NewStreaming(ctx, mp, aoption.WithJSONSet("temperature", 0))
		var streamed anthropic.Message
		for ms.Next() {
			if err := streamed.Accumulate(ms.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := ms.Err(); err != nil {
			t.Fatal(err)
		}
		if len(streamed.Content) == 0 || streamed.Content[0].Text != want {
			t.Errorf("messages streamed: %+v, vLLM's chat %q", streamed.Content, want)
		}
	})

	t.Run("SeededParity", func(t *testing.T) {
		params := greedy(question, 12)
		params.Temperature = openai.Float(1)
		params.Seed = openai.Int(11)
		want, err := refClient.Chat.Completions.New(ctx, params, greedyEOS...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := client.Chat.Completions.New(ctx, params, greedyEOS...)
		if err != nil {
			t.Fatal(err)
		}
		if got.Choices[0].Message.Content != want.Choices[0].Message.Content {
			t.Errorf("seed 11: Vajra %q, vLLM %q", got.Choices[0].Message.Content, want.Choices[0].Message.Content)
		}
	})

	t.Run("SamplingParity", func(t *testing.T) {
		// Each sampling field reaches the engine as vLLM's own front end
		// sends it: the same answer as vLLM's server, field by field.
		cases := []struct {
			name   string
			params func(*openai.ChatCompletionNewParams)
			extra  []option.RequestOption
		}{
			{"seed_top_p", func(p *openai.ChatCompletionNewParams) {
				p.Temperature, p.Seed, p.TopP = openai.Float(0.9), openai.Int(5), openai.Float(0.8)
			}, nil},
			{"top_k_min_p", func(p *openai.ChatCompletionNewParams) { p.Temperature, p.Seed = openai.Float(1), openai.Int(3) },
				[]option.RequestOption{option.WithJSONSet("top_k", 5), option.WithJSONSet("min_p", 0.05)}},
			{"n_seed", func(p *openai.ChatCompletionNewParams) {
				p.Temperature, p.Seed, p.N = openai.Float(1), openai.Int(7), openai.Int(3)
			}, nil},
			{"penalties", func(p *openai.ChatCompletionNewParams) {
				p.PresencePenalty, p.FrequencyPenalty = openai.Float(1.5), openai.Float(0.5)
			}, []option.RequestOption{option.WithJSONSet("repetition_penalty", 1.3)}},
			{"logit_bias", func(p *openai.ChatCompletionNewParams) { p.LogitBias = map[string]int64{"9906": 100} }, nil},
			{"min_tokens_stop_token_ids", nil, []option.RequestOption{option.WithJSONSet("min_tokens", 4), option.WithJSONSet("stop_token_ids", []int{13, 11, 279})}},
			{"ignore_eos", nil, greedyEOS},
			{"logprobs", func(p *openai.ChatCompletionNewParams) { p.Logprobs, p.TopLogprobs = openai.Bool(true), openai.Int(3) }, nil},
		}
		for _, c := range cases {
			params := greedy(question, 12)
			if c.params != nil {
				c.params(&params)
			}
			want, err := refClient.Chat.Completions.New(ctx, params, c.extra...)
			if err != nil {
				t.Fatalf("%s: vLLM's server: %v", c.name, err)
			}
			got, err := client.Chat.Completions.New(ctx, params, c.extra...)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if len(got.Choices) != len(want.Choices) || got.Usage.CompletionTokens != want.Usage.CompletionTokens {
				t.Errorf("%s: %d choices, %d tokens; vLLM %d choices, %d tokens", c.name, len(got.Choices), got.Usage.CompletionTokens, len(want.Choices), want.Usage.CompletionTokens)
				continue
			}
			for i := range want.Choices {
				g, w := got.Choices[i], want.Choices[i]
				if g.Message.Content != w.Message.Content || g.FinishReason != w.FinishReason || w.Message.Content == "" {
					t.Errorf("%s choice %d: Vajra %q (%s), vLLM %q (%s)", c.name, i, g.Message.Content, g.FinishReason, w.Message.Content, w.FinishReason)
				}
				gl, wl := g.Logprobs.Content, w.Logprobs.Content
				if len(gl) != len(wl) {
					t.Errorf("%s choice %d: %d logprobs, vLLM %d", c.name, i, len(gl), len(wl))
					continue
				}
				for k := range wl {
					if d := gl[k].Logprob - wl[k].Logprob; d > 1e-3 || d < -1e-3 || len(gl[k].TopLogprobs) != len(wl[k].TopLogprobs) {
						t.Errorf("%s token %d: %+v, vLLM %+v", c.name, k, gl[k], wl[k])
					}
				}
			}
		}
	})

	t.Run("GenerationConfigDefaults", func(t *testing.T) {
		// Seeded, with temperature, top_k and max_tokens left out: both
		// take generation_config's, and answer alike.
		params := openai.ChatCompletionNewParams{Model: tinyName, Messages: userMsg(question), Seed: openai.Int(11)}
		want, err := refClient.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatalf("vLLM's server: %v", err)
		}
		got, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := got.Choices[0].Message.Content, want.Choices[0].Message.Content; g != w || got.Usage.CompletionTokens != want.Usage.CompletionTokens {
			t.Errorf("Vajra %q (%d tokens), vLLM %q (%d tokens)", g, got.Usage.CompletionTokens, w, want.Usage.CompletionTokens)
		}
		if got.Usage.CompletionTokens > genMaxNewTokens {
			t.Errorf("%d tokens without max_tokens; generation_config's max_new_tokens is %d", got.Usage.CompletionTokens, genMaxNewTokens)
		}
		// Given, the request's own win: greedy is greedy.
		params.Temperature = openai.Float(0)
		params.MaxTokens = openai.Int(8)
		g0, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		w0, err := refClient.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if g0.Choices[0].Message.Content != w0.Choices[0].Message.Content || g0.Usage.CompletionTokens != 8 {
			t.Errorf("given temperature 0: Vajra %q (%d tokens), vLLM %q", g0.Choices[0].Message.Content, g0.Usage.CompletionTokens, w0.Choices[0].Message.Content)
		}
	})

	t.Run("CacheSalt", func(t *testing.T) {
		// vLLM's cache_salt: the engine shares cached blocks only among
		// requests with the same salt; the answer does not change.
		// Long enough for whole cache blocks (128 tokens on the CPU).
		p := greedy(strings.Repeat("Tell me, in many words, about the sea, its waves, its tides and the ships that sail on it. ", 16), 4)
		ask := func(salt string) (string, int64) {
			res, err := client.Chat.Completions.New(ctx, p, option.WithJSONSet("cache_salt", salt))
			if err != nil {
				t.Fatalf("salt %q: %v", salt, err)
			}
			return res.Choices[0].Message.Content, res.Usage.PromptTokensDetails.CachedTokens
		}
		a1, c1 := ask("tenant-a")
		a2, c2 := ask("tenant-a")
		b1, cb := ask("tenant-b")
		if c1 != 0 || c2 == 0 || cb != 0 {
			t.Errorf("cached tokens: salt a first %d, again %d; salt b first %d (want 0, >0, 0)", c1, c2, cb)
		}
		if a1 != a2 || a1 != b1 || a1 == "" {
			t.Errorf("answers %q %q %q", a1, a2, b1)
		}
	})

	t.Run("ResponsesVLLMExtensions", func(t *testing.T) {
		// vLLM's Responses API takes its sampling extensions: seeded
		// top_k, min_p, repetition_penalty and stop give what vLLM's own
		// /v1/responses gives, and the seed decides (another answers
		// otherwise).
		params := responses.ResponseNewParams{Model: tinyName, Input: textInput(question), MaxOutputTokens: openai.Int(24),
			Temperature: openai.Float(1), Store: openai.Bool(false)}
		ext := []option.RequestOption{option.WithJSONSet("top_k", 20), option.WithJSONSet("min_p", 0.01),
			option.WithJSONSet("repetition_penalty", 1.3), option.WithJSONSet("seed", 7)}
		want, err := refClient.Responses.New(ctx, params, ext...)
		if err != nil {
			t.Fatalf("vLLM's server: %v", err)
		}
		got, err := client.Responses.New(ctx, params, ext...)
		if err != nil {
			t.Fatal(err)
		}
		if got.OutputText() != want.OutputText() || got.OutputText() == "" {
			t.Errorf("Vajra %q, vLLM %q", got.OutputText(), want.OutputText())
		}
		other, err := client.Responses.New(ctx, params, append(ext, option.WithJSONSet("seed", 8))...)
		if err != nil {
			t.Fatal(err)
		}
		if other.OutputText() == got.OutputText() {
			t.Errorf("seeds 7 and 8 both answer %q: the seed is not applied", got.OutputText())
		}
	})

	t.Run("VLLMExtensions", func(t *testing.T) {
		// vLLM's bad_words, allowed_token_ids, priority and
		// structured_outputs regex, choice and grammar: each changes what
		// the model says, and Vajra's answer is vLLM's server's. On
		// completions: to chat the random-weight model says newlines.
		complete := func(c *openai.Client, extra ...option.RequestOption) (*openai.Completion, error) {
			return c.Completions.New(ctx, openai.CompletionNewParams{
				Model: openai.CompletionNewParamsModel(tinyName), Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
				MaxTokens: openai.Int(12), Temperature: openai.Float(0),
			}, extra...)
		}
		ref, err := complete(&refClient)
		if err != nil {
			t.Fatalf("vLLM's server: %v", err)
		}
		plain := ref.Choices[0].Text
		words := strings.Fields(plain)
		if len(words) == 0 {
			t.Fatalf("vLLM completed %q", plain)
		}
		cases := []struct {
			name  string
			extra []option.RequestOption
			check func(string) bool
		}{
			{"bad_words", []option.RequestOption{option.WithJSONSet("bad_words", []string{words[0]})},
				func(c string) bool { return !strings.Contains(c, words[0]) }},
			{"allowed_token_ids", []option.RequestOption{option.WithJSONSet("allowed_token_ids", []int{13, 11, 279, 9906, 2})},
				func(c string) bool { return c != plain }},
			{"priority", []option.RequestOption{option.WithJSONSet("priority", 3)},
				func(c string) bool { return c == plain }},
			{"regex", []option.RequestOption{option.WithJSONSet("structured_outputs", map[string]any{"regex": `[a-z]{2,6} [0-9]{2}`})},
				regexp.MustCompile(`^[a-z]{2,6} [0-9]{2}$`).MatchString},
			{"choice", []option.RequestOption{option.WithJSONSet("structured_outputs", map[string]any{"choice": []string{"yes", "no", "the sea"}})},
				func(c string) bool { return c == "yes" || c == "no" || c == "the sea" }},
			{"grammar", []option.RequestOption{option.WithJSONSet("structured_outputs", map[string]any{"grammar": `root ::= "A" [0-9] [0-9]? "."`})},
				regexp.MustCompile(`^A[0-9]{1,2}\.$`).MatchString},
		}
		for _, c := range cases {
			want, err := complete(&refClient, c.extra...)
			if err != nil {
				t.Fatalf("%s: vLLM's server: %v", c.name, err)
			}
			got, err := complete(&client, c.extra...)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			g, w := got.Choices[0], want.Choices[0]
			if g.Text != w.Text || g.FinishReason != w.FinishReason {
				t.Errorf("%s: Vajra %q (%s), vLLM %q (%s)", c.name, g.Text, g.FinishReason, w.Text, w.FinishReason)
			}
			if !c.check(g.Text) {
				t.Errorf("%s: %q does not obey the constraint (unconstrained: %q)", c.name, g.Text, plain)
			}
		}
	})

	t.Run("StructuredOutput", func(t *testing.T) {
		schema := map[string]any{
			"type": "object", "additionalProperties": false, "required": []string{"answer"},
			"properties": map[string]any{"answer": map[string]any{"type": "string", "enum": []string{"yes", "no"}}},
		}
		params := greedy(question, 48)
		params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "verdict", Schema: schema, Strict: openai.Bool(true)},
		}}
		res, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Answer string `json:"answer"`
		}
		content := res.Choices[0].Message.Content
		if err := json.Unmarshal([]byte(content), &v); err != nil || (v.Answer != "yes" && v.Answer != "no") || res.Choices[0].FinishReason != "stop" {
			t.Fatalf("json_schema: %q (%s): %v", content, res.Choices[0].FinishReason, err)
		}
		obj := greedy(question, 48)
		obj.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
		res, err = client.Chat.Completions.New(ctx, obj)
		if err != nil {
			t.Fatal(err)
		}
		if c := res.Choices[0].Message.Content; !strings.HasPrefix(strings.TrimSpace(c), "{") {
			t.Fatalf("json_object: %q", c)
		}

		tools := greedy(question, 64)
		tools.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "get_weather",
			Parameters: shared.FunctionParameters{
				"type": "object", "additionalProperties": false, "required": []string{"city"},
				"properties": map[string]any{"city": map[string]any{"type": "string", "enum": []string{"Paris", "Oslo"}}},
			},
		})}
		tools.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
		res, err = client.Chat.Completions.New(ctx, tools)
		if err != nil {
			t.Fatal(err)
		}
		ch := res.Choices[0]
		if len(ch.Message.ToolCalls) == 0 || ch.FinishReason != "tool_calls" {
			t.Fatalf("tool_choice required: %s", res.RawJSON())
		}
		var args struct {
			City string `json:"city"`
		}
		if fn := ch.Message.ToolCalls[0].Function; json.Unmarshal([]byte(fn.Arguments), &args) != nil || fn.Name != "get_weather" || (args.City != "Paris" && args.City != "Oslo") {
			t.Fatalf("tool call %s(%s)", fn.Name, fn.Arguments)
		}
	})

	t.Run("PythonSDKs", func(t *testing.T) {
		py := venvPython(t)
		pctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
		defer cancel()
		args := []string{"-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "console_output_style=classic"}
		// test_chat and test_messages want text that is not blank, which
		// the random-weight model does not say to their question (vLLM's
		// own server answers it newlines too: ChatParity).
		for _, name := range []string{"test_openai.py::test_chat_stream_equals_non_stream",
			"test_openai.py::test_chat_n", "test_openai.py::test_responses_stream", "test_openai.py::test_models",
			"test_openai.py::test_error_400", "test_openai.py::test_error_404",
			"test_anthropic.py::test_messages_stream_equals_non_stream", "test_anthropic.py::test_messages_multi_turn", "test_anthropic.py::test_count_tokens"} {
			args = append(args, "python/"+name)
		}
		cmd := exec.CommandContext(pctx, py, args...)
		cmd.Env = append(os.Environ(), "VAJRA_BASE_URL="+base, "VAJRA_API_KEY=test-key", "VAJRA_MODEL="+tinyName,
			"VAJRA_MAX_CONCURRENT=3", "PYTHONDONTWRITEBYTECODE=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pytest: %v\n%s", err, out)
		}
		t.Logf("pytest:\n%s", out)
	})

	t.Run("NodeSDKs", func(t *testing.T) {
		// The tests that hold for any model: the random-weight model
		// answers chat with newlines.
		runNodeSuite(t, base, "test-key", tinyName, `\(any model\)`)
	})

	t.Run("Metrics", func(t *testing.T) {
		// The engine's scheduler stats feed vLLM's metric names: the
		// prefix cache has been asked for every prompt so far.
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var queries float64
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "vllm:prefix_cache_queries_total{") {
				f := strings.Fields(line)
				queries, _ = strconv.ParseFloat(f[len(f)-1], 64)
			}
		}
		if queries <= 0 || !strings.Contains(string(b), "vllm:kv_cache_usage_perc{") || !strings.Contains(string(b), "vllm:prefix_cache_hits_total{") {
			t.Fatalf("vllm:prefix_cache_queries_total %v in:\n%s", queries, b)
		}
	})

	t.Run("ControlEndpoints", func(t *testing.T) {
		controlCalls(t, base)
		// Served again after the wake-up.
		got, err := client.Chat.Completions.New(ctx, greedy(question, 16))
		if err != nil {
			t.Fatal(err)
		}
		if want := refChat[question].Choices[0].Message.Content; got.Choices[0].Message.Content != want {
			t.Fatalf("after the wake-up: %q, vLLM %q", got.Choices[0].Message.Content, want)
		}
	})

	t.Run("DisconnectAborts", func(t *testing.T) {
		// A client that leaves mid-stream: the abort reaches the engine,
		// whose running count (its scheduler stats, with every step's
		// outputs) no longer holds the request once another one runs.
		sctx, cancel := context.WithCancel(ctx)
		stream := client.Chat.Completions.NewStreaming(sctx, greedy(question, 1900), greedyEOS...)
		for i := 0; i < 5 && stream.Next(); i++ {
		}
		if n := attached().Running(); n != 1 {
			t.Fatalf("the engine runs %d requests while one streams", n)
		}
		cancel()
		stream.Close()
		eventually.True(t, "Vajra's in-flight count back to 0", func() bool { return srv.Engine().Stats().Running == 0 })
		next := client.Chat.Completions.NewStreaming(ctx, greedy(question, 40), greedyEOS...)
		for i := 0; i < 5 && next.Next(); i++ {
		}
		if n := attached().Running(); n != 1 {
			t.Fatalf("the engine runs %d requests after the first one's client left (want the second alone)", n)
		}
		for next.Next() {
		}
		if err := next.Err(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("KilledAndReattached", func(t *testing.T) {
		killMidStream(t, 2, time.Minute, eng.Kill, func() *ssestream.Stream[openai.ChatCompletionChunk] {
			return client.Chat.Completions.NewStreaming(ctx, greedy(question, 1900), greedyEOS...)
		})
		eventually.True(t, "the dead engine removed", func() bool { return attached() == nil })
		_, err := client.Chat.Completions.New(ctx, greedy(question, 4))
		var apiErr *openai.Error
		if !asError(err, &apiErr) || apiErr.StatusCode != 503 {
			t.Fatalf("chat with no engine attached: %v", err)
		}
		eng.Restart(t)
		eng.Wait(t, 15*time.Minute, func() bool { return attached() != nil })
		got, err := client.Chat.Completions.New(ctx, greedy(question, 16))
		if err != nil {
			t.Fatal(err)
		}
		if want := refChat[question].Choices[0].Message.Content; got.Choices[0].Message.Content != want {
			t.Fatalf("after re-attaching: %q, vLLM %q", got.Choices[0].Message.Content, want)
		}
		if !strings.HasPrefix(re.Workers()[0].URL(), "vllm-core://") {
			t.Fatalf("worker %q", re.Workers()[0].URL())
		}
	})
}

// controlCalls checks vLLM's engine control endpoints on a real engine:
// the prefix cache reset, a level 0 sleep (scheduling paused, which a CPU
// engine supports without --enable-sleep-mode) and the wake-up.
func controlCalls(t *testing.T, base string) {
	t.Helper()
	for _, c := range []struct{ method, path, want string }{
		{"POST", "/reset_prefix_cache", `{"success":true}`},
		{"GET", "/is_sleeping", `{"is_sleeping":false}`},
		{"POST", "/sleep?level=0", `{"status":"sleeping","level":0}`},
		{"GET", "/is_sleeping", `{"is_sleeping":true}`},
		{"POST", "/wake_up?tags=scheduling", `{"status":"awake","tags":["scheduling"]}`},
		{"GET", "/is_sleeping", `{"is_sleeping":false}`},
	} {
		req, _ := http.NewRequest(c.method, base+c.path, nil)
		req.Header.Set("Authorization", "Bearer test-key")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != c.want {
			t.Fatalf("%s %s: %d %s, want %s", c.method, c.path, resp.StatusCode, b, c.want)
		}
	}
}

// TestVLLMCoreDataParallel: one `vllm serve --headless` with two
// data-parallel ranks (two engine core processes on the tiny Llama; a
// dense model's ranks run independently) attaches to Vajra, each rank a
// worker of its own (vllm-core://HOST:PORT#RANK). A request pinned by
// vLLM's X-data-parallel-rank header runs on that rank (X-Vajra-Worker
// names it, streamed and not), both ranks give the same greedy answer, a
// rank no engine serves is a 503 naming it, and requests without the
// header are served.
func TestVLLMCoreDataParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts vLLM (minutes)")
	}
	bin := vllmserver.Need(t)
	model := vllmserver.Model(t, bin)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := lis.Addr().String()
	lis.Close()
	srv, base := startRemote(t, func(cfg *vajra.Config) {
		cfg.Remote.TokenizerPath, cfg.WorkerHeader = model, true
	}, "vllm-core://"+hs)
	eng := vllmserver.StartHeadless(t, hs, "--data-parallel-size", "2", "--data-parallel-size-local", "2")
	re := srv.Engine().(*remote.Engine)
	eng.Wait(t, 15*time.Minute, func() bool {
		var ranks []int
		for _, w := range re.Workers() {
			if r, ok := remote.RankOf(w); ok && w.Healthy() {
				ranks = append(ranks, r)
			}
		}
		slices.Sort(ranks)
		return slices.Equal(ranks, []int{0, 1})
	})
	ctx := context.Background()
	client := newClient(base)
	params := openai.ChatCompletionNewParams{
		Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(12), Temperature: openai.Float(0),
	}
	rank := func(r string) option.RequestOption { return option.WithHeader("X-data-parallel-rank", r) }
	var answers []string
	for _, r := range []string{"0", "1"} {
		for range 2 {
			var resp *http.Response
			res, err := client.Chat.Completions.New(ctx, params, rank(r), option.WithResponseInto(&resp))
			if err != nil {
				t.Fatalf("rank %s: %v", r, err)
			}
			if w := resp.Header.Get("X-Vajra-Worker"); !strings.HasSuffix(w, "#"+r) {
				t.Fatalf("pinned to rank %s, ran on %q", r, w)
			}
			answers = append(answers, res.Choices[0].Message.Content)
		}
		var resp *http.Response
		stream := client.Chat.Completions.NewStreaming(ctx, params, rank(r), option.WithResponseInto(&resp))
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("rank %s streamed: %v", r, err)
		}
		if w := resp.Header.Get("X-Vajra-Worker"); !strings.HasSuffix(w, "#"+r) {
			t.Fatalf("streamed, pinned to rank %s, ran on %q", r, w)
		}
		answers = append(answers, acc.Choices[0].Message.Content)
	}
	if answers[0] == "" {
		t.Fatal("rank 0 answered nothing")
	}
	for _, a := range answers[1:] {
		if a != answers[0] {
			t.Fatalf("greedy answers differ across ranks: %q", answers)
		}
	}
	// A dense model's ranks register as independent engines, saying
	// nothing of how many there are: a rank none serves may attach yet,
	// and is a 503 naming it.
	_, err = client.Chat.Completions.New(ctx, params, rank("2"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 503 || !strings.Contains(apiErr.Message, "data-parallel rank 2") {
		t.Fatalf("rank 2: %v", err)
	}

	// Without the header: any rank, the same answer.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			res, err := client.Chat.Completions.New(ctx, params)
			if err == nil && res.Choices[0].Message.Content != answers[0] {
				err = fmt.Errorf("unpinned: %q, pinned %q", res.Choices[0].Message.Content, answers[0])
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

}
