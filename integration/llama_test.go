package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine/llama"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
	"github.com/vajra-go/vajra/internal/eventually"
)

// The llama.cpp engine behind the real server, with a tiny random-weight
// model made on the fly, through every dialect's official SDK.

const tinyName = "tiny"

// startLlama starts a server on a fresh tiny model, or skips when the
// llama.cpp libraries are not installed (fails with VAJRA_REQUIRE_LLAMA).
// llamaConfig is the llama engine's own configuration in c (startLlama's
// and startReal's DriverConfig), for a test to change.
func llamaConfig(c *vajra.Config) *llama.Config { return c.DriverConfig.(*llama.Config) }

func startLlama(t *testing.T, mutate func(*vajra.Config)) (*vajra.Server, string) {
	t.Helper()
	lib, err := llama.FindLibDir()
	if err != nil {
		if os.Getenv("VAJRA_REQUIRE_LLAMA") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	path, err := tinymodel.TempFile(t.TempDir(), tinymodel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := vajra.DefaultConfig()
	cfg.Port, cfg.Loops = 0, 2
	cfg.ServedModelNames = []string{tinyName}
	cfg.Driver, cfg.DriverConfig = llama.DriverName, &llama.Config{ModelPath: path, LibDir: lib, Threads: 1, PrefixCaching: true}
	cfg.EngineConfig.MaxModelLen = 1024
	if mutate != nil {
		mutate(&cfg)
	}
	return runServer(t, cfg)
}

var greedyEOS = []option.RequestOption{option.WithJSONSet("ignore_eos", true)}

func TestLlamaChatStreamEqualsNonStream(t *testing.T) {
	_, base := startLlama(t, nil)
	client := newClient(base)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:       tinyName,
		Messages:    userMsg(question),
		Temperature: openai.Float(0),
		MaxTokens:   openai.Int(24),
	}
	res, err := client.Chat.Completions.New(ctx, params, greedyEOS...)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Choices[0]
	if c.FinishReason != "length" || res.Usage.CompletionTokens != 24 || res.Usage.PromptTokens == 0 {
		t.Fatalf("finish %q usage %+v", c.FinishReason, res.Usage)
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, params, greedyEOS...)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("accumulator refused %s", stream.Current().RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != c.Message.Content {
		t.Fatalf("streamed %q\nnon-streamed %q", got, c.Message.Content)
	}
	if acc.Usage.CompletionTokens != 24 {
		t.Fatalf("streamed usage %+v", acc.Usage)
	}
	// The same prompt again: its prefix comes from the cache.
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	again, err := client.Chat.Completions.New(ctx, params, greedyEOS...)
	if err != nil {
		t.Fatal(err)
	}
	if cached := again.Usage.PromptTokensDetails.CachedTokens; cached == 0 || cached >= again.Usage.PromptTokens {
		t.Fatalf("cached_tokens %d of %d", cached, again.Usage.PromptTokens)
	}
}

func TestLlamaCompletionsEchoLogprobs(t *testing.T) {
	_, base := startLlama(t, nil)
	client := newClient(base)
	res, err := client.Completions.New(context.Background(), openai.CompletionNewParams{
		Model:       openai.CompletionNewParamsModel(tinyName),
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("The sea is")},
		MaxTokens:   openai.Int(6),
		Temperature: openai.Float(0),
		Echo:        openai.Bool(true),
		Logprobs:    openai.Int(2),
	}, greedyEOS...)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Choices[0]
	if !strings.HasPrefix(c.Text, "The sea is") || res.Usage.CompletionTokens != 6 {
		t.Fatalf("text %q usage %+v", c.Text, res.Usage)
	}
	if n := len(c.Logprobs.Tokens); n != int(res.Usage.PromptTokens)+6 {
		t.Fatalf("%d logprob tokens for %d prompt + 6", n, res.Usage.PromptTokens)
	}
}

func TestLlamaResponsesStoredAndStreamed(t *testing.T) {
	_, base := startLlama(t, nil)
	client := newClient(base)
	ctx := context.Background()
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: tinyName, Input: textInput(question), MaxOutputTokens: openai.Int(16),
	})
	var final responses.Response
	var text strings.Builder
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed", "response.incomplete":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if final.ID == "" || final.OutputText() != text.String() || final.Usage.OutputTokens == 0 {
		t.Fatalf("final %s, streamed %q", final.RawJSON(), text.String())
	}
	got, err := client.Responses.Get(ctx, final.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.OutputText() != final.OutputText() {
		t.Fatalf("stored %q, streamed %q", got.OutputText(), final.OutputText())
	}
	next, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: tinyName, Input: textInput("And then?"), MaxOutputTokens: openai.Int(4),
		PreviousResponseID: openai.String(final.ID),
	})
	if err != nil {
		t.Fatal(err)
	}
	if next.Usage.InputTokens <= final.Usage.InputTokens {
		t.Fatalf("chained input %d tokens, first %d", next.Usage.InputTokens, final.Usage.InputTokens)
	}
}

func TestLlamaAnthropicMessages(t *testing.T) {
	_, base := startLlama(t, nil)
	client := newAnthropic(base)
	ctx := context.Background()
	params := anthropic.MessageNewParams{
		Model:     tinyName,
		MaxTokens: 12,
		System:    []anthropic.TextBlockParam{{Text: "You are a sailor."}},
		Messages:  userText(question),
	}
	count, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
		Model:    params.Model,
		System:   anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: params.System},
		Messages: params.Messages,
	})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := client.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if in := msg.Usage.InputTokens + msg.Usage.CacheReadInputTokens; in != count.InputTokens || count.InputTokens == 0 {
		t.Fatalf("count_tokens %d, message input %d+%d", count.InputTokens, msg.Usage.InputTokens, msg.Usage.CacheReadInputTokens)
	}
	stream := client.Messages.NewStreaming(ctx, params)
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Usage.OutputTokens == 0 || acc.StopReason == "" {
		t.Fatalf("streamed message %s", acc.RawJSON())
	}
}

func TestLlamaModelsAndTokenize(t *testing.T) {
	srv, base := startLlama(t, nil)
	addr := strings.TrimPrefix(base, "http://")
	status, _, body := get(t, addr, "GET", "/v1/models", "")
	if status != 200 || !strings.Contains(body, `"id":"tiny"`) || !strings.Contains(body, `"max_model_len":1024`) {
		t.Fatalf("/v1/models: %d %s", status, body)
	}
	status, _, body = get(t, addr, "POST", "/tokenize", `{"model":"tiny","prompt":"Hello, sea! <|im_start|>"}`)
	var tok struct {
		Count  int   `json:"count"`
		Tokens []int `json:"tokens"`
	}
	if err := json.Unmarshal([]byte(body), &tok); status != 200 || err != nil || tok.Count != len(tok.Tokens) {
		t.Fatalf("/tokenize: %d %s", status, body)
	}
	want := tinymodel.DefaultVocab().Encode("Hello, sea! <|im_start|>", true)
	if len(want) != tok.Count || int(want[len(want)-1]) != tok.Tokens[tok.Count-1] {
		t.Fatalf("/tokenize %v, the model's tokenizer gives %v", tok.Tokens, want)
	}
	ids, _ := json.Marshal(tok.Tokens[:tok.Count-1])
	status, _, body = get(t, addr, "POST", "/detokenize", `{"model":"tiny","tokens":`+string(ids)+`}`)
	if status != 200 || body != `{"prompt":"Hello, sea! "}` {
		t.Fatalf("/detokenize: %d %s", status, body)
	}
	_ = srv
}

// TestLlamaDisconnectAbortsAtOnce: a client that leaves mid-stream frees
// its engine sequence.
func TestLlamaDisconnectAbortsAtOnce(t *testing.T) {
	srv, base := startLlama(t, nil)
	client := newClient(base)
	ctx, cancel := context.WithCancel(context.Background())
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(900),
	}, greedyEOS...)
	for i := 0; i < 5 && stream.Next(); i++ {
	}
	if srv.Engine().Stats().Running != 1 {
		t.Fatalf("running %d while streaming", srv.Engine().Stats().Running)
	}
	cancel()
	stream.Close()
	eventually.True(t, "the sequence ends after the client left", func() bool { return srv.Engine().Stats().Running == 0 })
}

// TestLlamaManyStreamsAndPreemption: 200 concurrent streams over a KV
// cache too small for all of them at once; every stream ends with its
// finish and usage, and the engine preempted some.
func TestLlamaManyStreamsAndPreemption(t *testing.T) {
	srv, base := startLlama(t, func(c *vajra.Config) {
		ec := &c.EngineConfig
		ec.MaxNumSeqs, ec.MaxModelLen, ec.KVCacheTokens = 32, 256, 1024
	})
	client := newClient(base)
	const n = 200
	errs := make(chan error, n)
	for i := range n {
		go func() {
			stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
				Model: tinyName, Messages: userMsg("Stream " + strings.Repeat("ab", i%9) + " wants a long answer."),
				MaxTokens:     openai.Int(40),
				Temperature:   openai.Float(0.9),
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
			}, greedyEOS...)
			finish, usage := "", int64(0)
			for stream.Next() {
				ch := stream.Current()
				if len(ch.Choices) > 0 && ch.Choices[0].FinishReason != "" {
					finish = ch.Choices[0].FinishReason
				}
				if ch.Usage.CompletionTokens > 0 {
					usage = ch.Usage.CompletionTokens
				}
			}
			switch {
			case stream.Err() != nil:
				errs <- stream.Err()
			case finish != "length" || usage != 40:
				errs <- errors.New("stream " + strconv.Itoa(i) + " ended with finish " + strconv.Quote(finish) + " after " + strconv.FormatInt(usage, 10) + " tokens")
			default:
				errs <- nil
			}
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	st := srv.Engine().Stats()
	if st.Preemptions == 0 {
		t.Fatalf("no preemption with a KV cache of 1024 tokens for 32 sequences of up to ~50: %+v", st)
	}
	if st.Running != 0 || st.Waiting != 0 {
		t.Fatalf("after all streams: %+v", st)
	}
}

// TestLlamaReasoningParser: with --reasoning-parser deepseek_r1 the
// model's text before </think> is reasoning in each dialect. A logit bias
// on </think> (token 260 of the tiny vocabulary) makes the tag come early.
func TestLlamaReasoningParser(t *testing.T) {
	_, base := startLlama(t, func(c *vajra.Config) { c.EngineConfig.ReasoningParser = "deepseek_r1" })
	client := newClient(base)
	think := option.WithJSONSet("logit_bias", map[string]int{"260": 4})
	res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(64), Seed: openai.Int(5), Temperature: openai.Float(1),
	}, think, option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		Content          string `json:"content"`
		ReasoningContent string `json:"reasoning_content"`
	}
	if err := json.Unmarshal([]byte(res.Choices[0].Message.RawJSON()), &msg); err != nil {
		t.Fatal(err)
	}
	if msg.ReasoningContent == "" || msg.Content == "" || strings.Contains(msg.ReasoningContent, "</think>") {
		t.Fatalf("reasoning %q, content %q", msg.ReasoningContent, msg.Content)
	}
	if res.Usage.CompletionTokensDetails.ReasoningTokens == 0 || res.Usage.CompletionTokensDetails.ReasoningTokens >= res.Usage.CompletionTokens {
		t.Fatalf("usage %+v", res.Usage)
	}
	// Anthropic: the reasoning comes first, as a thinking block.
	ac := newAnthropic(base)
	am, err := ac.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: tinyName, MaxTokens: 64, Messages: userText(question),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(am.Content) == 0 || am.Content[0].Type != "thinking" || am.Content[0].Thinking == "" {
		t.Fatalf("anthropic message %s", am.RawJSON())
	}
}
