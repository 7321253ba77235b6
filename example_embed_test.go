package vajra_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
)

// asker is an actor of the embedding program: it asks the server for one
// generation, in process, and prints how it ended.
type asker struct {
	srv  *vajra.Server
	text strings.Builder
	done chan struct{}
}

func (a *asker) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		// The replies come to this actor; stopping it aborts the request.
		a.srv.Generate(ctx, &vajra.Generate{
			Messages: []engine.Message{{Role: "user", Content: "Tell me about the sea."}},
			Sampling: engine.Sampling{MaxTokens: 8, IgnoreEOS: true},
			// Dialect engine.DialectNone (the zero value): typed deltas.
		})
	case *vajra.Output:
		m.Take() // what the engine produced since the last notice
		for _, d := range m.Deltas {
			a.text.Write(d.Text)
		}
		if res := m.Final; res != nil {
			if res.Err != nil {
				fmt.Println("failed:", res.Err)
			} else {
				fmt.Printf("finish: %s, completion tokens: %d, deltas add up: %v\n",
					res.Choices[0].FinishReason, res.Usage.CompletionTokens, a.text.String() == res.Choices[0].Text)
			}
			close(a.done)
		}
	}
}

// Example_embed runs Vajra inside the program's own actor system: the
// server serves HTTP on a free port, and an actor of the program asks it
// for a generation with a message, with no socket, parser or JSON between
// them.
func Example_embed() {
	system := actor.NewActorSystem()

	cfg := vajra.DefaultConfig()
	cfg.Port = 0 // a free port
	cfg.ActorSystem = system
	srv, err := vajra.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := srv.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Stop(context.Background())

	a := &asker{srv: srv, done: make(chan struct{})}
	// Vajra's mailbox: the actor receives its tokens without allocating.
	system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }, actor.WithMailbox(srv.Mailbox())))
	<-a.done
	// Output:
	// finish: length, completion tokens: 8, deltas add up: true
}
