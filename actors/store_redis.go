package actors

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
)

// The Redis-backed response store, for a fleet of Vajra nodes behind a load
// balancer: a response created on one node can be read, chained, listed,
// deleted or cancelled through any other. The client is
// github.com/redis/go-redis/v9: Redis's own Go client, one small module,
// a connection pool safe for concurrent use, and ParseURL for every URL
// form an operator writes (redis://, rediss:// for TLS, unix://). rueidis
// is faster through auto-pipelining and client-side caching, but the store
// makes one command per request, off the hot path, where neither shows.
//
// Nothing here runs on an event loop or per token. The store actor
// (store.go) keeps the live background entries and hands every record
// operation to this store: a job on one of redisWorkers bounded queues,
// each served by its own goroutine, chosen by the response id so that one
// response's writes land in the order they were made (queued, progress,
// final). The answer comes back to the asking session as the same
// *storeReply the memory store sends. A slow or unreachable Redis
// therefore delays only the store's own jobs: no mailbox worker and no
// stream waits for it. A full queue answers at once with errStoreBusy.
//
// Background responses across the fleet: the node that runs one writes its
// record to Redis when it starts (queued) and about once a second with its
// output so far, so any node's GET shows it in progress; a cancel reaching
// another node is published on the prefix's "cancel" channel, which every
// node subscribes to; the node that runs it aborts it and saves the
// cancelled record, which the asking node waits for (bounded) and answers.
//
// Keys follow Redis conventions: one configurable prefix (default
// "vajra:"), then "resp:" and the response id. Each value is one JSON
// document (the record below), written with SET ... PX ttl, so an expired
// response disappears by itself, as OpenAI's do after 30 days.

// Defaults of the Redis store.
const (
	DefaultStoreTTL           = 30 * 24 * time.Hour
	DefaultStoreMaxEntryBytes = 16 << 20
	DefaultStoreKeyPrefix     = "vajra:"
	redisWorkers              = 16
	redisQueue                = 256 // per worker
	// cancelWait bounds how long a node that relayed a cancel waits for
	// the node running the response to save its cancelled record.
	cancelWait = 5 * time.Second
)

var (
	// errStoreUnavailable is a store the node cannot reach now.
	errStoreUnavailable = errors.New("the response store is unavailable")
	// errStoreBusy is a store whose queue of jobs is full.
	errStoreBusy = errors.New("the response store is overloaded")
	// errStoreEntryTooLarge is a record over MaxEntryBytes.
	errStoreEntryTooLarge = errors.New("the response is too large to store")
)

// redisStore holds a ResponseStore's records in Redis (the store actor
// keeps the live entries and hands it every record operation).
type redisStore struct {
	client   *redis.Client
	prefix   string
	ttl      time.Duration
	maxEntry int64
	log      *zap.Logger
	root     *actor.RootContext
	store    *actor.PID // the store actor, for cancels from other nodes
	jobs     [redisWorkers]chan *storeJob
	wg       sync.WaitGroup
	ops      storeOpStats
	// up is false while Redis is known to be unreachable: commands then
	// fail at once instead of each waiting out a dial timeout, and one
	// prober goroutine (probing) pings every probeInterval until Redis
	// answers again.
	up      atomic.Bool
	probing atomic.Bool
	// upHook, set by tests before the store is used, runs in the prober
	// right after it marked the store up.
	upHook   func()
	quit     chan struct{}
	stored   atomic.Uint64
	deleted  atomic.Uint64
	failures atomic.Uint64 // saves that failed (logged once per transition)
}

// storeJob is one queued command: a save of put (answering req, when set,
// once saved), or the read or delete req.
type storeJob struct {
	put *storedResponse
	req *storeRequest
}

// newRedisStore connects to the store at url. The node starts even when
// Redis is down (generation does not need it): the failure is logged, and
// store-dependent requests get 503 until Redis answers again.
func newRedisStore(system *actor.ActorSystem, cfg StoreConfig, log *zap.Logger, store *actor.PID) (*redisStore, error) {
	opts, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("--response-store: %w", err)
	}
	if cfg.CAFile != "" {
		if opts.TLSConfig == nil {
			return nil, errors.New("--response-store-ca-file needs a rediss:// store URL")
		}
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--response-store-ca-file: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--response-store-ca-file %s: no PEM certificate in it", cfg.CAFile)
		}
		opts.TLSConfig.RootCAs = roots
	}
	// Fail fast rather than queue behind a dead server: one retry, and a
	// pool wait no longer than a command may take.
	opts.MaxRetries = 1
	if opts.PoolTimeout == 0 {
		opts.PoolTimeout = 4 * time.Second
	}
	// go-redis logs through a process-wide logger of its own (dial
	// failures of its pool, every few milliseconds while Redis is down);
	// the store reports reachability itself, once per change, so the
	// library's lines go to debug.
	redisLogOnce.Do(func() { redis.SetLogger(redisLogger{log.Named("redis")}) })
	st := &redisStore{
		client:   redis.NewClient(opts),
		prefix:   cfg.KeyPrefix,
		ttl:      cfg.TTL,
		maxEntry: cfg.MaxEntryBytes,
		log:      log.Named("response-store"),
		root:     system.Root,
		store:    store,
		quit:     make(chan struct{}),
	}
	if st.prefix == "" {
		st.prefix = DefaultStoreKeyPrefix
	}
	if st.ttl <= 0 {
		st.ttl = DefaultStoreTTL
	}
	if st.maxEntry <= 0 {
		st.maxEntry = DefaultStoreMaxEntryBytes
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	if err := st.client.Ping(ctx).Err(); err != nil {
		st.log.Warn("Redis is not reachable; stored-response requests get 503 until it is", zap.String("addr", opts.Addr), zap.Error(err))
		st.probe()
	} else {
		st.up.Store(true)
		st.log.Info("response store: Redis", zap.String("addr", opts.Addr), zap.Int("db", opts.DB))
	}
	for i := range st.jobs {
		st.jobs[i] = make(chan *storeJob, redisQueue)
		st.wg.Add(1)
		go st.work(st.jobs[i])
	}
	st.wg.Add(1)
	go st.subscribe()
	return st, nil
}

// queue is the worker queue of response id: the same one for every job of
// one response (FNV-1a of the id).
func (st *redisStore) queue(id string) chan *storeJob {
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * 16777619
	}
	return st.jobs[h%redisWorkers]
}

func (st *redisStore) cancelChannel() string { return st.prefix + "cancel" }

// subscribe relays cancels published by other nodes to the store actor,
// which hands each to the session of a response this node runs (others
// ignore it). go-redis's PubSub resubscribes by itself after Redis comes
// back.
func (st *redisStore) subscribe() {
	defer st.wg.Done()
	ps := st.client.Subscribe(context.Background(), st.cancelChannel())
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-st.quit:
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			st.root.Send(st.store, &storeRequest{op: storeCancel, id: m.Payload, replyTo: st.store})
		}
	}
}

func (st *redisStore) key(id string) string { return st.prefix + "resp:" + id }

// put queues a save of rec, answering ack (when set) once it is saved or
// failed. A save that cannot be queued is logged and counted: the
// response has been answered; only its later reads will miss it.
func (st *redisStore) put(rec *storedResponse, ack *storeRequest) {
	st.enqueue(&storeJob{put: rec, req: ack})
}

// ask queues a read, delete or cancel; the reply goes to req.replyTo, with
// reply.err set when Redis could not answer.
func (st *redisStore) ask(req *storeRequest) { st.enqueue(&storeJob{req: req}) }

// enqueue queues j on its response's worker, or answers it at once:
// errStoreUnavailable while Redis is known down, errStoreBusy when the
// worker's queue is full.
func (st *redisStore) enqueue(j *storeJob) {
	var id string
	if j.put != nil {
		id = j.put.id
	} else {
		id = j.req.id
	}
	if !st.up.Load() {
		st.refuse(j, resultError, errStoreUnavailable)
		return
	}
	select {
	case st.queue(id) <- j:
	default:
		st.refuse(j, resultBusy, errStoreBusy)
	}
}

// refuse answers a job that never reached Redis, and counts it.
func (st *redisStore) refuse(j *storeJob, res storeResult, err error) {
	if j.put != nil {
		st.ops.record(opPut, res, 0)
		st.saveFailed(j.put.id, err)
	} else {
		st.ops.record(j.req.op.kind(), res, 0)
	}
	st.reply(j, storeReply{err: err})
}

// reply sends r to the job's asker, if it has one (a save may have none).
func (st *redisStore) reply(j *storeJob, r storeReply) {
	if j.req == nil {
		return
	}
	j.req.reply = r
	st.root.Send(j.req.replyTo, &j.req.reply)
}

// stop drains the queues and closes the client. Call once every session
// ended (nothing sends jobs any more).
func (st *redisStore) stop() {
	close(st.quit)
	for _, q := range st.jobs {
		close(q)
	}
	st.wg.Wait()
	_ = st.client.Close()
}

func (st *redisStore) work(jobs chan *storeJob) {
	defer st.wg.Done()
	for j := range jobs {
		if j.put == nil {
			st.reply(j, st.answer(j.req))
			continue
		}
		err := st.save(j.put)
		if err != nil {
			st.saveFailed(j.put.id, err)
		}
		st.reply(j, storeReply{rec: j.put, err: err})
	}
}

// commandTimeout bounds one command beyond the client's own socket
// timeouts (which ParseURL's dial_timeout/read_timeout set).
const commandTimeout = 5 * time.Second

func (st *redisStore) save(rec *storedResponse) error {
	doc, err := encodeRecord(rec)
	if err != nil {
		return err
	}
	if int64(len(doc)) > st.maxEntry {
		st.ops.record(opPut, resultTooLarge, 0)
		return errStoreEntryTooLarge
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	start := time.Now()
	err = st.client.Set(ctx, st.key(rec.id), doc, st.ttl).Err()
	st.done(opPut, err, start)
	if err != nil {
		return errStoreUnavailable
	}
	st.stored.Add(1)
	return nil
}

// answer serves a read, delete or cancel of a response this node does not
// run (the store actor answered its own live ones).
func (st *redisStore) answer(req *storeRequest) storeReply {
	rec, err := st.load(req.op.kind(), req.id)
	if err != nil || rec == nil {
		return storeReply{err: err}
	}
	// In progress on another node: its record is a snapshot.
	running := rec.background && !openai.ResponseStatusFinal(rec.status)
	switch {
	case req.op == storeDelete && running:
		return storeReply{rec: rec, live: true}
	case req.op == storeDelete:
		ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
		defer cancel()
		start := time.Now()
		n, err := st.client.Del(ctx, st.key(req.id)).Result()
		st.done(opDelete, err, start)
		if err != nil {
			return storeReply{err: errStoreUnavailable}
		}
		if n == 0 {
			return storeReply{} // deleted meanwhile
		}
		st.deleted.Add(1)
		return storeReply{rec: rec}
	case req.op == storeCancel && running:
		return st.cancelElsewhere(rec)
	case req.op == storeGet && req.stream != nil && running:
		return storeReply{ae: &apiError{Status: 409, Type: "invalid_request_error", Code: "response_in_progress_elsewhere",
			Message: "Response " + quoteID(req.id) + " is running on another node of the fleet: its events can be streamed again there, or from any node once it has ended; GET shows its progress."}}
	case req.op == storeLookup:
		return storeReply{rec: rec, live: running}
	}
	return storeReply{rec: rec}
}

// load reads one record; nil without error when there is none.
func (st *redisStore) load(op storeOpKind, id string) (*storedResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	start := time.Now()
	doc, err := st.client.Get(ctx, st.key(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		st.done(op, nil, start)
		return nil, nil
	}
	st.done(op, err, start)
	if err != nil {
		return nil, errStoreUnavailable
	}
	rec, err := decodeRecord(doc)
	if err != nil {
		st.log.Error("a stored response does not decode; treated as absent", zap.String("id", id), zap.Error(err))
		return nil, nil
	}
	return rec, nil
}

// cancelElsewhere relays a cancel of a background response another node
// runs, then waits (bounded) for that node's cancelled, or otherwise
// final, record. When none comes in time (the node is gone, or slow), the
// latest record is the answer: still in progress, so the client may
// cancel again or poll.
func (st *redisStore) cancelElsewhere(rec *storedResponse) storeReply {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	start := time.Now()
	err := st.client.Publish(ctx, st.cancelChannel(), rec.id).Err()
	cancel()
	st.done(opPublish, err, start)
	if err != nil {
		return storeReply{err: errStoreUnavailable}
	}
	deadline := time.Now().Add(cancelWait)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for time.Now().Before(deadline) {
		select {
		case <-st.quit:
			return storeReply{rec: rec}
		case <-t.C:
		}
		r, err := st.load(opGet, rec.id)
		if err != nil {
			return storeReply{err: err}
		}
		if r == nil {
			return storeReply{}
		}
		if openai.ResponseStatusFinal(r.status) {
			return storeReply{rec: r}
		}
		rec = r
	}
	return storeReply{rec: rec}
}

// done records a command's outcome and notes whether Redis is reachable,
// logging each change once rather than once per failed command.
func (st *redisStore) done(op storeOpKind, err error, start time.Time) {
	res := resultOK
	if err != nil {
		res = resultError
	}
	st.ops.record(op, res, time.Since(start))
	if err == nil || isRedisReply(err) {
		return
	}
	if st.up.Swap(false) {
		st.log.Warn("Redis is not reachable; stored-response requests get 503 until it is", zap.Error(err))
		st.probe()
	}
}

// probeInterval is how often a store that lost Redis pings it.
const probeInterval = 250 * time.Millisecond

// probe starts the prober unless it runs: it pings Redis every
// probeInterval and marks the store up at the first answer.
func (st *redisStore) probe() {
	if !st.probing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		t := time.NewTicker(probeInterval)
		defer t.Stop()
		for {
			select {
			case <-st.quit:
				st.probing.Store(false)
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
			err := st.client.Ping(ctx).Err()
			cancel()
			if err == nil {
				// The prober is done before the store is marked up: a
				// command failing from then on (Redis lost again at once)
				// finds no prober running and starts one (done). The other
				// order left a gap in which that failure marked the store
				// down with no prober left, refusing every request until
				// a restart.
				st.probing.Store(false)
				st.up.Store(true)
				st.log.Info("Redis is reachable again")
				if st.upHook != nil {
					st.upHook()
				}
				return
			}
		}
	}()
}

// isRedisReply tells an error Redis itself answered (the server is up:
// out of memory, a read-only replica...) from a transport failure or a
// timeout.
func isRedisReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

func (st *redisStore) saveFailed(id string, err error) {
	st.failures.Add(1)
	if ce := st.log.Check(zap.WarnLevel, "a response could not be stored"); ce != nil {
		ce.Write(zap.String("id", id), zap.Error(err))
	}
}

// Stats returns the store's counters. Count and Bytes are not known for
// Redis (it is shared by the fleet): they stay 0.
func (st *redisStore) Stats() StoreStats {
	// (Live is the store actor's.)
	return StoreStats{Stored: st.stored.Load(), Deleted: st.deleted.Load(), SaveFailures: st.failures.Load(), Ops: st.ops.snapshot()}
}

// The record as stored in Redis: one JSON document with its own field
// names, so that the wire shapes of the API may change without breaking
// records written by an older node.
type recordJSON struct {
	V          int             `json:"v"`
	ID         string          `json:"id"`
	Status     string          `json:"status,omitempty"`
	Background bool            `json:"background,omitempty"`
	Body       json.RawMessage `json:"body"`
	// Events and FirstSeq: a background response's event log (raw SSE
	// events), for GET ...?stream=true once it ended.
	Events   []byte        `json:"events,omitempty"`
	FirstSeq int           `json:"first_seq,omitempty"`
	Input    []itemJSON    `json:"input,omitempty"`
	History  []messageJSON `json:"history,omitempty"`
}

type itemJSON struct {
	Type      string     `json:"type"`
	ID        string     `json:"id,omitempty"`
	Status    string     `json:"status,omitempty"`
	Role      string     `json:"role,omitempty"`
	Content   []partJSON `json:"content,omitempty"`
	CallID    string     `json:"call_id,omitempty"`
	Name      string     `json:"name,omitempty"`
	Arguments string     `json:"arguments,omitempty"`
	Output    string     `json:"output,omitempty"`
}

type partJSON struct {
	Type    string `json:"type"`
	Text    string `json:"text,omitempty"`
	Refusal string `json:"refusal,omitempty"`
}

type messageJSON struct {
	Role       string     `json:"role"`
	Content    string     `json:"content,omitempty"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []callJSON `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Reasoning  string     `json:"reasoning,omitempty"`
}

type callJSON struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

const recordVersion = 1

// encodeRecord renders rec as the JSON document Redis keeps. Once per
// stored response, off the hot path.
func encodeRecord(rec *storedResponse) ([]byte, error) {
	doc := recordJSON{V: recordVersion, ID: rec.id, Status: rec.status, Background: rec.background, Body: rec.body,
		Events: rec.events, FirstSeq: rec.firstSeq}
	for i := range rec.input {
		it := &rec.input[i]
		j := itemJSON{Type: it.Type, ID: it.ID, Status: it.Status, Role: it.Role, CallID: it.CallID,
			Name: it.Name, Arguments: it.Arguments, Output: it.Output}
		for _, p := range it.Content {
			j.Content = append(j.Content, partJSON{Type: p.Type, Text: p.Text, Refusal: p.Refusal})
		}
		doc.Input = append(doc.Input, j)
	}
	for i := range rec.history {
		m := &rec.history[i]
		j := messageJSON{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID, Reasoning: m.Reasoning}
		for _, c := range m.ToolCalls {
			j.ToolCalls = append(j.ToolCalls, callJSON{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
		doc.History = append(doc.History, j)
	}
	return json.Marshal(&doc)
}

// decodeRecord reads a record encodeRecord wrote.
func decodeRecord(b []byte) (*storedResponse, error) {
	var doc recordJSON
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	if doc.V != recordVersion {
		return nil, fmt.Errorf("record version %d, this node reads %d", doc.V, recordVersion)
	}
	rec := &storedResponse{id: doc.ID, status: doc.Status, background: doc.Background, body: []byte(doc.Body),
		events: doc.Events, firstSeq: doc.FirstSeq}
	for _, j := range doc.Input {
		it := openai.ResponseItem{Type: j.Type, ID: j.ID, Status: j.Status, Role: j.Role, CallID: j.CallID,
			Name: j.Name, Arguments: j.Arguments, Output: j.Output}
		for _, p := range j.Content {
			it.Content = append(it.Content, openai.ResponsesContentPart{Type: p.Type, Text: p.Text, Refusal: p.Refusal})
		}
		rec.input = append(rec.input, it)
	}
	for _, j := range doc.History {
		m := engine.Message{Role: j.Role, Content: j.Content, Name: j.Name, ToolCallID: j.ToolCallID, Reasoning: j.Reasoning}
		for _, c := range j.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, engine.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
		rec.history = append(rec.history, m)
	}
	rec.size = recordSize(rec)
	return rec, nil
}

var redisLogOnce sync.Once

// redisLogger routes go-redis's own log lines to zap at debug level.
type redisLogger struct{ log *zap.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	if ce := l.log.Check(zap.DebugLevel, "go-redis"); ce != nil {
		ce.Write(zap.String("line", fmt.Sprintf(format, v...)))
	}
}
