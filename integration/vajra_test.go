package integration_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tiktoken-go/tokenizer"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/sim"
	"github.com/vajra-go/vajra/internal/eventually"
)

// observed wraps an engine so a test can wait for each session's final
// delivery (which the engine makes also after an abort) instead of sleeping.
type observed struct {
	engine.Engine
	finals chan *engine.Result
}

func (o *observed) Start(req *engine.Request, sink engine.Sink) (engine.Session, error) {
	return o.Engine.Start(req, &observedSink{sink, o.finals})
}

// Unwrap implements engine.Wrapper: what the engine declares beyond the
// Engine interface (engine.OutputParser, engine.Embedder, ...), which the
// embedded interface hides, is found through it.
func (o *observed) Unwrap() engine.Engine { return o.Engine }

type observedSink struct {
	engine.Sink
	finals chan *engine.Result
}

func (s *observedSink) Deliver(frames []byte, final *engine.Result) {
	s.Sink.Deliver(frames, final)
	if final != nil {
		// Never block the engine's goroutine: a test that issues many
		// requests and reads no finals must not stall the engine once
		// the buffer is full (its finals are then dropped).
		select {
		case s.finals <- final:
		default:
		}
	}
}

// startServer runs a real server on a free loopback port.
func startServer(t *testing.T, mutate func(*vajra.Config)) (*vajra.Server, *observed, string) {
	t.Helper()
	return startServerWrapped(t, mutate, nil)
}

// startServerWrapped is startServer with the engine wrapped by wrap (when
// not nil) inside the observer.
func startServerWrapped(t *testing.T, mutate func(*vajra.Config), wrap func(engine.Engine) engine.Engine) (*vajra.Server, *observed, string) {
	t.Helper()
	cfg := vajra.DefaultConfig()
	cfg.Port = 0
	cfg.Loops = 2
	cfg.Sim.ITL = time.Millisecond
	if mutate != nil {
		mutate(&cfg)
	}
	// The engine is built here, with the shared settings; the server
	// keeps those that apply to an engine it did not build.
	sc := cfg.Sim
	sc.Config = cfg.EngineConfig
	e, err := sim.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	cfg.EngineConfig = engine.Config{MaxModelLen: sc.MaxModelLen, StreamInterval: sc.StreamInterval}
	var inner engine.Engine = e
	if wrap != nil {
		inner = wrap(e)
	}
	obs := &observed{Engine: inner, finals: make(chan *engine.Result, 1024)}
	cfg.Engine = obs
	srv, base := runServer(t, cfg)
	return srv, obs, base
}

// runServer builds and starts a server from cfg, stopped when the test
// ends, and returns it with its base URL.
func runServer(t *testing.T, cfg vajra.Config) (*vajra.Server, string) {
	t.Helper()
	srv, err := vajra.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return srv, "http://" + srv.Addr().String()
}

func newClient(base string, opts ...option.RequestOption) openai.Client {
	opts = append([]option.RequestOption{option.WithBaseURL(base + "/v1/"), option.WithAPIKey("test-key"), option.WithMaxRetries(0)}, opts...)
	return openai.NewClient(opts...)
}

// promptTokens counts the tokens of a chat prompt the way the engine must:
// the ChatML rendering, tokenized with o200k_base.
func promptTokens(t *testing.T, msgs []engine.Message) int {
	t.Helper()
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	ids, _, err := enc.Encode(sim.RenderChatML(msgs, nil))
	if err != nil {
		t.Fatal(err)
	}
	return len(ids)
}

const question = "Tell me about the sea."

func TestSDKListsModels(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	page, err := client.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != vajra.DefaultModelName || page.Data[0].OwnedBy == "" {
		t.Fatalf("models: %+v", page.Data)
	}
	m, err := client.Models.Get(context.Background(), vajra.DefaultModelName)
	if err != nil || m.ID != vajra.DefaultModelName {
		t.Fatalf("model: %+v, %v", m, err)
	}
}

func TestSDKChatNonStreaming(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	const maxTokens = 24
	res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:     vajra.DefaultModelName,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)},
		MaxTokens: openai.Int(maxTokens),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Choices) != 1 {
		t.Fatalf("choices: %d", len(res.Choices))
	}
	c := res.Choices[0]
	if c.Message.Content == "" || c.Message.Role != "assistant" {
		t.Fatalf("message: %+v", c.Message)
	}
	if c.FinishReason != "stop" && c.FinishReason != "length" {
		t.Fatalf("finish reason %q", c.FinishReason)
	}
	want := promptTokens(t, []engine.Message{{Role: "user", Content: question}})
	if res.Usage.PromptTokens != int64(want) {
		t.Errorf("prompt_tokens = %d, want %d (tokenizer count of the rendered prompt)", res.Usage.PromptTokens, want)
	}
	if res.Usage.CompletionTokens < 1 || res.Usage.CompletionTokens > maxTokens {
		t.Errorf("completion_tokens = %d, want 1..%d", res.Usage.CompletionTokens, maxTokens)
	}
	if res.Usage.TotalTokens != res.Usage.PromptTokens+res.Usage.CompletionTokens {
		t.Errorf("total_tokens = %d", res.Usage.TotalTokens)
	}
}

func TestSDKChatStreamingWithUsage(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	const maxTokens = 32
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         vajra.DefaultModelName,
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)},
		MaxTokens:     openai.Int(maxTokens),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}, option.WithJSONSet("ignore_eos", true))
	var acc openai.ChatCompletionAccumulator
	var text strings.Builder
	contentChunks := 0
	for stream.Next() {
		chunk := stream.Current()
		if !acc.AddChunk(chunk) {
			t.Fatalf("accumulator refused chunk %+v", chunk)
		}
		for _, ch := range chunk.Choices {
			if ch.Delta.Content != "" {
				contentChunks++
				text.WriteString(ch.Delta.Content)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != text.String() || text.Len() == 0 {
		t.Fatalf("accumulated %+v vs streamed %q", acc.Choices, text.String())
	}
	if fr := acc.Choices[0].FinishReason; fr != "length" {
		t.Errorf("finish_reason %q, want length (ignore_eos with max_tokens)", fr)
	}
	// ignore_eos generates exactly max_tokens, one token per chunk.
	if contentChunks != maxTokens || acc.Usage.CompletionTokens != maxTokens {
		t.Errorf("content chunks %d, completion_tokens %d, want %d", contentChunks, acc.Usage.CompletionTokens, maxTokens)
	}
	want := promptTokens(t, []engine.Message{{Role: "user", Content: question}})
	if acc.Usage.PromptTokens != int64(want) {
		t.Errorf("prompt_tokens = %d, want %d", acc.Usage.PromptTokens, want)
	}
}

func TestOpenAIPrefixAndPipelining(t *testing.T) {
	_, _, base := startServer(t, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`
	req := "GET /health HTTP/1.1\r\nHost: x\r\n\r\n" +
		"POST /openai/v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body +
		"GET /openai/v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	for i, want := range []string{"", `"object":"chat.completion"`, `"object":"list"`} {
		status, got := readResponse(t, r)
		if status != 200 || !strings.Contains(got, want) {
			t.Fatalf("response %d: status %d body %q, want %q in it", i, status, got, want)
		}
	}
}

func TestDisconnectAbortsEngineSession(t *testing.T) {
	_, obs, base := startServer(t, func(c *vajra.Config) { c.Sim.ITL = 5 * time.Millisecond })
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":4000,"ignore_eos":true,"stream":true}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// Read until the stream has produced tokens, then hang up.
	r := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for tokens := 0; tokens < 3; {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"content":`) {
			tokens++
		}
	}
	if got := obs.Stats().Running; got != 1 {
		t.Fatalf("running sequences mid-stream = %d, want 1", got)
	}
	conn.Close()
	select {
	case res := <-obs.finals:
		if res.Err == nil || res.Err.Kind != engine.KindAborted {
			t.Fatalf("final result after disconnect: %+v, want aborted", res.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("engine session not aborted after the client left")
	}
	// The engine publishes its figures as it ends the step, after the
	// final result went out: polled.
	eventually.True(t, "no sequence runs after the disconnect", func() bool { return obs.Stats().Running == 0 })
}

func TestAPIKeyRequired(t *testing.T) {
	_, _, base := startServer(t, func(c *vajra.Config) { c.APIKeys = []string{"right"} })
	wrong, right := newClient(base, option.WithAPIKey("wrong")), newClient(base, option.WithAPIKey("right"))
	_, err := wrong.Models.List(context.Background())
	var apiErr *openai.Error
	if err == nil || !asError(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Code != "invalid_api_key" {
		t.Fatalf("wrong key: %v", err)
	}
	if _, err := right.Models.List(context.Background()); err != nil {
		t.Fatalf("right key: %v", err)
	}
}
