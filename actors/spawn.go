package actors

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// Why a spawner of our own: protoactor's usual spawn,
// Spawn(PropsFromProducer(func() actor.Actor { return a }, ...)), builds a
// Props, protoactor's wrapper around the producer and the caller's closure
// for every actor: three allocations per request, plus the mailbox. A Props
// may be spawned any number of times (it is configuration: protoactor keeps
// a pointer to it in each actor's context), and it calls its producer and
// its mailbox producer synchronously inside Spawn. So a spawn slot holds one
// Props whose producers hand out the actor and the mailbox the slot was
// given just before Spawn; slots are pooled, and a slot belongs to one
// goroutine from Get to Put, so no lock is taken.
//
// The producer is called again only when protoactor restarts an actor.
// Sessions are never restarted: their guardian's strategy stops a failed
// session (NewSessions), since a restarted one would replay a request whose
// response is half written. A restart would find the slot empty and panic
// in protoactor, so that invariant is checked by TestSpawnSlotNoRestart.

// spawnSlot is a reusable Props with the actor and mailbox of the spawn
// under way.
type spawnSlot struct {
	props *actor.Props
	next  actor.Actor
	mb    *mailbox
}

// spawner spawns session actors through pooled spawn slots.
type spawner struct {
	root  *actor.RootContext
	pool  *WorkerPool
	slots sync.Pool
}

func newSpawner(root *actor.RootContext, pool *WorkerPool) *spawner {
	return &spawner{root: root, pool: pool}
}

// spawn spawns a and returns its address; a's mailbox is mb, which must be
// fresh (zero) memory the actor owns, such as a field of the actor, so that
// it costs no allocation of its own; nil gets a new one. Safe for
// concurrent use.
func (sp *spawner) spawn(a actor.Actor, mb *mailbox) *actor.PID {
	sl, _ := sp.slots.Get().(*spawnSlot)
	if sl == nil {
		sl = &spawnSlot{}
		sl.props = actor.PropsFromProducer(func() actor.Actor { return sl.next },
			actor.WithMailbox(func() actor.Mailbox { return sl.mb }))
	}
	if mb == nil {
		mb = new(mailbox)
	}
	sp.pool.initMailbox(mb)
	sl.next, sl.mb = a, mb
	pid := sp.root.Spawn(sl.props)
	sl.next, sl.mb = nil, nil
	sp.slots.Put(sl)
	return pid
}
