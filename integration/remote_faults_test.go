package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/internal/eventually"
)

// A stand-in llama-server for the faults a real one cannot be made to
// show: a worker that stalls (sends no token, or stops between tokens)
// and one that fails inside a stream or refuses a request. It speaks the
// part of llama-server's HTTP API the client uses, with a byte-level
// vocabulary of 256 tokens.
type standin struct {
	srv  *http.Server
	addr string
	// mode of /completion: "stall-first", "stall-after-one",
	// "error-in-stream" or "refuse".
	mode atomic.Value
	// aborted counts /completion requests whose connection Vajra closed.
	aborted atomic.Int32
}

func startStandin(t *testing.T, mode string) *standin {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &standin{addr: l.Addr().String()}
	s.mode.Store(mode)
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"status":"ok"}`) })
	mux.HandleFunc("/props", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"default_generation_settings":{"n_ctx":512},"total_slots":2,"model_path":"/m/standin.gguf","chat_template":"","bos_token":"","eos_token":""}`)
	})
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"data":[{"id":"standin","meta":{"n_vocab":256}}]}`)
	})
	mux.HandleFunc("/slots", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `[{"id":0,"is_processing":false},{"id":1,"is_processing":false}]`)
	})
	mux.HandleFunc("/tokenize", s.tokenize)
	mux.HandleFunc("/completion", s.completion)
	s.srv = &http.Server{Handler: mux}
	go s.srv.Serve(l)
	t.Cleanup(func() { s.srv.Close() })
	return s
}

func (s *standin) tokenize(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Content json.RawMessage `json:"content"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	var text string
	if json.Unmarshal(req.Content, &text) == nil {
		ids := make([]int, len(text))
		for i := range len(text) {
			ids[i] = int(text[i])
		}
		json.NewEncoder(w).Encode(map[string]any{"tokens": ids})
		return
	}
	var ids []int
	json.Unmarshal(req.Content, &ids)
	out := make([]map[string]any, len(ids))
	for i, id := range ids {
		if id < 128 {
			out[i] = map[string]any{"id": id, "piece": string(rune(id))}
		} else {
			out[i] = map[string]any{"id": id, "piece": []int{id}}
		}
	}
	json.NewEncoder(w).Encode(map[string]any{"tokens": out})
}

func (s *standin) completion(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	mode := s.mode.Load().(string)
	if mode == "refuse" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		io.WriteString(w, `{"error":{"code":400,"message":"the stand-in refuses","type":"invalid_request_error"}}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	fl := w.(http.Flusher)
	fl.Flush()
	if mode != "stall-first" {
		fmt.Fprintf(w, "data: {\"index\":0,\"content\":\"a\",\"tokens\":[97],\"stop\":false,\"tokens_predicted\":1,\"tokens_evaluated\":3}\n\n")
		fl.Flush()
	}
	if mode == "error-in-stream" {
		io.WriteString(w, "data: {\"error\":{\"code\":500,\"message\":\"the stand-in failed\",\"type\":\"server_error\"}}\n\n")
		fl.Flush()
		return
	}
	select {
	case <-r.Context().Done(): // Vajra closed the connection: the abort
		s.aborted.Add(1)
	case <-time.After(30 * time.Second):
	}
}

func startOnStandin(t *testing.T, s *standin, mutate func(*vajra.Config)) string {
	t.Helper()
	_, base := startRemote(t, mutate, "llama-server://"+s.addr)
	return base
}

// TestRemoteStalledWorker: a worker that sends no first token, or stops
// between tokens, is timed out: the stream ends with the dialect's error
// event and the request is aborted on the worker (its connection closed).
// A stand-in server stalls: llama-server cannot be made to.
func TestRemoteStalledWorker(t *testing.T) {
	s := startStandin(t, "stall-first")
	base := startOnStandin(t, s, func(c *vajra.Config) {
		c.Remote.FirstTokenTimeout, c.Remote.InterTokenTimeout = 300*time.Millisecond, 300*time.Millisecond
	})
	client := newClient(base)
	for _, mode := range []string{"stall-first", "stall-after-one"} {
		s.mode.Store(mode)
		before := s.aborted.Load()
		began := time.Now()
		stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
			Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(50),
		})
		var text strings.Builder
		for stream.Next() {
			if ch := stream.Current(); len(ch.Choices) > 0 {
				text.WriteString(ch.Choices[0].Delta.Content)
			}
		}
		took := time.Since(began)
		if stream.Err() == nil || !strings.Contains(stream.Err().Error(), "worker") {
			t.Fatalf("%s: stream ended with %v", mode, stream.Err())
		}
		if took > 2*time.Second {
			t.Fatalf("%s: the stream ended %v after it began, with 300 ms timeouts", mode, took)
		}
		if mode == "stall-after-one" && text.String() != "a" {
			t.Fatalf("%s: streamed %q before the stall", mode, text.String())
		}
		eventually.True(t, mode+": the worker saw its connection closed", func() bool { return s.aborted.Load() > before })
	}
	// Anthropic: the error event of the Messages stream.
	s.mode.Store("stall-after-one")
	ac := newAnthropic(base)
	ms := ac.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: tinyName, MaxTokens: 50, Messages: userText(question)})
	for ms.Next() {
	}
	if ms.Err() == nil {
		t.Fatal("a stalled Messages stream ended without an error event")
	}
}

// TestRemoteWorkerErrors: a worker's refusal and its failure inside a
// stream reach the client in the dialect's shape.
func TestRemoteWorkerErrors(t *testing.T) {
	s := startStandin(t, "error-in-stream")
	base := startOnStandin(t, s, nil)
	client := newClient(base)
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(50),
	})
	for stream.Next() {
	}
	// openai-go reports an error event as the event's JSON.
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), `"type":"server_error"`) || strings.Contains(err.Error(), "service_unavailable") {
		t.Fatalf("in-stream failure: %v", err)
	}
	// A refusal comes after Vajra's 200 (llama-server answers a stream
	// only once it has a token), as an error event.
	s.mode.Store("refuse")
	stream = client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(50),
	})
	for stream.Next() {
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "the stand-in refuses") || !strings.Contains(err.Error(), `"type":"invalid_request_error"`) {
		t.Fatalf("refusal: %v", err)
	}
	var apiErr *openai.Error
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: tinyName, Messages: userMsg(question), MaxTokens: openai.Int(50),
	})
	if !asError(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "the stand-in refuses") {
		t.Fatalf("non-streamed refusal: %v", err)
	}
	ac := newAnthropic(base)
	_, err = ac.Messages.New(context.Background(), anthropic.MessageNewParams{Model: tinyName, MaxTokens: 50, Messages: userText(question)})
	var aErr *anthropic.Error
	if !asError(err, &aErr) || aErr.StatusCode != 400 || !strings.Contains(aErr.RawJSON(), "invalid_request_error") {
		t.Fatalf("Messages refusal: %v", err)
	}
}
