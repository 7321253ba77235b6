package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
	"github.com/vajra-go/vajra/internal/eventually"
	"github.com/vajra-go/vajra/internal/llamaserver"
)

// Vajra in front of a real llama-server (llama.cpp's own server, the same
// release as engine/llama) on a tiny random-weight model, through every
// dialect's official SDK. The tests skip without the binary (`make
// llama-server`) and fail with VAJRA_REQUIRE_LLAMA_SERVER set.

// startWorker starts llama-server on a fresh tiny model with 4 slots of
// 1024 tokens.
func startWorker(t *testing.T, args ...string) *llamaserver.Server {
	t.Helper()
	w, _ := startWorkerModel(t, args...)
	return w
}

// startWorkerModel is startWorker, with the model file's path.
func startWorkerModel(t *testing.T, args ...string) (*llamaserver.Server, string) {
	t.Helper()
	llamaserver.Need(t)
	path, err := tinymodel.TempFile(t.TempDir(), tinymodel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if len(args) == 0 {
		args = []string{"-np", "4", "-c", "4096", "-t", "1"}
	}
	return llamaserver.Start(t, path, args...), path
}

// startRemote starts Vajra in front of the workers.
func startRemote(t *testing.T, mutate func(*vajra.Config), workers ...string) (*vajra.Server, string) {
	t.Helper()
	cfg := vajra.DefaultConfig()
	cfg.Port, cfg.Loops = 0, 2
	cfg.ServedModelNames = []string{tinyName}
	cfg.Remote.Workers = workers
	cfg.Remote.HealthInterval = 100 * time.Millisecond
	if mutate != nil {
		mutate(&cfg)
	}
	return runServer(t, cfg)
}

func workerURL(w *llamaserver.Server) string { return "llama-server://" + w.Addr() }

// postJSON posts body to url and decodes the answer into out.
func postJSON(t *testing.T, url string, body any, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}

// TestRemoteGreedyEqualsLlamaServer: greedy output through Vajra is the
// worker's own for the same token prompt, token for token; the prompt
// Vajra rendered and tokenized is the one llama-server renders and
// tokenizes for the same conversation.
func TestRemoteGreedyEqualsLlamaServer(t *testing.T) {
	w := startWorker(t)
	_, base := startRemote(t, nil, workerURL(w))
	client := newClient(base)
	res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(40), Temperature: openai.Float(0),
		Logprobs: openai.Bool(true),
	}, greedyEOS...)
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct {
		Prompt string `json:"prompt"`
	}
	postJSON(t, w.URL()+"/apply-template", map[string]any{"messages": []map[string]string{{"role": "user", "content": question}}}, &tmpl)
	var tok struct {
		Tokens []int `json:"tokens"`
	}
	postJSON(t, w.URL()+"/tokenize", map[string]any{"content": tmpl.Prompt, "add_special": true, "parse_special": true}, &tok)
	if int(res.Usage.PromptTokens) != len(tok.Tokens) {
		t.Fatalf("Vajra's prompt is %d tokens, llama-server's %d", res.Usage.PromptTokens, len(tok.Tokens))
	}
	var own struct {
		Probs []struct {
			Bytes []byte `json:"bytes"`
		} `json:"completion_probabilities"`
		Predicted int `json:"tokens_predicted"`
	}
	postJSON(t, w.URL()+"/completion", map[string]any{"prompt": tok.Tokens, "n_predict": 40, "temperature": 0, "ignore_eos": true,
		"n_probs": 1, "cache_prompt": false}, &own)
	// llama-server names no token whose text ends inside a UTF-8
	// character (it reports neither its id nor its logprob): both lists
	// leave those out alike.
	got := res.Choices[0].Logprobs.Content
	if res.Usage.CompletionTokens != 40 || own.Predicted != 40 || len(got) != len(own.Probs) {
		t.Fatalf("%d tokens (%d with logprobs) through Vajra, %d (%d) from llama-server",
			res.Usage.CompletionTokens, len(got), own.Predicted, len(own.Probs))
	}
	for i := range got {
		gb := make([]byte, len(got[i].Bytes))
		for j, v := range got[i].Bytes {
			gb[j] = byte(v)
		}
		// llama-server's bytes of a token begin with those of the tokens
		// it held before it.
		if !bytes.HasSuffix(own.Probs[i].Bytes, gb) || len(gb) == 0 {
			t.Fatalf("token %d: %q through Vajra, %q from llama-server", i, gb, own.Probs[i].Bytes)
		}
	}
	var chat struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	postJSON(t, w.URL()+"/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": question}},
		"max_tokens": 40, "temperature": 0, "ignore_eos": true}, &chat)
	if vc, oc := res.Choices[0].Message.Content, chat.Choices[0].Message.Content; vc != oc {
		t.Fatalf("through Vajra %q\nllama-server's own chat %q", vc, oc)
	}
}

// TestRemoteLocalTokenizer: with --tokenizer (the model's GGUF, read by
// engine/tokenizer) Vajra tokenizes and detokenizes alone, and greedy
// output is still llama-server's own.
func TestRemoteLocalTokenizer(t *testing.T) {
	w, path := startWorkerModel(t)
	_, base := startRemote(t, func(c *vajra.Config) { c.Remote.TokenizerPath = path }, workerURL(w))
	client := newClient(base)
	res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(40), Temperature: openai.Float(0),
	}, greedyEOS...)
	if err != nil {
		t.Fatal(err)
	}
	var chat struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	postJSON(t, w.URL()+"/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": question}},
		"max_tokens": 40, "temperature": 0, "ignore_eos": true}, &chat)
	if int(res.Usage.PromptTokens) != chat.Usage.PromptTokens || res.Usage.CompletionTokens != 40 {
		t.Fatalf("prompt %d tokens through Vajra, %d in llama-server; completion %d", res.Usage.PromptTokens, chat.Usage.PromptTokens, res.Usage.CompletionTokens)
	}
	if vc, oc := res.Choices[0].Message.Content, chat.Choices[0].Message.Content; vc != oc {
		t.Fatalf("through Vajra %q\nllama-server's own chat %q", vc, oc)
	}
}

// TestRemoteChatStreamN: n choices with logprobs, streamed and not, the
// accumulator's view equal to the non-streamed body; usage with cached
// tokens on a repeated prompt.
func TestRemoteChatStreamN(t *testing.T) {
	w := startWorker(t)
	_, base := startRemote(t, nil, workerURL(w))
	client := newClient(base)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(12), Temperature: openai.Float(0),
		N: openai.Int(2), Logprobs: openai.Bool(true), TopLogprobs: openai.Int(2),
	}
	res, err := client.Chat.Completions.New(ctx, params, greedyEOS...)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Choices) != 2 || res.Usage.CompletionTokens != 24 || res.Choices[0].Message.Content != res.Choices[1].Message.Content {
		t.Fatalf("choices %d usage %+v", len(res.Choices), res.Usage)
	}
	// Tokens llama-server held (ending inside a UTF-8 character) have no
	// logprobs: at most 12 entries.
	if lp := res.Choices[1].Logprobs.Content; len(lp) == 0 || len(lp) > 12 || len(lp[0].TopLogprobs) != 2 {
		t.Fatalf("%d logprobs, %d alternatives", len(lp), len(lp[0].TopLogprobs))
	}
	if cached := res.Usage.PromptTokensDetails.CachedTokens; cached == 0 {
		// The second choice's prompt is the first's: llama-server reuses
		// its slot's cache or another slot's (the first request on a
		// fresh worker may find none).
		res, err = client.Chat.Completions.New(ctx, params, greedyEOS...)
		if err != nil {
			t.Fatal(err)
		}
		if res.Usage.PromptTokensDetails.CachedTokens == 0 {
			t.Fatalf("no cached tokens on a repeated prompt: %+v", res.Usage)
		}
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
	if len(acc.Choices) != 2 || acc.Choices[1].Message.Content != res.Choices[1].Message.Content || acc.Usage.CompletionTokens != 24 {
		t.Fatalf("streamed %+v usage %+v", acc.Choices, acc.Usage)
	}
}

// TestRemoteDialects: completions, Responses (streamed, stored,
// background) and Messages through the remote engine.
func TestRemoteDialects(t *testing.T) {
	w := startWorker(t)
	_, base := startRemote(t, nil, workerURL(w))
	client := newClient(base)
	ctx := context.Background()

	cmp, err := client.Completions.New(ctx, openai.CompletionNewParams{
		Model:  openai.CompletionNewParamsModel(tinyName),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The sea is")}, MaxTokens: openai.Int(6),
		Temperature: openai.Float(0), Stop: openai.CompletionNewParamsStopUnion{OfString: openai.String("\x00never")},
	}, greedyEOS...)
	if err != nil {
		t.Fatal(err)
	}
	if cmp.Usage.CompletionTokens != 6 || cmp.Choices[0].FinishReason != "length" {
		t.Fatalf("completion %s", cmp.RawJSON())
	}

	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: tinyName, Input: textInput(question), MaxOutputTokens: openai.Int(10),
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
	if err != nil || got.OutputText() != final.OutputText() {
		t.Fatalf("stored %v %q, streamed %q", err, got.OutputText(), final.OutputText())
	}
	bg, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: tinyName, Input: textInput(question), MaxOutputTokens: openai.Int(8), Background: openai.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the background response completes", func() bool {
		got, err = client.Responses.Get(ctx, bg.ID, responses.ResponseGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Status == "completed" || got.Status == "incomplete"
	})
	if got.Usage.OutputTokens == 0 {
		t.Fatalf("background response %s", got.RawJSON())
	}

	ac := newAnthropic(base)
	// Greedy, so that the two calls, one streamed, must agree.
	params := anthropic.MessageNewParams{Model: tinyName, MaxTokens: 12, Messages: userText(question)}
	greedy := aoption.WithJSONSet("temperature", 0)
	msg, err := ac.Messages.New(ctx, params, greedy)
	if err != nil {
		t.Fatal(err)
	}
	ms := ac.Messages.NewStreaming(ctx, params, greedy)
	var acc anthropic.Message
	for ms.Next() {
		if err := acc.Accumulate(ms.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := ms.Err(); err != nil {
		t.Fatal(err)
	}
	if msg.Usage.OutputTokens == 0 || acc.Usage.OutputTokens != msg.Usage.OutputTokens || acc.StopReason != msg.StopReason {
		t.Fatalf("message %s, streamed %s", msg.RawJSON(), acc.RawJSON())
	}
}

// TestRemoteServedName: without --served-model-name the model is served
// under the worker's name for it (its file's base name).
func TestRemoteServedName(t *testing.T) {
	w := startWorker(t)
	srv, base := startRemote(t, func(c *vajra.Config) { c.ServedModelNames = nil }, workerURL(w))
	status, _, body := get(t, strings.TrimPrefix(base, "http://"), "GET", "/v1/models", "")
	if status != 200 || !strings.Contains(body, `"id":"tiny`) || !strings.Contains(body, `"max_model_len":1024`) {
		t.Fatalf("/v1/models: %d %s", status, body)
	}
	_ = srv
}

// TestRemoteContextLength: the worker's context length (per slot) is
// checked before the 200, in the dialect's shape.
func TestRemoteContextLength(t *testing.T) {
	w := startWorker(t)
	_, base := startRemote(t, nil, workerURL(w))
	client := newClient(base)
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(5000),
	})
	var apiErr *openai.Error
	if !asError(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "context_length_exceeded" {
		t.Fatalf("error %v", err)
	}
}

// TestRemoteDisconnectFreesSlot: a client that leaves mid-stream frees
// the llama-server slot at once (its /slots shows none processing).
func TestRemoteDisconnectFreesSlot(t *testing.T) {
	w := startWorker(t)
	srv, base := startRemote(t, nil, workerURL(w))
	client := newClient(base)
	ctx, cancel := context.WithCancel(context.Background())
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(900),
	}, greedyEOS...)
	for i := 0; i < 5 && stream.Next(); i++ {
	}
	if n := processing(t, w); n != 1 {
		t.Fatalf("%d slots processing while streaming", n)
	}
	cancel()
	stream.Close()
	left := time.Now()
	eventually.True(t, "the llama-server slot is free after the client left", func() bool { return processing(t, w) == 0 })
	t.Logf("slot free %v after the client left", time.Since(left))
	eventually.True(t, "Vajra's in-flight count back to 0", func() bool { return srv.Engine().Stats().Running == 0 })
}

// processing is the number of the worker's slots that process a request.
func processing(t *testing.T, w *llamaserver.Server) int {
	t.Helper()
	resp, err := http.Get(w.URL() + "/slots")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var slots []struct {
		IsProcessing bool `json:"is_processing"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&slots); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range slots {
		if s.IsProcessing {
			n++
		}
	}
	return n
}

// TestRemoteWorkerDownAtStart: Vajra starts with its worker down, /health
// is 503 and requests get 503 in each dialect's shape; once the worker is
// up (after a restart) Vajra serves within the back-off's 2 s.
func TestRemoteWorkerDownAtStart(t *testing.T) {
	w := startWorker(t)
	w.Kill()
	_, base := startRemote(t, nil, workerURL(w))
	addr := strings.TrimPrefix(base, "http://")
	if status, _, _ := get(t, addr, "GET", "/health", ""); status != 503 {
		t.Fatalf("/health %d with the worker down", status)
	}
	client := newClient(base)
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(4),
	})
	var apiErr *openai.Error
	if !asError(err, &apiErr) || apiErr.StatusCode != 503 || apiErr.Message == "" {
		t.Fatalf("chat with the worker down: %v", err)
	}
	ac := newAnthropic(base)
	_, err = ac.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: tinyName, MaxTokens: 4, Messages: userText(question),
	})
	var aErr *anthropic.Error
	if !asError(err, &aErr) || aErr.StatusCode != 503 || !strings.Contains(aErr.RawJSON(), `"type":"error"`) {
		t.Fatalf("messages with the worker down: %v", err)
	}
	w.Restart(t)
	back := time.Now()
	eventually.True(t, "/health 200 after the worker came up", func() bool {
		status, _, _ := get(t, addr, "GET", "/health", "")
		return status == 200
	})
	t.Logf("healthy %v after the worker came up", time.Since(back))
	res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(4),
	}, greedyEOS...)
	if err != nil || res.Usage.CompletionTokens != 4 {
		t.Fatalf("after the restart: %v", err)
	}
}

// TestRemoteWorkerKilledMidStream: every stream of a worker that dies
// ends within 2 s with the dialect's in-stream error event; after a
// restart Vajra serves again, and nothing leaked.
func TestRemoteWorkerKilledMidStream(t *testing.T) {
	w := startWorker(t)
	srv, base := startRemote(t, nil, workerURL(w))
	client := newClient(base)
	goroutines := runtime.NumGoroutine()
	const n = 3
	killMidStream(t, n, 10*time.Second, w.Kill, func() *ssestream.Stream[openai.ChatCompletionChunk] {
		return client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
			Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(900),
		}, greedyEOS...)
	})
	w.Restart(t)
	eventually.True(t, "Vajra healthy after the restart", func() bool { return srv.Engine().Stats().Healthy })
	res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(4),
	}, greedyEOS...)
	if err != nil || res.Usage.CompletionTokens != 4 {
		t.Fatalf("after the restart: %v", err)
	}
	// Idle: the goroutines of before, plus the two of each pooled
	// keep-alive connection to the worker (at most n).
	eventually.Report(t, "the goroutines of the streams end", func() bool { return runtime.NumGoroutine() <= goroutines+2*n },
		func() string {
			buf := make([]byte, 1<<20)
			return fmt.Sprintf("%d goroutines, %d before the streams:\n%s", runtime.NumGoroutine(), goroutines, buf[:runtime.Stack(buf, true)])
		})
}

// TestRemoteRealtimeText: a Realtime text response through the remote
// engine.
func TestRemoteRealtimeText(t *testing.T) {
	w := startWorker(t)
	_, base := startRemote(t, nil, workerURL(w))
	conn := rtConnect(t, base, "model", tinyName)
	rtRecv(t, conn, "session.created")
	rtSend(t, conn, userItem(question))
	rtRecv(t, conn, "conversation.item.done")
	rtSend(t, conn, responseCreate(8))
	evs := rtRecv(t, conn, "response.done")
	var text string
	for _, e := range evs {
		if e.Type == "response.output_text.delta" {
			text += e.OfResponseTextDeltaEvent.Delta
		}
	}
	done := evs[len(evs)-1].OfResponseDoneEvent.Response
	if text == "" || done.Usage.OutputTokens == 0 || done.Usage.OutputTokens > 8 || done.Output[0].AsRealtimeConversationItemAssistantMessage().Content[0].Text != text {
		t.Fatalf("response.done %s, streamed %q", evs[len(evs)-1].RawJSON(), text)
	}
}

// killMidStream opens n streams, waits (up to startWithin) for each one's
// first chunk, calls kill, and fails t unless every stream then ends
// within 2 s with an error event.
func killMidStream(t *testing.T, n int, startWithin time.Duration, kill func(), open func() *ssestream.Stream[openai.ChatCompletionChunk]) {
	t.Helper()
	started := make(chan struct{}, n)
	ended := make(chan error, n)
	for range n {
		go func() {
			stream := open()
			first := true
			for stream.Next() {
				if first {
					started <- struct{}{}
					first = false
				}
			}
			ended <- stream.Err()
		}()
	}
	for range n {
		select {
		case <-started:
		case <-time.After(startWithin):
			t.Fatal("streams did not start")
		}
	}
	kill()
	killed := time.Now()
	for range n {
		select {
		case err := <-ended:
			if err == nil {
				t.Fatal("a stream of the killed worker ended without an error event")
			}
		case <-time.After(2*time.Second - time.Since(killed)):
			t.Fatal("a stream of the killed worker did not end within 2 s")
		}
	}
	t.Logf("all streams ended %v after the kill", time.Since(killed))
}
