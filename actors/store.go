package actors

import (
	"sync/atomic"
	"time"

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

// StoreConfig selects and bounds the response store; zero values take the
// defaults.
type StoreConfig struct {
	// URL selects the store: "" or "memory" for this process's bounded LRU
	// (MaxResponses, MaxBytes; the least recently used response is evicted
	// first), or a Redis URL (redis://[user:pass@]host:port/db, rediss://
	// for TLS, unix:///path/to.sock) shared by a fleet (store_redis.go).
	URL          string
	MaxResponses int
	MaxBytes     int64
	// Redis: how long a stored response lives (default 30 days, as
	// OpenAI keeps them), the largest record stored (default 16 MiB), and
	// the key prefix (default "vajra:").
	TTL           time.Duration
	MaxEntryBytes int64
	KeyPrefix     string
	// CAFile, for rediss://, is a PEM file of the CAs that sign the Redis
	// server's certificate (default: the system's roots).
	CAFile string
}

// IsMemory reports whether c selects the in-process store.
func (c StoreConfig) IsMemory() bool { return c.URL == "" || c.URL == "memory" }

// responseStore is where stored responses live: the in-process LRU actor
// (ResponseStore) or Redis (redisStore). Every method is safe for
// concurrent use and never blocks: a read's answer comes to the asking
// session as a *storeReply.
type responseStore interface {
	// put saves rec. The memory store has it before any later ask is
	// served; Redis has it once the write returns. When ack is not nil,
	// the store answers it (ack.reply, sent to ack.replyTo, err set if the
	// save failed) once rec is saved: a session that must not let its
	// client see the end before the fleet can read the response waits
	// for that.
	put(rec *storedResponse, ack *storeRequest)
	// ask sends a read or delete; the reply goes to req.replyTo as
	// &req.reply, with err set when the store could not answer.
	ask(req *storeRequest)
	stop()
	Stats() StoreStats
}

// StoreStats are the response store's counters.
type StoreStats struct {
	Stored  uint64 // responses put, ever
	Evicted uint64 // responses evicted by the count or byte bound
	Deleted uint64 // responses deleted by DELETE /v1/responses/{id}
	Count   int64  // responses held now (memory store)
	Bytes   int64  // bytes held now (memory store)
	// SaveFailures counts responses that could not be saved (Redis
	// unreachable, the store's queue full, a record over the entry cap).
	SaveFailures uint64
	// Ops are the Redis store's per-command figures (zero for memory).
	Ops StoreOpStats
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

// storePut stores rec (replacing a record of the same id), and answers
// ack when set.
type storePut struct {
	rec *storedResponse
	ack *storeRequest
}

// storeRequest asks the store for (or to delete) a response; the store
// answers with reply, sent to replyTo.
type storeRequest struct {
	op      storeOp
	id      string
	replyTo *actor.PID
	reply   storeReply
}

// storeReply answers a storeRequest: rec is nil when the id is unknown
// (never stored, deleted, evicted or expired); err is set, and rec nil,
// when the store could not answer (Redis unreachable or overloaded): the
// session answers 503.
type storeReply struct {
	rec *storedResponse
	err error
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
func (st *ResponseStore) put(rec *storedResponse, ack *storeRequest) {
	st.root.Send(st.pid, &storePut{rec: rec, ack: ack})
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
		if m.ack != nil {
			m.ack.reply = storeReply{rec: m.rec}
			ctx.Send(m.ack.replyTo, &m.ack.reply)
		}
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

// StoreStats returns the response store's figures, for metrics. Safe for
// concurrent use.
func (s *Sessions) StoreStats() StoreStats { return s.store.Stats() }

// StoreIsMemory reports whether responses are stored in this process
// (else in Redis).
func (s *Sessions) StoreIsMemory() bool { return s.cfg.Store.IsMemory() }

// storeUnavailable is the 503 of a request that needs the response store
// when the store cannot answer (err says why: unreachable or overloaded).
// Generation itself does not need the store: store: false requests go on.
func storeUnavailable(err error) *apiError {
	return &apiError{Status: 503, Type: "server_error", Code: "response_store_unavailable",
		Message: "The response store is unavailable (" + err.Error() + "); retry later, or send store: false."}
}
