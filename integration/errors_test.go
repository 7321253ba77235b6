package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/sim"
	"github.com/vajra-go/vajra/internal/eventually"
)

// Error mapping in every dialect: before the 200 (status and body shape),
// and after it (the dialect's in-stream error event, then a clean end).

func TestOpenAIErrorMapping(t *testing.T) {
	_, _, base := startServer(t, func(c *vajra.Config) { c.EngineConfig.MaxModelLen = 512 })
	client := newClient(base)
	ctx := context.Background()
	long := strings.Repeat("sea ", 600)
	cases := []struct {
		name   string
		call   func() error
		status int
		code   string
		param  string
	}{
		{"chat unknown model", func() error {
			_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "nope", Messages: userMsg("hi")})
			return err
		}, 404, "model_not_found", "model"},
		{"completions unknown model", func() error {
			_, err := client.Completions.New(ctx, openai.CompletionNewParams{Model: "nope", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")}})
			return err
		}, 404, "model_not_found", "model"},
		{"responses unknown model", func() error {
			_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "nope", Input: textInput("hi")})
			return err
		}, 404, "model_not_found", "model"},
		{"chat temperature", func() error {
			_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: vajra.DefaultModelName, Messages: userMsg("hi"), Temperature: openai.Float(3)})
			return err
		}, 400, "", "temperature"},
		{"chat top_logprobs 21", func() error {
			_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: vajra.DefaultModelName, Messages: userMsg("hi"),
				Logprobs: openai.Bool(true), TopLogprobs: openai.Int(21)})
			return err
		}, 400, "", "top_logprobs"},
		{"chat wrong type", func() error {
			_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: vajra.DefaultModelName, Messages: userMsg("hi")},
				option.WithJSONSet("n", "two"))
			return err
		}, 400, "invalid_type", "n"},
		{"completions logprobs 21", func() error {
			_, err := client.Completions.New(ctx, openai.CompletionNewParams{Model: vajra.DefaultModelName,
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")}, Logprobs: openai.Int(21)})
			return err
		}, 400, "", "logprobs"},
		{"responses max_output_tokens", func() error {
			_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: vajra.DefaultModelName, Input: textInput("hi"), MaxOutputTokens: openai.Int(0)},
				option.WithJSONSet("max_output_tokens", 0))
			return err
		}, 400, "", "max_output_tokens"},
		{"chat context length", func() error {
			_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: vajra.DefaultModelName, Messages: userMsg(long)})
			return err
		}, 400, "context_length_exceeded", "messages"},
		{"completions context length", func() error {
			_, err := client.Completions.New(ctx, openai.CompletionNewParams{Model: vajra.DefaultModelName,
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(long)}})
			return err
		}, 400, "context_length_exceeded", "max_tokens"}, // the default 16 does not fit either
		{"responses context length", func() error {
			_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: vajra.DefaultModelName, Input: textInput(long)})
			return err
		}, 400, "context_length_exceeded", "input"},
		// vLLM's X-data-parallel-rank: the simulator is rank 0 of 1.
		{"chat data-parallel rank 1", func() error {
			_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: vajra.DefaultModelName, Messages: userMsg("hi")},
				option.WithHeader("X-data-parallel-rank", "1"))
			return err
		}, 400, "", "X-data-parallel-rank"},
		{"completions data-parallel rank not a number", func() error {
			_, err := client.Completions.New(ctx, openai.CompletionNewParams{Model: vajra.DefaultModelName,
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")}}, option.WithHeader("X-Data-Parallel-Rank", "first"))
			return err
		}, 400, "", "X-data-parallel-rank"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("%v is not an *openai.Error", err)
			}
			if apiErr.StatusCode != c.status || apiErr.Param != c.param || (c.code != "" && apiErr.Code != c.code) || apiErr.Message == "" {
				t.Fatalf("got %d code %q param %q (%s); want %d %q %q", apiErr.StatusCode, apiErr.Code, apiErr.Param, apiErr.RawJSON(), c.status, c.code, c.param)
			}
		})
	}
}

// TestOverload fills the engine (one running sequence, one waiting) and
// checks that the next request is refused with 429 (OpenAI) or 529
// (Anthropic), before any byte of a stream.
func TestOverload(t *testing.T) {
	if testing.Short() {
		t.Skip("holds sequences for a while")
	}
	_, obs, base := startServer(t, func(c *vajra.Config) {
		c.EngineConfig.MaxNumSeqs = 1
		c.Sim.MaxWaiting = 1
		c.Sim.ITL = 2 * time.Millisecond
	})
	client := newClient(base)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Two long streams, one after the other: the first runs, the second
	// waits. Each is started only once the engine shows the previous one in
	// place, so that the second is not itself refused.
	var wg sync.WaitGroup
	stream := func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
				Model: vajra.DefaultModelName, Messages: userMsg("hi"), MaxTokens: openai.Int(2000),
			}, option.WithJSONSet("ignore_eos", true))
			for s.Next() {
			}
		}()
	}
	stream()
	waitEngine(t, obs, func(st engine.Stats) bool { return st.Running == 1 })
	stream()
	waitEngine(t, obs, func(st engine.Stats) bool { return st.Running == 1 && st.Waiting == 1 })
	// The engine is full: the next request is refused before any work.
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: vajra.DefaultModelName, Messages: userMsg("hi"), MaxTokens: openai.Int(1)})
	var openaiErr *openai.Error
	if !errors.As(err, &openaiErr) || openaiErr.StatusCode != 429 {
		t.Fatalf("no 429 while the engine is full: %v", err)
	}
	a := newAnthropic(base)
	_, err = a.Messages.New(context.Background(), anthropic.MessageNewParams{Model: vajra.DefaultModelName, MaxTokens: 1, Messages: userText("hi")})
	var anthErr *anthropic.Error
	if !errors.As(err, &anthErr) || anthErr.StatusCode != 529 || !strings.Contains(anthErr.RawJSON(), `"overloaded_error"`) {
		t.Fatalf("anthropic overload: %v", err)
	}
	cancel()
	wg.Wait()
}

// waitEngine waits, bounded, until the engine's figures satisfy ok. The
// engine offers no event for admission, so this looks at its published
// figures, which change once per scheduler pass.
func waitEngine(t *testing.T, e engine.Engine, ok func(engine.Stats) bool) {
	t.Helper()
	eventually.Report(t, "the engine reaches the expected state", func() bool { return ok(e.Stats()) },
		func() string { return fmt.Sprintf("%+v", e.Stats()) })
}

// failMidStream is a prompt that failingEngine answers with one token and
// then an engine failure, to test errors after the 200.
const failMidStream = "FAIL-MID-STREAM"

// failingEngine fails requests whose last message (or prompt) is
// failMidStream after one token, through the request's own Formatter, as
// an engine failing mid-generation would; others go to the engine.
type failingEngine struct{ engine.Engine }

type noSession struct{}

func (noSession) Abort() {}

func (e failingEngine) Start(req *engine.Request, sink engine.Sink) (engine.Session, error) {
	last := req.Prompt
	if n := len(req.Messages); n > 0 {
		last = req.Messages[n-1].Content
	}
	if last != failMidStream || !req.Stream {
		return e.Engine.Start(req, sink)
	}
	go func() {
		f := req.Formatter
		frames := f.AppendStart(nil, &engine.Start{PromptTokens: len(req.PromptTokens), N: 1})
		frames = f.AppendDelta(frames, &engine.Delta{First: true, Text: []byte("Hello"), TokenIDs: []int{13225}})
		err := &engine.Error{Kind: engine.KindInternal, Message: "simulated engine failure"}
		frames = f.AppendError(frames, err)
		sink.Deliver(frames, &engine.Result{Err: err})
	}()
	return noSession{}, nil
}

func TestErrorsAfterTheStatusLine(t *testing.T) {
	_, _, base := startServer(t, nil)
	_ = base
	e, err := sim.New(sim.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := vajra.DefaultConfig()
	cfg.Port, cfg.Loops, cfg.Engine = 0, 1, failingEngine{e}
	srv, err := vajra.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	base = "http://" + srv.Addr().String()
	client := newClient(base)
	ctx := context.Background()

	t.Run("chat", func(t *testing.T) {
		s := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: vajra.DefaultModelName, Messages: userMsg(failMidStream)})
		text := ""
		for s.Next() {
			for _, c := range s.Current().Choices {
				text += c.Delta.Content
			}
		}
		if text != "Hello" || s.Err() == nil || !strings.Contains(s.Err().Error(), "engine failed") {
			t.Fatalf("text %q err %v", text, s.Err())
		}
	})
	t.Run("completions", func(t *testing.T) {
		s := client.Completions.NewStreaming(ctx, openai.CompletionNewParams{Model: vajra.DefaultModelName,
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(failMidStream)}})
		for s.Next() {
		}
		if s.Err() == nil {
			t.Fatal("no stream error")
		}
	})
	t.Run("responses", func(t *testing.T) {
		s := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: vajra.DefaultModelName, Input: textInput(failMidStream)})
		last := ""
		var final responses.Response
		for s.Next() {
			last = s.Current().Type
			if last == "response.failed" {
				final = s.Current().Response
			}
		}
		if last != "response.failed" || final.Status != "failed" || final.Error.Message == "" {
			t.Fatalf("last event %q, response %s, err %v", last, final.RawJSON(), s.Err())
		}
	})
	t.Run("messages", func(t *testing.T) {
		a := newAnthropic(base)
		s := a.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: vajra.DefaultModelName, MaxTokens: 8, Messages: userText(failMidStream)})
		for s.Next() {
		}
		var apiErr *anthropic.Error
		if !errors.As(s.Err(), &apiErr) || !strings.Contains(apiErr.RawJSON(), "api_error") {
			t.Fatalf("stream error %v", s.Err())
		}
	})
	// The connection stays usable after a failed stream.
	if _, err := client.Models.List(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestDataParallelRankHeader: vLLM's X-data-parallel-rank on an engine
// without ranks (the simulator), which is rank 0 of 1 as vLLM with one
// engine: rank 0 answers, rank 1 is vLLM's 400 in each dialect's shape.
func TestDataParallelRankHeader(t *testing.T) {
	_, _, base := startServer(t, nil)
	ctx := context.Background()
	client := newClient(base)
	res, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: vajra.DefaultModelName, Messages: userMsg("hi"), MaxTokens: openai.Int(4)},
		option.WithHeader("X-data-parallel-rank", "0"))
	if err != nil || res.Choices[0].Message.Content == "" {
		t.Fatalf("rank 0: %v", err)
	}
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: vajra.DefaultModelName, Messages: userMsg("hi")},
		option.WithHeader("X-data-parallel-rank", "1"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Message != "data_parallel_rank 1 is out of range [0, 1)." {
		t.Fatalf("rank 1: %v", err)
	}
	ac := newAnthropic(base)
	_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{Model: vajra.DefaultModelName, MaxTokens: 4, Messages: userText("hi")},
		aoption.WithHeader("X-data-parallel-rank", "-2"))
	var aErr *anthropic.Error
	if !errors.As(err, &aErr) || aErr.StatusCode != 400 || !strings.Contains(aErr.RawJSON(), "data_parallel_rank -2 is out of range") ||
		!strings.Contains(aErr.RawJSON(), `"type":"invalid_request_error"`) {
		t.Fatalf("messages, rank -2: %v", err)
	}
}
