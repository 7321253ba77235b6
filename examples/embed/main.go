// Command embed is a program that embeds Vajra in its own protoactor actor
// system: it wraps the simulated engine in an engine of its own (which
// adds a system message to every chat prompt and counts the requests),
// serves the OpenAI and Anthropic APIs over HTTP, and asks for generations
// in process from its own actors, with no socket in between.
//
//	go run ./examples/embed -n 8
//
// It prints each in-process answer and the answer of one HTTP request to
// itself, then stops (or, with -serve, keeps serving until interrupted).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/sim"
)

// briefEngine wraps another engine: every chat request gets a system
// message first, and requests are counted. Prepare runs before the 200 (or
// before an in-process request's first output), so what it changes is what
// the engine sees. Unwrap (engine.Wrapper) lets the server find what the
// wrapped engine implements beyond engine.Engine, which embedding the
// interface hides: its embeddings, context length, output parsing.
type briefEngine struct {
	engine.Engine
	requests atomic.Int64
}

func (e *briefEngine) Unwrap() engine.Engine { return e.Engine }

const systemPrompt = "Answer briefly."

func (e *briefEngine) Prepare(req *engine.Request) error {
	e.requests.Add(1)
	if len(req.Messages) > 0 && req.Messages[0].Role != "system" {
		req.Messages = append([]engine.Message{{Role: "system", Content: systemPrompt}}, req.Messages...)
	}
	return e.Engine.Prepare(req)
}

// asker asks the server one question in process and reports the answer.
type asker struct {
	srv      *vajra.Server
	question string
	answer   strings.Builder
	results  chan<- string
}

func (a *asker) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.srv.Generate(ctx, &vajra.Generate{
			Messages: []engine.Message{{Role: "user", Content: a.question}},
			Sampling: engine.Sampling{MaxTokens: 16},
		})
	case *vajra.Output:
		m.Take()
		for _, d := range m.Deltas {
			if d.Kind == engine.DeltaText {
				a.answer.Write(d.Text)
			}
		}
		if res := m.Final; res != nil {
			if res.Err != nil {
				a.results <- fmt.Sprintf("%q: failed: %v", a.question, res.Err)
			} else {
				a.results <- fmt.Sprintf("%q: %q (%d+%d tokens, %s)", a.question, a.answer.String(),
					res.Usage.PromptTokens, res.Usage.CompletionTokens, res.Choices[0].FinishReason)
			}
			ctx.Stop(ctx.Self()) // done; stopping earlier would abort the request
		}
	}
}

func main() {
	n := flag.Int("n", 4, "in-process generations to run at once")
	port := flag.Int("port", 0, "HTTP port (0 picks a free one)")
	serve := flag.Bool("serve", false, "keep serving HTTP after the demo, until interrupted")
	flag.Parse()
	if err := run(*n, *port, *serve); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

func run(n, port int, serve bool) error {
	system := actor.NewActorSystem()
	defer system.Shutdown()

	// The settings every engine shares (engine.Config): an engine the
	// program builds itself takes them where it is built. (With an engine
	// Vajra builds, the simulated one, a Driver's or remote workers', they
	// are set once in cfg.EngineConfig instead.)
	shared := engine.Config{MaxModelLen: 4096, MaxNumSeqs: 64, Seed: 42}
	sc := sim.DefaultConfig()
	sc.Config = shared
	sc.ITL = 2 * time.Millisecond
	inner, err := sim.New(sc)
	if err != nil {
		return err
	}
	eng := &briefEngine{Engine: inner}

	cfg := vajra.DefaultConfig()
	cfg.Port = port
	cfg.Engine = eng // closed by the server on Stop
	// What the server applies to any engine: frames of up to 2 tokens,
	// and the context length (which the simulated engine also reports).
	cfg.EngineConfig = engine.Config{MaxModelLen: shared.MaxModelLen, StreamInterval: 2}
	cfg.ActorSystem = system
	cfg.MaxConcurrentRequests = 64 // shared by HTTP and in-process requests
	cfg.MaxQueuedRequests = 256
	srv, err := vajra.New(cfg)
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	defer srv.Stop(context.Background())
	fmt.Println("serving on", srv.Addr())

	results := make(chan string, n)
	for i := 0; i < n; i++ {
		a := &asker{srv: srv, question: fmt.Sprintf("Tell me about the sea, part %d.", i+1), results: results}
		system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }, actor.WithMailbox(srv.Mailbox())))
	}

	// The same server over HTTP, meanwhile.
	body := `{"model":"` + vajra.DefaultModelName + `","messages":[{"role":"user","content":"And over HTTP?"}],"max_tokens":16}`
	resp, err := http.Post("http://"+srv.Addr().String()+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP: %d %s %v", resp.StatusCode, b, err)
	}
	fmt.Printf("HTTP: %d bytes of chat.completion\n", len(b))

	for i := 0; i < n; i++ {
		select {
		case r := <-results:
			fmt.Println("in process:", r)
		case <-time.After(30 * time.Second):
			return fmt.Errorf("in-process generation %d of %d did not end", i+1, n)
		}
	}
	fmt.Printf("the engine wrapper prepared %d requests\n", eng.requests.Load())
	if want := int64(n + 1); eng.requests.Load() != want {
		return fmt.Errorf("the engine wrapper saw %d requests, want %d", eng.requests.Load(), want)
	}
	if serve {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
	return nil
}
