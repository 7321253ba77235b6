//go:build !race

// The race detector allocates on its own: allocation tests run without it.

package integration_test

import (
	"context"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
)

// tokenReader is a requester that takes every Output and says so on got.
type tokenReader struct {
	srv   *vajra.Server
	g     *vajra.Generate
	got   chan int // bytes or deltas taken
	final chan *engine.Result
}

func (r *tokenReader) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		r.srv.Generate(ctx, r.g)
	case *vajra.Output:
		m.Take()
		if m.Final != nil {
			r.final <- m.Final
			return
		}
		r.got <- len(m.Frames) + len(m.Deltas)
	}
}

// TestEmbedTokenAllocs drives one in-process stream a token at a time
// through the engine's side (the Formatter and the sink), the requester's
// mailbox (Server.Mailbox) and its Take: steady state allocates nothing,
// with typed deltas and with chat frames.
func TestEmbedTokenAllocs(t *testing.T) {
	for _, d := range []engine.Dialect{engine.DialectNone, engine.DialectChat} {
		eng := &handEngine{started: make(chan handSession, 1)}
		cfg := vajra.DefaultConfig()
		cfg.Engine = eng
		srv, err := vajra.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r := &tokenReader{srv: srv, got: make(chan int, 1), final: make(chan *engine.Result, 1),
			g: &vajra.Generate{Prompt: "hi", Dialect: d}}
		srv.ActorSystem().Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r }, actor.WithMailbox(srv.Mailbox())))
		hs := <-eng.started

		tok, ids := []byte(" hello"), []int{42}
		frames := make([]byte, 0, 1024)
		var delta engine.Delta
		step := func() {
			delta = engine.Delta{Text: tok, TokenIDs: ids}
			frames = hs.req.Formatter.AppendDelta(frames[:0], &delta)
			hs.sink.Deliver(frames, nil)
			if n := <-r.got; n == 0 {
				t.Fatal("nothing taken")
			}
		}
		for i := 0; i < 100; i++ {
			step()
		}
		if a := testing.AllocsPerRun(1000, step); a != 0 {
			t.Errorf("dialect %d: %v allocations per token, want 0", d, a)
		}
		final := &engine.Result{Choices: []engine.Choice{{FinishReason: engine.FinishStop}}}
		hs.sink.Deliver(hs.req.Formatter.AppendEnd(frames[:0], final), final)
		if res := <-r.final; res != final {
			t.Fatalf("final: %+v", res)
		}
		if err := srv.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
