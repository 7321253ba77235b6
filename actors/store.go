package actors

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
)

// The response store keeps the Responses API's stored responses (store:
// true, the default) for GET/DELETE /v1/responses/{id}, .../input_items,
// .../cancel and previous_response_id. It is one protoactor actor per
// Sessions: only its Receive touches the index, so it needs no lock.
// Sessions talk to it with pointer messages; a read answers with a
// *storeReply sent to the asking session's actor, which the session hands
// to its dialect (see receiver). No future, no blocking on a hot path.
//
// A stored record is immutable once put: readers share the pointer.

// Default bounds of the response store. A record costs its encoded body
// plus the conversation kept for previous_response_id, so a chain of N
// turns costs O(N²) bytes in total: the byte bound is what matters.
const (
	// DefaultStoreMaxResponses bounds the number of stored responses.
	DefaultStoreMaxResponses = 10_000
	// DefaultStoreMaxBytes bounds their total size (bodies, input items
	// and conversations, in bytes of text): 256 MiB.
	DefaultStoreMaxBytes = 256 << 20
)

// StoreConfig bounds the response store; zero values take the defaults.
// The least recently used response is evicted first.
type StoreConfig struct {
	MaxResponses int
	MaxBytes     int64
}

// StoreStats are the response store's counters.
type StoreStats struct {
	Stored  uint64 // responses put, ever
	Evicted uint64 // responses evicted by the count or byte bound
	Deleted uint64 // responses deleted by DELETE /v1/responses/{id}
	Count   int64  // responses held now
	Bytes   int64  // bytes held now
}

// storedResponse is one stored response. Immutable after put.
type storedResponse struct {
	id string
	// body is the encoded response object, as POST returned it (or as the
	// stream's last event carried it).
	body []byte
	// input are this request's input items, for input_items.
	input []openai.ResponseItem
	// history is the conversation up to and including this response's
	// output (without instructions), for the next previous_response_id.
	history []engine.Message
	size    int64

	// LRU links, touched by the store actor only.
	prev, next *storedResponse
}

// storeOp is what a storeRequest asks.
type storeOp uint8

const (
	storeGet storeOp = iota + 1
	storeDelete
)

// storePut stores rec (replacing a record of the same id).
type storePut struct{ rec *storedResponse }

// storeRequest asks the store for (or to delete) a response; the store
// answers with reply, sent to replyTo.
type storeRequest struct {
	op      storeOp
	id      string
	replyTo *actor.PID
	reply   storeReply
}

// storeReply answers a storeRequest: rec is nil when the id is unknown
// (never stored, deleted or evicted).
type storeReply struct {
	rec *storedResponse
}

// ResponseStore is the actor that owns stored responses. Its counters are
// safe to read from any goroutine (Stats); everything else is actor-only.
type ResponseStore struct {
	cfg   StoreConfig
	byID  map[string]*storedResponse
	head  storedResponse // sentinel: head.next is the most recently used
	bytes int64

	stored, evicted, deleted atomic.Uint64
	count, size              atomic.Int64

	root *actor.RootContext
	pid  *actor.PID
}

// newResponseStore spawns the store actor in system.
func newResponseStore(system *actor.ActorSystem, cfg StoreConfig, mailbox actor.MailboxProducer) *ResponseStore {
	if cfg.MaxResponses <= 0 {
		cfg.MaxResponses = DefaultStoreMaxResponses
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultStoreMaxBytes
	}
	st := &ResponseStore{cfg: cfg, byID: map[string]*storedResponse{}, root: system.Root}
	st.head.prev, st.head.next = &st.head, &st.head
	props := actor.PropsFromProducer(func() actor.Actor { return st }, actor.WithMailbox(mailbox))
	st.pid = system.Root.Spawn(props)
	return st
}

// Stats returns the store's counters. Safe for concurrent use.
func (st *ResponseStore) Stats() StoreStats {
	return StoreStats{
		Stored: st.stored.Load(), Evicted: st.evicted.Load(), Deleted: st.deleted.Load(),
		Count: st.count.Load(), Bytes: st.size.Load(),
	}
}

// put sends rec to the store. Safe for concurrent use (also from the
// engine's goroutine): the put is queued before the caller's response goes
// out, so a client that reads the response and asks for it finds it.
func (st *ResponseStore) put(rec *storedResponse) {
	st.root.Send(st.pid, &storePut{rec: rec})
}

// ask sends a read or delete; the reply goes to req.replyTo as
// &req.reply. Safe for concurrent use.
func (st *ResponseStore) ask(req *storeRequest) {
	st.root.Send(st.pid, req)
}

// stop stops the actor.
func (st *ResponseStore) stop() { st.root.Stop(st.pid) }

// Receive implements actor.Actor.
func (st *ResponseStore) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *storePut:
		st.add(m.rec)
	case *storeRequest:
		rec := st.byID[m.id]
		if rec != nil {
			if m.op == storeDelete {
				st.remove(rec)
				st.deleted.Add(1)
			} else {
				st.touch(rec)
			}
		}
		m.reply.rec = rec
		ctx.Send(m.replyTo, &m.reply)
	}
}

func (st *ResponseStore) add(rec *storedResponse) {
	if old := st.byID[rec.id]; old != nil {
		st.remove(old)
	}
	st.byID[rec.id] = rec
	st.linkFront(rec)
	st.bytes += rec.size
	st.stored.Add(1)
	// Evict from the cold end; never the record just put, even when it
	// alone is over the byte bound (it is then the only one kept).
	for (len(st.byID) > st.cfg.MaxResponses || st.bytes > st.cfg.MaxBytes) && st.head.prev != rec {
		st.remove(st.head.prev)
		st.evicted.Add(1)
	}
	st.publish()
}

func (st *ResponseStore) remove(rec *storedResponse) {
	delete(st.byID, rec.id)
	rec.prev.next, rec.next.prev = rec.next, rec.prev
	rec.prev, rec.next = nil, nil
	st.bytes -= rec.size
	st.publish()
}

func (st *ResponseStore) touch(rec *storedResponse) {
	rec.prev.next, rec.next.prev = rec.next, rec.prev
	st.linkFront(rec)
}

func (st *ResponseStore) linkFront(rec *storedResponse) {
	rec.prev, rec.next = &st.head, st.head.next
	st.head.next.prev = rec
	st.head.next = rec
}

func (st *ResponseStore) publish() {
	st.count.Store(int64(len(st.byID)))
	st.size.Store(st.bytes)
}

// recordSize estimates what a record holds, in bytes: the body, the input
// items' text and the conversation's text, plus a fixed cost per element.
func recordSize(rec *storedResponse) int64 {
	const perElem = 64 // struct headers, map entry, slice headers
	n := int64(len(rec.body)) + int64(len(rec.id)) + perElem
	for i := range rec.input {
		it := &rec.input[i]
		n += perElem + int64(len(it.ID)+len(it.Arguments)+len(it.Output)+len(it.Name)+len(it.CallID))
		for j := range it.Content {
			n += perElem + int64(len(it.Content[j].Text)+len(it.Content[j].Refusal))
		}
	}
	for i := range rec.history {
		m := &rec.history[i]
		n += perElem + int64(len(m.Content)+len(m.Reasoning)+len(m.Name)+len(m.ToolCallID))
		for j := range m.ToolCalls {
			n += perElem + int64(len(m.ToolCalls[j].ID)+len(m.ToolCalls[j].Name)+len(m.ToolCalls[j].Arguments))
		}
	}
	return n
}

// ResponseStore returns the store of Responses API responses, for metrics.
// Safe for concurrent use.
func (s *Sessions) ResponseStore() *ResponseStore { return s.store }
