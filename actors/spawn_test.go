package actors

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// spawnProbe reports each message it receives on got and panics on its
// first user message when told to.
type spawnProbe struct {
	got   chan any
	panic bool
}

func (p *spawnProbe) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started, *actor.Stopped:
		p.got <- m
	case string:
		if p.panic {
			panic("probe failed")
		}
		p.got <- m
	}
}

// TestSpawnSlotNoRestart: actors spawned through the spawner's reused props
// each run as themselves, also while slots are reused, and a failing one is
// stopped by the sessions' guardian, never restarted (a restart would ask
// the slot's producer for an actor it no longer holds: spawn.go).
func TestSpawnSlotNoRestart(t *testing.T) {
	s, err := NewSessions(Config{Engine: &handFramed{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wait := func(p *spawnProbe, want string) {
		t.Helper()
		select {
		case m := <-p.got:
			var name string
			switch m := m.(type) {
			case *actor.Started:
				name = "started"
			case *actor.Stopped:
				name = "stopped"
			case string:
				name = m
			}
			if name != want {
				t.Fatalf("got %s, want %s", name, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s", want)
		}
	}
	failing := &spawnProbe{got: make(chan any, 4), panic: true}
	pid := s.spawner.spawn(failing, nil)
	wait(failing, "started")
	for i := 0; i < 3; i++ { // slots are reused: each actor is its own
		p := &spawnProbe{got: make(chan any, 4)}
		var mb mailbox
		s.root.Send(s.spawner.spawn(p, &mb), "hello")
		wait(p, "started")
		wait(p, "hello")
	}
	s.root.Send(pid, "fail")
	wait(failing, "stopped")
	select {
	case m := <-failing.got:
		t.Fatalf("the failed actor got %T after it stopped (restarted?)", m)
	default:
	}
	if s.Failures() != 1 {
		t.Errorf("failures %d, want 1", s.Failures())
	}
}
