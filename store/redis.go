package store

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/vajra-go/vajra/codegen/openai"
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
// (node.go) keeps the live background entries and hands every record
// operation to this store: a job on one of redisWorkers bounded queues,
// each served by its own goroutine, chosen by the response id so that one
// response's writes land in the order they were made (queued, progress,
// final). The answer comes back to the asking session as the same
// *Reply the memory store sends. A slow or unreachable Redis
// therefore delays only the store's own jobs: no mailbox worker and no
// stream waits for it. A full queue answers at once with ErrBusy.
//
// Background responses across the fleet: the node that runs one writes its
// record to Redis when it starts (queued) and about once a second with its
// output so far, so any node's GET shows it in progress; a cancel reaching
// another node is published on the prefix's "cancel" channel, which every
// node subscribes to; the node that runs it aborts it and saves the
// cancelled record and publishes its id on "ended", which the asking node
// waits for (bounded, off the store's workers) and then answers.
//
// Keys follow Redis conventions: one configurable prefix (default
// "vajra:"), then "resp:" and the response id. Each value is one JSON
// document (the record below), written with SET ... PX ttl, so an expired
// response disappears by itself, as OpenAI's do after 30 days.

// Defaults of the Redis store.
const (
	DefaultTTL           = 30 * 24 * time.Hour
	DefaultMaxEntryBytes = 16 << 20
	DefaultKeyPrefix     = "vajra:"
	redisWorkers         = 16
	redisQueue           = 256 // per worker
	// cancelWait bounds how long a node that relayed a cancel waits for
	// the node running the response to save its cancelled record.
	cancelWait = 5 * time.Second
)

var (
	// ErrUnavailable is a store the node cannot reach now.
	ErrUnavailable = errors.New("the response store is unavailable")
	// ErrBusy is a store whose queue of jobs is full.
	ErrBusy = errors.New("the response store is overloaded")
	// ErrTooLarge is a record over MaxEntryBytes.
	ErrTooLarge = errors.New("the response is too large to store")
)

// redisStore holds a store's records in Redis (the store actor
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
	ops      opStats
	// up is false while Redis is known to be unreachable: commands then
	// fail at once instead of each waiting out a dial timeout, and one
	// prober goroutine (probing) pings every probeInterval until Redis
	// answers again.
	up      atomic.Bool
	probing atomic.Bool
	// upHook, set by tests before the store is used, runs in the prober
	// right after it marked the store up.
	upHook func()
	quit   chan struct{}
	// waiters are the relayed cancels waiting for the node that runs the
	// response to save its final record, by response ID: the "ended"
	// message (subscribe) closes their channels. cancelWaits counts them,
	// bounded by maxCancelWaits.
	waitMu      sync.Mutex
	waiters     map[string][]chan struct{}
	cancelWaits atomic.Int64
	stored      atomic.Uint64
	deleted     atomic.Uint64
	failures    atomic.Uint64 // saves that failed (logged once per transition)
}

// storeJob is one queued command: a save of put (answering req, when set,
// once saved), or the read or delete req.
type storeJob struct {
	put *Record
	req *Request
}

// newRedisStore connects to the store at url. The node starts even when
// Redis is down (generation does not need it): the failure is logged, and
// store-dependent requests get 503 until Redis answers again.
func newRedisStore(system *actor.ActorSystem, cfg Config, log *zap.Logger, store *actor.PID) (*redisStore, error) {
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
		waiters:  map[string][]chan struct{}{},
	}
	if st.prefix == "" {
		st.prefix = DefaultKeyPrefix
	}
	if st.ttl <= 0 {
		st.ttl = DefaultTTL
	}
	if st.maxEntry <= 0 {
		st.maxEntry = DefaultMaxEntryBytes
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
	st.wg.Add(2)
	go st.subscribe()
	go st.renewLeases()
	return st, nil
}

// The owner lease of a running background response: every record of one
// the owner writes (queued, progress) carries lease_until, now + leaseTTL,
// and the store actor writes each live one's last record again every
// leaseRenew. A node that reads a running record whose lease lapsed takes
// its owner for dead (killed, or cut off from Redis) and answers it as
// failed, with the output saved so far (lapsed): GET, DELETE and cancel
// then work as for any ended response, from every node.
const (
	leaseTTL   = 5 * time.Second
	leaseRenew = leaseTTL / 3
)

// renewLeases ticks the store actor every leaseRenew until stop.
func (st *redisStore) renewLeases() {
	defer st.wg.Done()
	t := time.NewTicker(leaseRenew)
	defer t.Stop()
	for {
		select {
		case <-st.quit:
			return
		case <-t.C:
			st.root.Send(st.store, &leaseTick{})
		}
	}
}

// lapsed returns rec as every node answers it once its owner's lease
// lapsed: failed, its error saying so, the output saved so far kept; rec
// itself when it is not a running record with a lapsed lease.
func lapsed(rec *Record, now time.Time) *Record {
	if !rec.Background || openai.ResponseStatusFinal(rec.Status) || rec.LeaseUntil == 0 || now.UnixMilli() <= rec.LeaseUntil {
		return rec
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(rec.Body, &obj); err != nil {
		obj = map[string]json.RawMessage{"id": json.RawMessage(strconv.Quote(rec.ID)), "object": json.RawMessage(`"response"`)}
	}
	obj["status"] = json.RawMessage(`"` + openai.ResponseFailed + `"`)
	obj["error"] = json.RawMessage(`{"code":"server_error","message":"The node that ran this background response stopped before it ended; the output it saved is kept."}`)
	body, _ := json.Marshal(obj)
	out := *rec
	out.prev, out.next = nil, nil
	out.Status, out.Body, out.LeaseUntil = openai.ResponseFailed, body, 0
	out.Size = RecordSize(&out)
	return &out
}

// queue is the worker queue of response ID: the same one for every job of
// one response (FNV-1a of the id).
func (st *redisStore) queue(id string) chan *storeJob {
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * 16777619
	}
	return st.jobs[h%redisWorkers]
}

func (st *redisStore) cancelChannel() string { return st.prefix + "cancel" }

// endedChannel carries the id of every background response whose final
// record a node saved, for the relayed cancels waiting for it.
func (st *redisStore) endedChannel() string { return st.prefix + "ended" }

// subscribe relays cancels published by other nodes to the store actor,
// which hands each to the owner of a response this node runs (others
// ignore it), and wakes the cancels this node relayed when the response's
// final record is saved. go-redis's PubSub resubscribes by itself after
// Redis comes back.
func (st *redisStore) subscribe() {
	defer st.wg.Done()
	ps := st.client.Subscribe(context.Background(), st.cancelChannel(), st.endedChannel())
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
			if m.Channel == st.endedChannel() {
				st.wake(m.Payload)
				continue
			}
			st.root.Send(st.store, &Request{Op: Cancel, ID: m.Payload, ReplyTo: st.store})
		}
	}
}

// wake releases the relayed cancels waiting for response id.
func (st *redisStore) wake(id string) {
	st.waitMu.Lock()
	ws := st.waiters[id]
	delete(st.waiters, id)
	st.waitMu.Unlock()
	for _, c := range ws {
		close(c)
	}
}

// await registers a wait for response id's "ended" message; drop removes
// it (once woken, or given up).
func (st *redisStore) await(id string) (c chan struct{}, drop func()) {
	c = make(chan struct{})
	st.waitMu.Lock()
	st.waiters[id] = append(st.waiters[id], c)
	st.waitMu.Unlock()
	return c, func() {
		st.waitMu.Lock()
		defer st.waitMu.Unlock()
		ws := st.waiters[id]
		for i, w := range ws {
			if w == c {
				ws = append(ws[:i], ws[i+1:]...)
				break
			}
		}
		if len(ws) == 0 {
			delete(st.waiters, id)
		} else {
			st.waiters[id] = ws
		}
	}
}

func (st *redisStore) key(id string) string { return st.prefix + "resp:" + id }

// put queues a save of rec, answering ack (when set) once it is saved or
// failed. A save that cannot be queued is logged and counted: the
// response has been answered; only its later reads will miss it.
func (st *redisStore) put(rec *Record, ack *Request) {
	st.enqueue(&storeJob{put: rec, req: ack})
}

// ask queues a read, delete or cancel; the reply goes to req.ReplyTo, with
// reply.Err set when Redis could not answer.
func (st *redisStore) ask(req *Request) { st.enqueue(&storeJob{req: req}) }

// enqueue queues j on its response's worker, or answers it at once:
// ErrUnavailable while Redis is known down, ErrBusy when the
// worker's queue is full.
func (st *redisStore) enqueue(j *storeJob) {
	var id string
	if j.put != nil {
		id = j.put.ID
	} else {
		id = j.req.ID
	}
	if !st.up.Load() {
		st.refuse(j, resultError, ErrUnavailable)
		return
	}
	select {
	case st.queue(id) <- j:
	default:
		st.refuse(j, resultBusy, ErrBusy)
	}
}

// refuse answers a job that never reached Redis, and counts it.
func (st *redisStore) refuse(j *storeJob, res result, err error) {
	if j.put != nil {
		st.ops.record(opPut, res, 0)
		st.saveFailed(j.put.ID, err)
	} else {
		st.ops.record(j.req.Op.kind(), res, 0)
	}
	st.reply(j, Reply{Err: err})
}

// reply sends r to the job's asker, if it has one (a save may have none).
func (st *redisStore) reply(j *storeJob, r Reply) {
	if j.req == nil {
		return
	}
	j.req.Reply = r
	st.root.Send(j.req.ReplyTo, &j.req.Reply)
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
			if r, later := st.answer(j.req); !later {
				st.reply(j, r)
			}
			continue
		}
		err := st.save(j.put)
		final := j.put.Background && openai.ResponseStatusFinal(j.put.Status)
		// A background response's final record is all that is left of it:
		// retried (bounded, about 1.5 s) before it is given up.
		for try := 0; final && errors.Is(err, ErrUnavailable) && try < len(finalRetries); try++ {
			select {
			case <-time.After(finalRetries[try]):
			case <-st.quit:
			}
			err = st.save(j.put)
		}
		if err != nil {
			st.saveFailed(j.put.ID, err)
		} else if j.put.Background && openai.ResponseStatusFinal(j.put.Status) {
			st.ended(j.put.ID)
		}
		st.reply(j, Reply{Rec: j.put, Err: err})
	}
}

// finalRetries are the waits before each retry of a failed final save.
var finalRetries = [...]time.Duration{100 * time.Millisecond, 400 * time.Millisecond, time.Second}

// commandTimeout bounds one command beyond the client's own socket
// timeouts (which ParseURL's dial_timeout/read_timeout set).
const commandTimeout = 5 * time.Second

func (st *redisStore) save(rec *Record) error {
	var lease int64
	if rec.Background && !openai.ResponseStatusFinal(rec.Status) {
		lease = time.Now().Add(leaseTTL).UnixMilli()
	}
	doc, err := encodeRecordLease(rec, lease)
	if err != nil {
		return err
	}
	if int64(len(doc)) > st.maxEntry {
		st.ops.record(opPut, resultTooLarge, 0)
		return ErrTooLarge
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	start := time.Now()
	err = st.client.Set(ctx, st.key(rec.ID), doc, st.ttl).Err()
	st.done(opPut, err, start)
	if err != nil {
		return ErrUnavailable
	}
	st.stored.Add(1)
	return nil
}

// ended tells the fleet that background response id's final record is
// saved: the nodes that relayed a cancel of it answer at once. A failed
// publish is only counted: those nodes answer at their bound.
func (st *redisStore) ended(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	start := time.Now()
	st.done(opPublish, st.client.Publish(ctx, st.endedChannel(), id).Err(), start)
}

// answer serves a read, delete or cancel of a response this node does not
// run (the store actor answered its own live ones). later says the reply
// is sent by another goroutine (a relayed cancel waits off the worker).
func (st *redisStore) answer(req *Request) (_ Reply, later bool) {
	rec, err := st.load(req.Op.kind(), req.ID)
	if err != nil || rec == nil {
		return Reply{Err: err}, false
	}
	if req.Op == Cancel && rec.Background && !openai.ResponseStatusFinal(rec.Status) {
		return st.cancelElsewhere(req, rec)
	}
	return st.answerRecord(req, rec), false
}

// answerRecord is answer's reply for the record rec of req.ID.
func (st *redisStore) answerRecord(req *Request, rec *Record) Reply {
	// In progress on another node: its record is a snapshot.
	running := rec.Background && !openai.ResponseStatusFinal(rec.Status)
	switch {
	case req.Op == Delete && running:
		return Reply{Rec: rec, Live: true}
	case req.Op == Delete:
		ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
		defer cancel()
		start := time.Now()
		n, err := st.client.Del(ctx, st.key(req.ID)).Result()
		st.done(opDelete, err, start)
		if err != nil {
			return Reply{Err: ErrUnavailable}
		}
		if n == 0 {
			return Reply{} // deleted meanwhile
		}
		st.deleted.Add(1)
		return Reply{Rec: rec}
	case req.Op == Get && req.Stream != nil && running:
		return Reply{Elsewhere: true} // its events are in that node's memory only
	case req.Op == Lookup:
		return Reply{Rec: rec, Live: running}
	}
	return Reply{Rec: rec}
}

// load reads one record; nil without error when there is none.
func (st *redisStore) load(op opKind, id string) (*Record, error) {
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
		return nil, ErrUnavailable
	}
	rec, err := decodeRecord(doc)
	if err != nil {
		st.log.Error("a stored response does not decode; treated as absent", zap.String("id", id), zap.Error(err))
		return nil, nil
	}
	return lapsed(rec, time.Now()), nil
}

// cancelElsewhere relays a cancel of a background response another node
// runs, then waits (bounded by cancelWait) for that node's "ended" message,
// on a goroutine of its own so that the worker goes on with its queue,
// and answers with the record then in Redis: the cancelled (or otherwise
// final) one, or, when none came in time (the node is gone, or slow), the
// latest, still in progress, so the client may cancel again or poll. At
// most maxCancelWaits wait at once; past that the cancel is relayed and
// answered at once with the record as it is.
func (st *redisStore) cancelElsewhere(req *Request, rec *Record) (Reply, bool) {
	woken, drop := st.await(rec.ID) // before the publish: the answer may be quick
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	start := time.Now()
	err := st.client.Publish(ctx, st.cancelChannel(), rec.ID).Err()
	cancel()
	st.done(opPublish, err, start)
	if err != nil {
		drop()
		return Reply{Err: ErrUnavailable}, false
	}
	if st.cancelWaits.Add(1) > maxCancelWaits {
		st.cancelWaits.Add(-1)
		drop()
		return Reply{Rec: rec}, false
	}
	go func() {
		defer st.cancelWaits.Add(-1)
		defer drop()
		t := time.NewTimer(cancelWait)
		defer t.Stop()
		select {
		case <-woken:
		case <-t.C:
		case <-st.quit:
			st.reply(&storeJob{req: req}, Reply{Rec: rec})
			return
		}
		r, err := st.load(opGet, rec.ID)
		switch {
		case err != nil:
			st.reply(&storeJob{req: req}, Reply{Err: err})
		case r == nil:
			st.reply(&storeJob{req: req}, Reply{}) // deleted meanwhile
		default:
			st.reply(&storeJob{req: req}, st.answerRecord(req, r))
		}
	}()
	return Reply{}, true
}

// maxCancelWaits bounds the relayed cancels waiting at once.
const maxCancelWaits = 1024

// done records a command's outcome and notes whether Redis is reachable,
// logging each change once rather than once per failed command.
func (st *redisStore) done(op opKind, err error, start time.Time) {
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
func (st *redisStore) Stats() Stats {
	// (Live is the store actor's.)
	return Stats{Stored: st.stored.Load(), Deleted: st.deleted.Load(), SaveFailures: st.failures.Load(), Ops: st.ops.snapshot()}
}

var redisLogOnce sync.Once

// redisLogger routes go-redis's own log lines to zap at debug level.
type redisLogger struct{ log *zap.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	if ce := l.log.Check(zap.DebugLevel, "go-redis"); ce != nil {
		ce.Write(zap.String("line", fmt.Sprintf(format, v...)))
	}
}
