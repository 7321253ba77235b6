// Package main (baseline.go) is the baseline reference server: the common
// Go way to serve an OpenAI chat completion stream. net/http, one goroutine
// per request, encoding/json marshal of a chunk struct per token and one
// Flush per token. It emits the same token texts at the same cadence as the
// floor server (bench/floor), so the two bracket what Vajra costs.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/vajra-go/vajra/bench/internal/tokens"
)

// Options configures the baseline server.
type Options struct {
	Host string        // listen host; default 127.0.0.1
	Port int           // listen port; 0 picks a free port
	ITL  time.Duration // inter-token latency; 0 writes as fast as it can
	// Tokens is the number of tokens per response; 0 means the request's
	// max_tokens when present, else tokens.DefaultCount.
	Tokens int
}

// maxBodyBytes bounds a request body (16 MiB).
const maxBodyBytes = 16 << 20

// maxTokensCap bounds the tokens of one response taken from max_tokens.
const maxTokensCap = 1 << 20

// Serve starts a baseline server and returns its address and a stop function
// that closes it. It returns once the listener is open.
func Serve(ctx context.Context, o Options) (addr string, stop func(), err error) {
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	l, err := net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
	if err != nil {
		return "", nil, fmt.Errorf("baseline: %w", err)
	}
	h := &handler{o: o}
	mux := http.NewServeMux()
	mux.HandleFunc("/", h.serveHTTP)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Println("baseline:", err)
		}
	}()
	var stopped atomic.Bool
	stop = func() {
		if stopped.Swap(true) {
			return
		}
		_ = srv.Close()
		<-done
	}
	go func() {
		select {
		case <-ctx.Done():
			stop()
		case <-done:
		}
	}()
	return l.Addr().String(), stop, nil
}

type chatRequest struct {
	Model         string          `json:"model"`
	Messages      json.RawMessage `json:"messages"`
	MaxTokens     *int            `json:"max_tokens"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type delta struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content"`
}

type chunkChoice struct {
	Index        int     `json:"index"`
	Delta        delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *usage        `json:"usage,omitempty"`
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type completionChoice struct {
	Index        int     `json:"index"`
	Message      message `json:"message"`
	FinishReason string  `json:"finish_reason"`
}

type completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   usage              `json:"usage"`
}

type handler struct {
	o   Options
	seq atomic.Uint64
}

func (h *handler) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	if err != nil {
		http.Error(w, `{"error":{"message":"cannot read body","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	var req chatRequest
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"message":"invalid JSON body","type":"invalid_request_error","param":null,"code":"invalid_json"}}`))
			return
		}
	}
	n := h.o.Tokens
	if n <= 0 {
		n = tokens.DefaultCount
		if req.MaxTokens != nil && *req.MaxTokens > 0 {
			n = min(*req.MaxTokens, maxTokensCap)
		}
	}
	model := req.Model
	if model == "" {
		model = "baseline"
	}
	id := "chatcmpl-" + strconv.FormatUint(h.seq.Add(1), 10)
	created := time.Now().Unix()
	u := usage{PromptTokens: tokens.PromptTokens(len(body)), CompletionTokens: n}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	if !req.Stream {
		var content []byte
		for i := 0; i < n; i++ {
			content = append(content, tokens.Text(i)...)
		}
		out, _ := json.Marshal(completion{ID: id, Object: "chat.completion", Created: created, Model: model,
			Choices: []completionChoice{{Message: message{Role: "assistant", Content: string(content)}, FinishReason: "length"}},
			Usage:   u})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
		return
	}
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if fl != nil {
		fl.Flush()
	}
	var tick *time.Ticker
	if h.o.ITL > 0 {
		tick = time.NewTicker(h.o.ITL)
		defer tick.Stop()
	}
	length := "length"
	for i := 0; i < n; i++ {
		if tick != nil {
			select {
			case <-tick.C:
			case <-r.Context().Done():
				return
			}
		}
		c := chunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model,
			Choices: []chunkChoice{{Delta: delta{Content: tokens.Text(i)}}}}
		if i == 0 {
			c.Choices[0].Delta.Role = "assistant"
		}
		if i == n-1 {
			c.Choices[0].FinishReason = &length
		}
		if err := writeEvent(w, c); err != nil {
			return
		}
		if i < n-1 && fl != nil {
			fl.Flush()
		}
	}
	_ = writeEvent(w, chunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model,
		Choices: []chunkChoice{}, Usage: &u})
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}

func writeEvent(w io.Writer, c chunk) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, "data: "); err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	_, err = io.WriteString(w, "\n\n")
	return err
}
