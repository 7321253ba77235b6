// Package store keeps the Responses API's stored responses (store: true,
// the default) for GET/DELETE /v1/responses/{id}, .../input_items,
// .../cancel and previous_response_id: in this process (a bounded LRU) or
// in Redis, shared by a fleet of nodes.
//
// The sessions (package actors) use it through Store. A store is one
// protoactor actor in the sessions' actor system: only its Receive touches
// the index, so it needs no lock. Every method sends it a message and
// returns at once; a read answers with a *Reply sent to the asking actor
// (Request.ReplyTo), which matches it by its address (&Request.Reply). No
// future, no blocking on a hot path.
//
// A stored record is immutable once put: readers share the pointer.
//
// Two parts, kept apart so that the record part can live in a shared
// store (Redis, with a TTL: redis.go) while the live part stays in the
// process:
//   - the record (Record): status, encoded body, input items, history,
//     and a background response's event log. It is all a finished
//     response is, and all another process would need.
//   - the live entry of a background response still running (Store.Live):
//     its queued record and the address of the actor that runs it (its
//     owner). Get, Cancel and a stream Get of a live id are forwarded to
//     the owner as the *Request itself; the owner answers the asker
//     (Request.Answer). Its last act is Store.Finish, which puts the final
//     record and drops the entry. A live entry is never evicted (the
//     sessions bound how many run).
//
// With Redis (Config.URL) the actor keeps only the live entries; every
// record operation goes to the Redis store's queue, whose goroutines answer
// the asker directly. A live entry is also written to Redis (as queued,
// then with its output so far at each Store.Progress), so that other nodes
// see it in progress, and a cancel on another node reaches this one over
// Redis pub/sub (redisStore.subscribe), as a Cancel forwarded to the owner.
package store

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
)

// Store is the response store as the sessions use it. Every method is safe
// for concurrent use (also from an engine's goroutine) and returns at
// once; answers are actor messages.
type Store interface {
	// Put stores rec, replacing a record of the same id. When ack is set,
	// the store answers it (ack.Reply to ack.ReplyTo, Err set if the save
	// failed) once rec is saved: with a shared store, a session waits for
	// that before its client sees the response's end. The put is queued
	// before Put returns, so a client that reads the response and asks
	// for it finds it.
	Put(rec *Record, ack *Request)
	// Ask sends a read, delete or cancel (req.Op); the reply goes to
	// req.ReplyTo as &req.Reply, from the store or, for a Get or Cancel
	// of a live response, from its owner, which gets req itself.
	Ask(req *Request)
	// Live registers a background response that started (l.Rec its
	// queued record, l.Owner the actor that runs it), until Finish.
	Live(l *Live)
	// Progress writes a live background response's record so far to a
	// shared store, for the other nodes' GETs (nothing for memory). rec
	// must be a record of its own each time: the store reads it on its
	// own goroutine.
	Progress(rec *Record)
	// Finish puts a live response's final record in place of its live
	// entry; the store then sends f back to f.Owner (a *Finish), after
	// which no request for the id reaches the owner any more. With a
	// shared store that is once it has the record: until then the entry
	// stays live and its owner answers from the final record.
	Finish(f *Finish)
	// Forward sends msg to the owner of the live response id, after every
	// request sent before it; it is dropped when id is not live (here).
	Forward(id string, msg any)
	// Stats returns the store's counters.
	Stats() Stats
	// Stop stops the store (and the Redis store's goroutines). Call once,
	// after every session ended.
	Stop()
}

// Default bounds of the response store. A record costs its encoded body
// plus the conversation kept for previous_response_id, so a chain of N
// turns costs O(N²) bytes in total: the byte bound is what matters.
const (
	// DefaultMaxResponses bounds the number of stored responses.
	DefaultMaxResponses = 10_000
	// DefaultMaxBytes bounds their total size (bodies, input items,
	// conversations and background event logs, in bytes): 256 MiB.
	DefaultMaxBytes = 256 << 20
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

// Config selects and bounds the response store; zero values take the
// defaults.
type Config struct {
	// URL selects where records live: "" or "memory" for this process's
	// bounded LRU (MaxResponses, MaxBytes; the least recently used
	// response is evicted first), or a Redis URL (redis://[user:pass@]
	// host:port/db, rediss:// for TLS, unix:///path/to.sock) shared by a
	// fleet (redis.go).
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
	// MaxEventLogBytes the event log of each (see the defaults). The
	// sessions enforce both; they are here because an operator sets them
	// with the store's.
	MaxBackground    int
	MaxEventLogBytes int
}

// WithDefaults fills the zero bounds.
func (c Config) WithDefaults() Config {
	if c.MaxResponses <= 0 {
		c.MaxResponses = DefaultMaxResponses
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
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
func (c Config) IsMemory() bool { return c.URL == "" || c.URL == "memory" }

// Stats are the response store's counters.
type Stats struct {
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
	Ops OpStats
}

// Record is one stored response. Immutable once put (the store's LRU
// links aside, which only the store touches).
type Record struct {
	ID string
	// Status is the object's status (openai.Response*); Background says
	// it was created with background: true (only those can be cancelled
	// or streamed again).
	Status     string
	Background bool
	// Body is the encoded response object, as POST returned it (or as the
	// stream's last event carried it).
	Body []byte
	// Events is a background response's event log (raw SSE events, whole,
	// numbered upwards from FirstSeq), for GET ...?stream=true.
	Events   []byte
	FirstSeq int
	// Input are this request's input items, for input_items.
	Input []openai.ResponseItem
	// History is the conversation up to and including this response's
	// output (without instructions), for the next previous_response_id.
	History []engine.Message
	// Size is what the record holds, for the byte bound: RecordSize,
	// which the writer sets before Put.
	Size int64
	// LeaseUntil, read from a shared store (Unix milliseconds), is when a
	// running background response's owner lease lapses; 0 when none.
	LeaseUntil int64

	// LRU links, touched by the store actor only.
	prev, next *Record
}

// Op is what a Request asks.
type Op uint8

const (
	// Get reads a response; a live one's request goes to its owner
	// (GET, and GET ...?stream=true with Stream set).
	Get Op = iota + 1
	// Delete deletes a finished response; a live one is answered
	// with its record and Live set, and kept.
	Delete
	// Lookup reads the record only, never forwarded: a live one
	// answers its queued record (previous_response_id, input_items).
	Lookup
	// Cancel cancels a live response (its owner answers once it
	// ended); a finished one is answered with its record.
	Cancel
)

// Request asks the store for (or to delete) a response; the store (or,
// for a live response, its owner) answers with Reply, sent to ReplyTo as
// &Reply. The asker keeps the Request until the answer came.
type Request struct {
	Op      Op
	ID      string
	ReplyTo *actor.PID
	// Stream, for Get: the asker wants the response's events (GET
	// ...?stream=true). Opaque to the store, which forwards it with the
	// request to a live response's owner; the asker and the owner agree
	// on its type. A response running on another node is refused
	// (Reply.Elsewhere).
	Stream any
	Reply  Reply
}

// Answer sets r.Reply to rep and sends it to r.ReplyTo: how a live
// response's owner answers a request the store forwarded.
func (r *Request) Answer(ctx actor.SenderContext, rep Reply) {
	r.Reply = rep
	ctx.Send(r.ReplyTo, &r.Reply)
}

// Reply answers a Request: Rec is nil when the id is unknown (never
// stored, deleted or evicted). Live says Rec is a running response's
// record so far (its queued record, or another node's snapshot).
//
// Elsewhere, with Rec nil, refuses a stream Get of a response running on
// another node of the fleet (its events are only in that node's memory
// until it ends). Refusal is a refusal by the live response's owner and
// From, with Rec nil, says the owner took over the asker's stream (and
// takes a message when the asker's client leaves): both opaque to the
// store, set by the owner for the asker.
//
// Err is set, and Rec nil, when the store could not answer (Redis
// unreachable or overloaded: ErrUnavailable, ErrBusy), or, for a put,
// when the record was not saved (also ErrTooLarge).
type Reply struct {
	Rec       *Record
	Live      bool
	Elsewhere bool
	Refusal   any
	From      *actor.PID
	Err       error
}

// Live is a background response that started: Rec is its queued record,
// Owner the actor that runs it.
type Live struct {
	Rec   *Record
	Owner *actor.PID
	// Ack, set with a shared store, is answered once the store has Rec.
	Ack *Request
}

// Finish is a background response's final record (Rec) to put in place of
// its live entry; the store sends it back to Owner once done.
type Finish struct {
	Rec   *Record
	Owner *actor.PID
	// ack is the Redis save of Rec: the entry stays live (forwarded to
	// the owner, which answers from Rec) until Redis has it.
	ack Request
}

// RecordSize estimates what a record holds, in bytes: the body, the input
// items' text and the conversation's text, plus a fixed cost per element.
func RecordSize(rec *Record) int64 {
	const perElem = 64 // struct headers, map entry, slice headers
	n := int64(len(rec.Body)+len(rec.Events)) + int64(len(rec.ID)) + perElem
	for i := range rec.Input {
		it := &rec.Input[i]
		n += perElem + int64(len(it.ID)+len(it.Arguments)+len(it.Output)+len(it.Name)+len(it.CallID))
		for j := range it.Content {
			n += perElem + int64(len(it.Content[j].Text)+len(it.Content[j].Refusal))
		}
	}
	for i := range rec.History {
		m := &rec.History[i]
		n += perElem + int64(len(m.Content)+len(m.Reasoning)+len(m.Name)+len(m.ToolCallID))
		for j := range m.ToolCalls {
			n += perElem + int64(len(m.ToolCalls[j].ID)+len(m.ToolCalls[j].Name)+len(m.ToolCalls[j].Arguments))
		}
	}
	return n
}
