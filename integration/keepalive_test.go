package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
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
)

// Stream keep-alives through the official SDKs: the engine (engine/sim with
// a long time to first token and a long ITL, as a slow prefill and a slow
// model) is silent for many keep-alive periods, and each SDK must read the
// whole stream with the keep-alives interleaved, which the raw bytes it
// read show.

// tapTransport keeps a copy of every response body the SDK reads.
type tapTransport struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (tt *tapTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		res.Body = tapBody{res.Body, tt}
	}
	return res, err
}

// count is how many times s occurs in what the SDK read.
func (tt *tapTransport) count(s string) int {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return strings.Count(tt.buf.String(), s)
}

type tapBody struct {
	io.ReadCloser
	tt *tapTransport
}

func (b tapBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.tt.mu.Lock()
	b.tt.buf.Write(p[:n])
	b.tt.mu.Unlock()
	return n, err
}

const (
	sseKeepalive = ": keep-alive\n\n"
	ssePing      = "event: ping\ndata: {\"type\":\"ping\"}\n\n"
)

// slowEngine is a server whose simulated engine takes 500 ms to the first
// token and 250 ms per token after it, with 100 ms keep-alives.
func slowEngine(c *vajra.Config) {
	c.Sim.TTFT = 500 * time.Millisecond
	c.Sim.ITL = 250 * time.Millisecond
	c.StreamKeepalive = 100 * time.Millisecond
}

// readChatStream reads a chat stream with openai-go's accumulator and
// says what is wrong with it, if anything (it runs on goroutines of its
// own too, where a test may not fail itself).
func readChatStream(ctx context.Context, client openai.Client) error {
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: vajra.DefaultModelName, Messages: userMsg(question), MaxTokens: openai.Int(4),
	})
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		chunks++
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		return fmt.Errorf("chat stream: %w", err)
	}
	if chunks < 2 || len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" || acc.Choices[0].FinishReason == "" {
		return fmt.Errorf("chat stream: %d chunks, accumulated %+v", chunks, acc.ChatCompletion)
	}
	return nil
}

// readMessagesStream reads a Messages stream with anthropic-sdk-go's
// Accumulate and says what is wrong with it, if anything.
func readMessagesStream(ctx context.Context, client anthropic.Client) error {
	stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model: vajra.DefaultModelName, MaxTokens: 4, Messages: userText(question),
	})
	var acc anthropic.Message
	var types []string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if err := acc.Accumulate(ev); err != nil {
			return fmt.Errorf("accumulate %s: %w", ev.RawJSON(), err)
		}
	}
	if err := stream.Err(); err != nil {
		return fmt.Errorf("messages stream: %w", err)
	}
	if len(types) == 0 || types[0] != "message_start" || types[len(types)-1] != "message_stop" || len(acc.Content) != 1 ||
		acc.Content[0].Text == "" || acc.StopReason == "" || acc.Usage.OutputTokens == 0 {
		return fmt.Errorf("events %v, accumulated %s", types, acc.RawJSON())
	}
	return nil
}

// TestKeepaliveSDKStreams: chat completions and Responses through
// openai-go, Messages through anthropic-sdk-go, each silent for over a
// second in all: the SDKs read every event and the keep-alives (SSE
// comments; Anthropic's pings) sit between them.
func TestKeepaliveSDKStreams(t *testing.T) {
	_, _, base := startServer(t, slowEngine)
	ctx := context.Background()

	tap := &tapTransport{}
	client := newClient(base, option.WithHTTPClient(&http.Client{Transport: tap}))
	if err := readChatStream(ctx, client); err != nil {
		t.Fatal(err)
	}
	if n := tap.count(sseKeepalive); n < 4 {
		t.Fatalf("chat: the SDK read %d keep-alives, want one per 100 ms of silence (at least 4)", n)
	}

	tap = &tapTransport{}
	client = newClient(base, option.WithHTTPClient(&http.Client{Transport: tap}))
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput(question), MaxOutputTokens: openai.Int(4),
	})
	var final responses.Response
	seq := int64(0)
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != seq {
			t.Fatalf("sequence_number %d, want %d", ev.SequenceNumber, seq)
		}
		seq++
		if ev.Type == "response.completed" || ev.Type == "response.incomplete" {
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("responses stream: %v", err)
	}
	if final.ID == "" || final.OutputText() == "" {
		t.Fatalf("responses stream ended without its final response (%d events)", seq)
	}
	if n := tap.count(sseKeepalive); n < 4 {
		t.Fatalf("responses: the SDK read %d keep-alives, want at least 4", n)
	}

	tap = &tapTransport{}
	ac := newAnthropic(base, aoption.WithHTTPClient(&http.Client{Transport: tap}))
	if err := readMessagesStream(ctx, ac); err != nil {
		t.Fatal(err)
	}
	// One ping follows message_start, as Anthropic sends it; the rest are
	// keep-alives.
	if n := tap.count(ssePing); n < 5 {
		t.Fatalf("messages: the SDK read %d pings, want at least 5", n)
	}
	if n := tap.count("keep-alive"); n != 0 {
		t.Fatalf("messages: %d SSE comments on an Anthropic stream", n)
	}
}

// TestKeepaliveSDKQueued: with the only slot held, a chat stream
// (openai-go) and a Messages stream (anthropic-sdk-go) wait in the
// admission queue; past the keep-alive period their held sessions send
// the 200 head and keep-alives while they wait; once the slot frees, both
// SDKs read their streams to the end.
func TestKeepaliveSDKQueued(t *testing.T) {
	_, _, addr := fleetServer(t, func(c *vajra.Config) {
		c.Sim.ITL = 2 * time.Millisecond
		c.MaxConcurrentRequests = 1
		c.MaxQueuedRequests = 2
		c.StreamKeepalive = 100 * time.Millisecond
	})
	base := "http://" + addr
	blocker := startBlocker(t, addr)
	defer blocker.Close()

	ctx := context.Background()
	otap, atap := &tapTransport{}, &tapTransport{}
	client := newClient(base, option.WithHTTPClient(&http.Client{Transport: otap}))
	ac := newAnthropic(base, aoption.WithHTTPClient(&http.Client{Transport: atap}))
	errs := make(chan error, 2)
	go func() { errs <- readChatStream(ctx, client) }()
	go func() { errs <- readMessagesStream(ctx, ac) }()

	// Both wait; keep-alives reach their SDKs while they do (a poll on
	// the bytes the SDKs have read, paced by /load round trips, which also
	// show that both are still queued; bounded in time).
	for deadline := time.Now().Add(10 * time.Second); otap.count(sseKeepalive) < 2 || atap.count(ssePing) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("no keep-alives while queued: chat %d, messages %d", otap.count(sseKeepalive), atap.count(ssePing))
		}
		waitQueued(t, addr, 2)
	}
	blocker.Close()
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	waitQueued(t, addr, 0)
}

// TestKeepaliveEngineQueue: with the engine's only sequence taken (sim
// --max-num-seqs 1), a second stream is admitted and its head is out, but
// the engine queues it: keep-alives come while it waits there, and once
// the first stream's client leaves, the second streams to its end.
func TestKeepaliveEngineQueue(t *testing.T) {
	_, _, addr := fleetServer(t, func(c *vajra.Config) {
		c.Sim.ITL = 2 * time.Millisecond
		c.EngineConfig.MaxNumSeqs = 1
		c.StreamKeepalive = 100 * time.Millisecond
	})
	blocker := startBlocker(t, addr)
	body := `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"ignore_eos":true,"stream":true}`
	_, r, head := rawStream(t, addr, body)
	if !strings.HasPrefix(head, "HTTP/1.1 200") {
		t.Fatalf("head %q", head)
	}
	// Lines of the chunked body: size lines, then the event's lines.
	for seen := 0; seen < 2; {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("waiting in the engine's queue: %v", err)
		}
		if strings.Contains(line, `"content":"`) {
			t.Fatalf("a token while the engine's only sequence is taken: %q", line)
		}
		if line == ": keep-alive\n" {
			seen++
		}
	}
	blocker.Close()
	tokens, done, errs := readEvents(t, r, nil)
	if tokens != 5 || !done || errs != 0 {
		t.Fatalf("after the slot freed: %d tokens, done %v, %d errors", tokens, done, errs)
	}
}
