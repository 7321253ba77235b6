package actors

import (
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

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
	return sp.spawnNamed(a, mb, nil)
}

// spawnedIDs numbers the actors spawned under names of ours.
var spawnedIDs atomic.Uint64

// spawnNamed is spawn; with name set, the actor's registry id is formatted
// into it ("s$" and a process-unique number, which protoactor's own ids,
// "$..." never equal) instead of protoactor's NextId allocating one: name
// is memory the actor owns, never written again, so the id is a view of it.
func (sp *spawner) spawnNamed(a actor.Actor, mb *mailbox, name *spawnName) *actor.PID {
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
	var pid *actor.PID
	if name != nil {
		b := strconv.AppendUint(append(name[:0], "s$"...), spawnedIDs.Add(1), 36)
		var err error
		if pid, err = sp.root.SpawnNamed(sl.props, unsafe.String(unsafe.SliceData(b), len(b))); err != nil {
			pid = nil // the name was taken (it cannot be: it is unique)
		}
	}
	if pid == nil {
		pid = sp.root.Spawn(sl.props)
	}
	sl.next, sl.mb = nil, nil
	sp.slots.Put(sl)
	return pid
}

// spawnName holds an actor's registry id: "s$" and up to 13 base-36 digits.
type spawnName [16]byte
