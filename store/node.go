package store

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
)

// actorStore is the Store: the actor that owns this node's live entries
// and, for memory, the records (memory.go); with Redis it hands every
// record operation to redis. Its counters are safe to read from any
// goroutine (Stats); everything else is actor-only.
type actorStore struct {
	cfg   Config
	byID  map[string]*Record
	head  Record // sentinel: head.next is the most recently used
	bytes int64
	// live are the background responses running (see the package doc).
	live map[string]liveResponse

	stored, evicted, deleted atomic.Uint64
	count, held, nlive       atomic.Int64

	// redis, when set, holds the records (redis.go); finishing are the
	// background responses whose final record it is saving, by the
	// address of the save's reply.
	redis     *redisStore
	finishing map[*Reply]*Finish

	root *actor.RootContext
	pid  *actor.PID
}

// Spawn starts the store actor in system, its mailbox made by mailbox (nil:
// protoactor's default), with its records in Redis when cfg.URL names it
// (log gets the store's own lines). cfg's zero bounds take the defaults.
func Spawn(system *actor.ActorSystem, cfg Config, mailbox actor.MailboxProducer, log *zap.Logger) (Store, error) {
	st, err := spawn(system, cfg, mailbox, log)
	if err != nil {
		return nil, err
	}
	return st, nil
}

func spawn(system *actor.ActorSystem, cfg Config, mailbox actor.MailboxProducer, log *zap.Logger) (*actorStore, error) {
	cfg = cfg.WithDefaults()
	st := &actorStore{cfg: cfg, byID: map[string]*Record{}, live: map[string]liveResponse{},
		finishing: map[*Reply]*Finish{}, root: system.Root}
	st.head.prev, st.head.next = &st.head, &st.head
	props := actor.PropsFromProducer(func() actor.Actor { return st }, actor.WithMailbox(mailbox))
	st.pid = system.Root.Spawn(props)
	if !cfg.IsMemory() {
		rs, err := newRedisStore(system, cfg, log, st.pid)
		if err != nil {
			system.Root.Stop(st.pid)
			return nil, err
		}
		st.redis = rs
	}
	return st, nil
}

// Stats implements Store.
func (st *actorStore) Stats() Stats {
	if st.redis != nil {
		s := st.redis.Stats()
		s.Live = st.nlive.Load()
		return s
	}
	return Stats{
		Stored: st.stored.Load(), Evicted: st.evicted.Load(), Deleted: st.deleted.Load(),
		Count: st.count.Load(), Bytes: st.held.Load(), Live: st.nlive.Load(),
	}
}

// liveResponse is the live part of a running background response: its
// queued record (id, input items) and its owner's address. It exists
// only in this process.
type liveResponse struct {
	rec *Record
	pid *actor.PID
	// last is the latest record written to a shared store (queued, then
	// each progress), rewritten at every leaseTick to renew its lease.
	last *Record
}

// The store actor's own messages.
type (
	// putMsg stores rec, answering ack when set (Store.Put).
	putMsg struct {
		rec *Record
		ack *Request
	}
	// progress is a live response's record so far (Store.Progress).
	progress struct{ rec *Record }
	// forward is a message for a live response's owner (Store.Forward).
	forward struct {
		id  string
		msg any
	}
	// leaseTick asks the store actor to renew the leases of the live
	// entries in the shared store (redisStore.renewLeases sends it).
	leaseTick struct{}
)

// Put implements Store.
func (st *actorStore) Put(rec *Record, ack *Request) {
	st.root.Send(st.pid, &putMsg{rec: rec, ack: ack})
}

// Ask implements Store.
func (st *actorStore) Ask(req *Request) { st.root.Send(st.pid, req) }

// Live implements Store.
func (st *actorStore) Live(l *Live) { st.root.Send(st.pid, l) }

// Progress implements Store.
func (st *actorStore) Progress(rec *Record) { st.root.Send(st.pid, &progress{rec: rec}) }

// Finish implements Store.
func (st *actorStore) Finish(f *Finish) { st.root.Send(st.pid, f) }

// Forward implements Store.
func (st *actorStore) Forward(id string, msg any) {
	st.root.Send(st.pid, &forward{id: id, msg: msg})
}

// Stop implements Store.
func (st *actorStore) Stop() {
	st.root.Stop(st.pid)
	if st.redis != nil {
		st.redis.stop()
	}
}

// Receive implements actor.Actor.
func (st *actorStore) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *putMsg:
		if st.redis != nil {
			st.redis.put(m.rec, m.ack)
			return
		}
		st.add(m.rec)
		if m.ack != nil {
			m.ack.Answer(ctx, Reply{Rec: m.rec})
		}
	case *Live:
		st.live[m.Rec.ID] = liveResponse{rec: m.Rec, pid: m.Owner, last: m.Rec}
		st.nlive.Store(int64(len(st.live)))
		if st.redis != nil {
			st.redis.put(m.Rec, m.Ack) // the fleet sees it queued
		}
	case *progress:
		if l, ok := st.live[m.rec.ID]; ok && st.redis != nil {
			l.last = m.rec
			st.live[m.rec.ID] = l
			st.redis.put(m.rec, nil)
		}
	case *leaseTick:
		// The fleet's other nodes take a response whose lease lapsed for
		// one whose node died: renew every live one's (its last record,
		// written again with a fresh lease).
		for _, l := range st.live {
			if st.redis != nil {
				st.redis.put(l.last, nil)
			}
		}
	case *Finish:
		if st.redis != nil {
			// Live (and answered by the owner from its final record)
			// until Redis has the record: no node may miss it between.
			m.ack = Request{ReplyTo: ctx.Self()}
			st.finishing[&m.ack.Reply] = m
			st.redis.put(m.Rec, &m.ack)
			return
		}
		st.finish(ctx, m)
		st.add(m.Rec)
	case *Reply:
		// The Redis save of a finishing background response; other replies
		// (the owner's answer to a cancel from another node) need none.
		if f, ok := st.finishing[m]; ok {
			delete(st.finishing, m)
			st.finish(ctx, f)
		}
	case *forward:
		if l, ok := st.live[m.id]; ok {
			ctx.Send(l.pid, m.msg)
		}
	case *Request:
		if l, ok := st.live[m.ID]; ok {
			if m.Op == Get || m.Op == Cancel {
				ctx.Send(l.pid, m) // the owner answers m.ReplyTo
				return
			}
			m.Answer(ctx, Reply{Rec: l.rec, Live: true})
			return
		}
		if m.Op == Cancel && m.ReplyTo.Equal(ctx.Self()) {
			return // a cancel from another node, for a response not ours
		}
		if st.redis != nil {
			st.redis.ask(m)
			return
		}
		rec := st.byID[m.ID]
		if rec != nil {
			if m.Op == Delete {
				st.remove(rec)
				st.deleted.Add(1)
			} else {
				st.touch(rec)
			}
		}
		m.Answer(ctx, Reply{Rec: rec})
	}
}

// finish drops a background response's live entry and tells its owner,
// after which no request reaches it.
func (st *actorStore) finish(ctx actor.Context, m *Finish) {
	delete(st.live, m.Rec.ID)
	st.nlive.Store(int64(len(st.live)))
	ctx.Send(m.Owner, m)
}

var _ Store = (*actorStore)(nil)
