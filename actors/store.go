package actors

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

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
//
// Two parts, kept apart so that the record part can live in a shared
// store (Redis, with a TTL: store_redis.go) while the live part stays in
// the process:
//   - the record (storedResponse): status, encoded body, input items,
//     history, and a background response's event log. It is all a
//     finished response is, and all another process would need.
//   - the live entry (liveResponse) of a background response still
//     running: its queued record and the address of the session actor
//     that runs it. GET, cancel and GET ...?stream=true of a live id are
//     forwarded to that session, which answers the asker itself; its last
//     act is a storeFinish that puts the final record and drops the entry.
//     A live entry is never evicted (Sessions bounds how many run).
//
// With Redis (StoreConfig.URL) the actor keeps only the live entries; every
// record operation goes to the Redis store's queue, whose goroutines answer
// the asker directly. A live entry is also written to Redis (as queued,
// then every second with its output so far), so that other nodes see it in
// progress, and a cancel on another node reaches this one over Redis
// pub/sub (redisStore.subscribe).

// Default bounds of the response store. A record costs its encoded body
// plus the conversation kept for previous_response_id, so a chain of N
// turns costs O(N²) bytes in total: the byte bound is what matters.
const (
	// DefaultStoreMaxResponses bounds the number of stored responses.
	DefaultStoreMaxResponses = 10_000
	// DefaultStoreMaxBytes bounds their total size (bodies, input items,
	// conversations and background event logs, in bytes): 256 MiB.
	DefaultStoreMaxBytes = 256 << 20
	// DefaultMaxBackground bounds the background responses running at
	// once: each holds a session actor and its event log after its HTTP
	// exchange ended, outside admission control's permits. More are
	// refused with 429.
	DefaultMaxBackground = 256
	// DefaultMaxEventLogBytes bounds one background response's event log
	// (its stream's events, kept for GET ...?stream=true&starting_after):
	// 8 MiB, some 30,000 text deltas. Past it the oldest events are
	// dropped (their output is kept: GET still shows the whole output so
	// far); a resume from before the first kept event is refused.
	DefaultMaxEventLogBytes = 8 << 20
)

// StoreConfig selects and bounds the response store; zero values take the
// defaults.
type StoreConfig struct {
	// URL selects where records live: "" or "memory" for this process's
	// bounded LRU (MaxResponses, MaxBytes; the least recently used
	// response is evicted first), or a Redis URL (redis://[user:pass@]
	// host:port/db, rediss:// for TLS, unix:///path/to.sock) shared by a
	// fleet (store_redis.go).
	URL          string
	MaxResponses int
	MaxBytes     int64
	// Redis: how long a stored response lives (default 30 days, as
	// OpenAI keeps them), the largest record stored (default 16 MiB), the
	// key prefix (default "vajra:"), and for rediss:// a PEM file of the
	// CAs that sign the server's certificate (default: the system's roots).
	TTL           time.Duration
	MaxEntryBytes int64
	KeyPrefix     string
	CAFile        string
	// MaxBackground bounds the background responses running at once;
	// MaxEventLogBytes the event log of each (see the defaults).
	MaxBackground    int
	MaxEventLogBytes int
}

// withDefaults fills the zero bounds.
func (c StoreConfig) withDefaults() StoreConfig {
	if c.MaxResponses <= 0 {
		c.MaxResponses = DefaultStoreMaxResponses
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultStoreMaxBytes
	}
	if c.MaxBackground <= 0 {
		c.MaxBackground = DefaultMaxBackground
	}
	if c.MaxEventLogBytes <= 0 {
		c.MaxEventLogBytes = DefaultMaxEventLogBytes
	}
	return c
}

// IsMemory reports whether c keeps records in this process (else Redis).
func (c StoreConfig) IsMemory() bool { return c.URL == "" || c.URL == "memory" }

// StoreStats are the response store's counters.
type StoreStats struct {
	Stored  uint64 // responses put, ever
	Evicted uint64 // responses evicted by the count or byte bound
	Deleted uint64 // responses deleted by DELETE /v1/responses/{id}
	Count   int64  // responses held now
	Bytes   int64  // bytes held now
	Live    int64  // background responses running now (live entries)
	// SaveFailures counts responses that could not be saved (Redis
	// unreachable, its queue full, a record over the entry cap).
	SaveFailures uint64
	// Ops are the Redis store's per-command figures (zero for memory).
	Ops StoreOpStats
}

// storedResponse is one stored response. Immutable after put.
type storedResponse struct {
	id string
	// status is the object's status (openai.Response*); background says
	// it was created with background: true (only those can be cancelled
	// or streamed again).
	status     string
	background bool
	// body is the encoded response object, as POST returned it (or as the
	// stream's last event carried it).
	body []byte
	// events is a background response's event log (raw SSE events, whole,
	// numbered upwards from firstSeq), for GET ...?stream=true.
	events   []byte
	firstSeq int
	// input are this request's input items, for input_items.
	input []openai.ResponseItem
	// history is the conversation up to and including this response's
	// output (without instructions), for the next previous_response_id.
	history []engine.Message
	size    int64
	// leaseUntil, read from a shared store (Unix milliseconds), is when a
	// running background response's owner lease lapses; 0 when none.
	leaseUntil int64

	// LRU links, touched by the store actor only.
	prev, next *storedResponse
}

// storeOp is what a storeRequest asks.
type storeOp uint8

const (
	// storeGet reads a response; a live one's request goes to its session
	// (GET, and GET ...?stream=true with stream set).
	storeGet storeOp = iota + 1
	// storeDelete deletes a finished response; a live one is answered
	// with its record and live set, and kept.
	storeDelete
	// storeLookup reads the record only, never forwarded: a live one
	// answers its queued record (previous_response_id, input_items).
	storeLookup
	// storeCancel cancels a live response (its session answers once it
	// ended); a finished one is answered with its record.
	storeCancel
)

// storePut stores rec (replacing a record of the same id). When ack is
// set, the store answers it (ack.reply to ack.replyTo, err set if the save
// failed) once rec is saved: with Redis, a session waits for that before
// its client sees the response's end.
type storePut struct {
	rec *storedResponse
	ack *storeRequest
}

// storeProgress writes a live background response's record so far to a
// shared store (Redis), for the other nodes' GETs; nothing for memory.
type storeProgress struct{ rec *storedResponse }

// storeLive registers a background response that started: rec is its
// queued record, pid the session that runs it.
type storeLive struct {
	rec *storedResponse
	pid *actor.PID
	// ack, set with a shared store, is answered once Redis has rec.
	ack *storeRequest
}

// storeFinish puts a background response's final record in place of its
// live entry; the store then sends the same message back to pid, after
// which no request for the id reaches the session any more.
type storeFinish struct {
	rec *storedResponse
	pid *actor.PID
	// ack is the Redis save of rec: the entry stays live (forwarded to
	// the session, which answers from rec) until Redis has it.
	ack storeRequest
}

// storeRequest asks the store for (or to delete) a response; the store
// (or, for a live response, its session) answers with reply, sent to
// replyTo.
type storeRequest struct {
	op      storeOp
	id      string
	replyTo *actor.PID
	// stream, for storeGet: the asker wants the response's events.
	stream *streamAsk
	reply  storeReply
}

// streamAsk is a GET ...?stream=true: the asker's connection, its
// framing, and the sequence_number after which to start (-1: all).
type streamAsk struct {
	conn    Conn
	chunked bool
	after   int
}

// storeReply answers a storeRequest: rec is nil when the id is unknown
// (never stored, deleted or evicted). live says rec is a running
// response's queued record. ae is a refusal by the live session; from,
// with rec nil, says the live session took over the asker's stream (and
// takes a bgUnsubscribe when the asker's client leaves).
//
// err is set, and rec nil, when the store could not answer (Redis
// unreachable or overloaded): the session answers 503.
type storeReply struct {
	rec  *storedResponse
	live bool
	ae   *apiError
	from *actor.PID
	err  error
}

// ResponseStore is the actor that owns stored responses. Its counters are
// safe to read from any goroutine (Stats); everything else is actor-only.
type ResponseStore struct {
	cfg   StoreConfig
	byID  map[string]*storedResponse
	head  storedResponse // sentinel: head.next is the most recently used
	bytes int64
	// live are the background responses running (see the file's doc).
	live map[string]liveResponse

	stored, evicted, deleted atomic.Uint64
	count, size, nlive       atomic.Int64

	// redis, when set, holds the records (store_redis.go); finishing are
	// the background responses whose final record it is saving, by the
	// address of the save's reply.
	redis     *redisStore
	finishing map[*storeReply]*storeFinish

	root *actor.RootContext
	pid  *actor.PID
}

// newResponseStore spawns the store actor in system, with its records in
// Redis when cfg.URL names it (log gets the store's own lines).
func newResponseStore(system *actor.ActorSystem, cfg StoreConfig, mailbox actor.MailboxProducer, log *zap.Logger) (*ResponseStore, error) {
	cfg = cfg.withDefaults()
	st := &ResponseStore{cfg: cfg, byID: map[string]*storedResponse{}, live: map[string]liveResponse{},
		finishing: map[*storeReply]*storeFinish{}, root: system.Root}
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

// Stats returns the store's counters. Safe for concurrent use.
func (st *ResponseStore) Stats() StoreStats {
	if st.redis != nil {
		s := st.redis.Stats()
		s.Live = st.nlive.Load()
		return s
	}
	return StoreStats{
		Stored: st.stored.Load(), Evicted: st.evicted.Load(), Deleted: st.deleted.Load(),
		Count: st.count.Load(), Bytes: st.size.Load(), Live: st.nlive.Load(),
	}
}

// liveResponse is the live part of a running background response: its
// queued record (id, input items) and its session's address. It exists
// only in this process.
type liveResponse struct {
	rec *storedResponse
	pid *actor.PID
	// last is the latest record written to a shared store (queued, then
	// each progress), rewritten at every leaseTick to renew its lease.
	last *storedResponse
}

// leaseTick asks the store actor to renew the leases of the live entries
// in the shared store (redisStore.renewLeases sends it).
type leaseTick struct{}

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

// send sends a live-entry message (storeLive, storeFinish). Safe for
// concurrent use.
func (st *ResponseStore) send(m any) { st.root.Send(st.pid, m) }

// stop stops the actor (and the Redis store's goroutines).
func (st *ResponseStore) stop() {
	st.root.Stop(st.pid)
	if st.redis != nil {
		st.redis.stop()
	}
}

// Receive implements actor.Actor.
func (st *ResponseStore) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *storePut:
		if st.redis != nil {
			st.redis.put(m.rec, m.ack)
			return
		}
		st.add(m.rec)
		if m.ack != nil {
			m.ack.reply = storeReply{rec: m.rec}
			ctx.Send(m.ack.replyTo, &m.ack.reply)
		}
	case *storeLive:
		st.live[m.rec.id] = liveResponse{rec: m.rec, pid: m.pid, last: m.rec}
		st.nlive.Store(int64(len(st.live)))
		if st.redis != nil {
			st.redis.put(m.rec, m.ack) // the fleet sees it queued
		}
	case *storeProgress:
		if l, ok := st.live[m.rec.id]; ok && st.redis != nil {
			l.last = m.rec
			st.live[m.rec.id] = l
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
	case *storeFinish:
		if st.redis != nil {
			// Live (and answered by the session from its final record)
			// until Redis has the record: no node may miss it between.
			m.ack = storeRequest{replyTo: ctx.Self()}
			st.finishing[&m.ack.reply] = m
			st.redis.put(m.rec, &m.ack)
			return
		}
		st.finish(ctx, m)
		st.add(m.rec)
	case *storeReply:
		// The Redis save of a finishing background response; other replies
		// (the session's answer to a cancel from another node) need none.
		if f, ok := st.finishing[m]; ok {
			delete(st.finishing, m)
			st.finish(ctx, f)
		}
	case *bgUnsubscribe:
		if l, ok := st.live[m.id]; ok {
			ctx.Send(l.pid, m)
		}
	case *storeRequest:
		if l, ok := st.live[m.id]; ok {
			if m.op == storeGet || m.op == storeCancel {
				ctx.Send(l.pid, m) // the session answers m.replyTo
				return
			}
			m.reply = storeReply{rec: l.rec, live: true}
			ctx.Send(m.replyTo, &m.reply)
			return
		}
		if m.op == storeCancel && m.replyTo.Equal(ctx.Self()) {
			return // a cancel from another node, for a response not ours
		}
		if st.redis != nil {
			st.redis.ask(m)
			return
		}
		rec := st.byID[m.id]
		if rec != nil {
			if m.op == storeDelete {
				st.remove(rec)
				st.deleted.Add(1)
			} else {
				st.touch(rec)
			}
		}
		m.reply = storeReply{rec: rec}
		ctx.Send(m.replyTo, &m.reply)
	}
}

// finish drops a background response's live entry and tells its session,
// after which no request reaches it.
func (st *ResponseStore) finish(ctx actor.Context, m *storeFinish) {
	delete(st.live, m.rec.id)
	st.nlive.Store(int64(len(st.live)))
	ctx.Send(m.pid, m)
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
	n := int64(len(rec.body)+len(rec.events)) + int64(len(rec.id)) + perElem
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
