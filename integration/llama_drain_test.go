package integration_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
)

// TestLlamaDrainTimeoutUnderLoad: a Shutdown whose drain timeout expires
// while streams run, keep-alive /metrics scrapers poll, an embedder reads
// Server.Live and in-process requests keep arriving. The engine closes
// under all of them: the process must not crash (llama.cpp's freed context
// is a SIGSEGV no recover catches), every stream must end with its
// terminal event, and every in-process request must get its final Output.
func TestLlamaDrainTimeoutUnderLoad(t *testing.T) {
	srv, base := startLlama(t, nil)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var streamsStarted sync.WaitGroup

	// Streams that run far longer than the drain timeout.
	const streams = 3
	ends := make(chan string, streams)
	for i := range streams {
		streamsStarted.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := `{"model":"tiny","stream":true,"max_tokens":900,"ignore_eos":true,"messages":[{"role":"user","content":"Stream ` + string(rune('a'+i)) + ` forever."}]}`
			res, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				streamsStarted.Done()
				ends <- "post: " + err.Error()
				return
			}
			defer res.Body.Close()
			sc := bufio.NewScanner(res.Body)
			first, last := true, ""
			for sc.Scan() {
				if l := sc.Text(); l != "" {
					if first {
						first = false
						streamsStarted.Done()
					}
					last = l
				}
			}
			if first {
				streamsStarted.Done()
			}
			ends <- last
		}()
	}
	streamsStarted.Wait()

	// Keep-alive scrapers of /metrics, and an embedder reading Live.
	var scrapes atomic.Int64
	var scraping sync.WaitGroup // each scraper has its keep-alive connection
	for range 2 {
		wg.Add(1)
		scraping.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 5 * time.Second}
			first := true
			for i := 0; i < 100000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				res, err := c.Get(base + "/metrics")
				if err != nil {
					continue // the listener closed: the scraper retries until stopped
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				scrapes.Add(1)
				if first {
					first = false
					scraping.Done()
				}
			}
			if first {
				scraping.Done()
			}
		}()
	}
	scraping.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 1000000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = srv.Live()
		}
	}()

	// In-process requests, sent before and during the shutdown.
	finals := make(chan *engine.Result, 64)
	var sent atomic.Int64
	gen := &inprocSender{srv: srv, finals: finals}
	pid := srv.ActorSystem().Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return gen }))
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Until the engine has closed: a Generate sent after Stop goes to
		// protoactor's dead letters, by the PID's contract.
		for i := 0; i < 400 && srv.Engine().Stats().Healthy; i++ {
			srv.ActorSystem().Root.Send(pid, &vajra.Generate{
				Messages: []engine.Message{{Role: "user", Content: "In process, during a shutdown."}},
				Sampling: engine.Sampling{MaxTokens: 200, IgnoreEOS: true},
			})
			sent.Add(1)
			time.Sleep(10 * time.Millisecond) // pacing the sender, not waiting for an event
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(ctx) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Shutdown did not return")
	}
	// Entry points after the engine closed.
	_ = srv.Live()
	_ = srv.Engine().Stats()
	_ = srv.Engine().Tokenize("after close")
	close(stop)
	wg.Wait()
	for range streams {
		if last := <-ends; last != "data: [DONE]" {
			t.Errorf("a stream ended with %q, want its terminal data: [DONE]", last)
		}
	}
	// Every in-process request sent got its final Output (bounded wait).
	want := sent.Load()
	deadline := time.After(20 * time.Second)
	for got := int64(0); got < want; got++ {
		select {
		case <-finals:
		case <-deadline:
			t.Fatalf("%d of %d in-process requests got their final Output", got, want)
		}
	}
	if scrapes.Load() == 0 {
		t.Fatal("no /metrics scrape succeeded: the test did not exercise the scrapers")
	}
}

// inprocSender forwards each Generate it is sent to the server as its own
// request and hands every final Result to finals.
type inprocSender struct {
	srv    *vajra.Server
	finals chan *engine.Result
}

func (s *inprocSender) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *vajra.Generate:
		s.srv.Generate(ctx, m)
	case *vajra.Output:
		if m.Take() && m.Final != nil {
			s.finals <- m.Final
		}
	}
}
