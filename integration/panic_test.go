package integration_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama"
)

// panickingFormatters is an engine whose requests asking for it (a user
// message holding "PANIC-IN-FORMATTER") get a Formatter that panics at its
// third delta, on the engine's goroutine.
type panickingFormatters struct{ engine.Engine }

func (p panickingFormatters) Start(req *engine.Request, sink engine.Sink) (engine.Session, error) {
	for _, m := range req.Messages {
		if strings.Contains(m.Content, "PANIC-IN-FORMATTER") && req.Formatter != nil {
			req.Formatter = &panicAtDelta{Formatter: req.Formatter, at: 3}
		}
	}
	return p.Engine.Start(req, sink)
}

type panicAtDelta struct {
	engine.Formatter
	at, n int
}

func (f *panicAtDelta) AppendDelta(dst []byte, d *engine.Delta) []byte {
	if f.n++; f.n == f.at {
		panic("formatter exploded")
	}
	return f.Formatter.AppendDelta(dst, d)
}

// formatterPanicAmongStreams runs 50 streams and one whose Formatter
// panics, all at once, on the server at base: the failed stream ends
// with the dialect's in-stream error event (after the 200 and a few
// chunks), every other stream with its finish reason and usage, the
// panic is counted once in vajra_session_panics_total, and the server
// serves on.
func formatterPanicAmongStreams(t *testing.T, base, model string, maxTokens int64) {
	client := newClient(base)
	stream := func(content string) (chunks int, finish string, usage int64, err error) {
		s := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
			Model:         model,
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage(content)},
			MaxTokens:     openai.Int(maxTokens),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		}, option.WithJSONSet("ignore_eos", true))
		for s.Next() {
			c := s.Current()
			chunks++
			if len(c.Choices) > 0 && c.Choices[0].FinishReason != "" {
				finish = c.Choices[0].FinishReason
			}
			if c.Usage.CompletionTokens > 0 {
				usage = c.Usage.CompletionTokens
			}
		}
		return chunks, finish, usage, s.Err()
	}
	const others = 50
	var wg sync.WaitGroup
	errs := make(chan string, others)
	for i := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, finish, usage, err := stream("stream " + strings.Repeat("x", i%7) + " beside a failing one")
			if err != nil || finish != "length" || usage != maxTokens {
				errs <- "finish " + finish + ", err " + errString(err)
			}
		}()
	}
	chunks, finish, _, err := stream("PANIC-IN-FORMATTER please")
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("a stream beside the panic: %s", e)
	}
	if err == nil || !strings.Contains(err.Error(), `"type":"server_error"`) {
		t.Fatalf("the failed stream ended with err %v (finish %q), want the in-stream server error", err, finish)
	}
	if chunks < 2 || finish != "" {
		t.Fatalf("the failed stream: %d chunks before the error, finish %q; want its first deltas and no finish", chunks, finish)
	}
	if v := value(scrape(t, strings.TrimPrefix(base, "http://")), "vajra_session_panics_total"); v != 1 {
		t.Fatalf("vajra_session_panics_total = %v, want 1", v)
	}
	if _, finish, usage, err := stream("after the panic"); err != nil || finish != "length" || usage != maxTokens {
		t.Fatalf("a stream after the panic: finish %q usage %d err %v", finish, usage, err)
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// TestFormatterPanicEndsOnlyThatStream: a Formatter that panics on the
// simulated engine's goroutine ends its own stream with the in-stream
// error event; 50 streams running beside it finish, and the engine goes on.
func TestFormatterPanicEndsOnlyThatStream(t *testing.T) {
	_, _, base := startServerWrapped(t, func(c *vajra.Config) { c.EngineConfig.MaxNumSeqs = 64 },
		func(e engine.Engine) engine.Engine { return panickingFormatters{e} })
	formatterPanicAmongStreams(t, base, vajra.DefaultModelName, 16)
}

// TestLlamaFormatterPanicEndsOnlyThatStream is the same against the
// llama.cpp engine.
func TestLlamaFormatterPanicEndsOnlyThatStream(t *testing.T) {
	_, base := startLlama(t, func(c *vajra.Config) {
		// An engine built here: it takes the server's shared settings
		// itself.
		lc := *llamaConfig(c)
		lc.Config = c.EngineConfig
		lc.MaxNumSeqs, lc.KVCacheTokens = 64, 64*64
		e, err := llama.New(lc)
		if err != nil {
			t.Fatal(err)
		}
		c.Engine = panickingFormatters{e}
	})
	formatterPanicAmongStreams(t, base, tinyName, 12)
}

// TestSessionPanicCounted: a panic in the session actor's own code (here
// in Engine.Start, which runs in the actor) is counted once in
// vajra_session_panics_total, beside its 500.
func TestSessionPanicCounted(t *testing.T) {
	_, _, base := startServerWrapped(t, nil, func(e engine.Engine) engine.Engine { return panicky{e} })
	client := newClient(base)
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    vajra.DefaultModelName,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("PANIC now")},
	})
	var apiErr *openai.Error
	if !asError(err, &apiErr) || apiErr.StatusCode != 500 {
		t.Fatalf("failed session answered %v, want a 500", err)
	}
	if v := value(scrape(t, strings.TrimPrefix(base, "http://")), "vajra_session_panics_total"); v != 1 {
		t.Fatalf("vajra_session_panics_total = %v, want 1", v)
	}
}
