// Package netio is Vajra's network layer: a gnet event-loop server that
// parses HTTP/1.1 with httpparse, checks auth, routes, answers cheap routes
// on the loop, and hands generation requests to session actors. Bytes that
// sessions produce come back through each loop's outbox (see outbox.go).
//
// Concurrency: everything named Loop-only runs on the connection's gnet
// event loop and must not block. The Server's exported methods are safe for
// concurrent use.
package netio

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"

	"github.com/vajra-go/vajra/actors"
	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/httpparse"
	"github.com/vajra-go/vajra/internal/spareproc"
	"github.com/vajra-go/vajra/metrics"
)

// Options configure a Server. Zero values take the defaults named below.
type Options struct {
	// Addr is host:port to listen on. Port 0 picks a free port.
	Addr string
	// Listener, when set, is served instead of listening on Addr: a socket
	// already bound and listening, such as one inherited from the process
	// that started Vajra (vLLM's launcher hands its front end the HTTP
	// port's socket). The Server owns it from New on and closes it in Drain
	// and Stop.
	Listener *net.TCPListener
	// Loops is the number of event loops; 0 means one per P
	// (runtime.GOMAXPROCS, read at Start).
	Loops int
	// KeepGOMAXPROCS leaves GOMAXPROCS alone. By default Start raises it
	// to Loops+1 when it is lower, and takes the spare P back while the CPU
	// is saturated: see internal/spareproc.
	KeepGOMAXPROCS bool
	// Limits bound what the parser accepts; zero means httpparse defaults.
	Limits httpparse.Limits
	// APIKeys, when any, are required on every route but the public ones.
	APIKeys []string
	// Models are the served model names; the first is the default.
	Models []string
	// MaxModelLen is reported in the model list.
	MaxModelLen int
	// IOUring picks the send path: IOUringAuto (the default, also ""),
	// IOUringOn or IOUringOff (sendbatch.go).
	IOUring string
	// MaxOutboundBytes is the slow-consumer limit: a connection whose
	// unsent output exceeds it is closed and its session aborted.
	// Default DefaultMaxOutboundBytes.
	MaxOutboundBytes int
	// MaxPipelinedBytes is how much pipelined input a connection may hold
	// while its exchange is in flight before it is no longer read (TCP
	// flow control then holds the client back). Default
	// DefaultMaxPipelinedBytes; see backpressure.go.
	MaxPipelinedBytes int
	// Sessions runs generation requests.
	Sessions *actors.Sessions
	// Engine is asked for health and load.
	Engine engine.Engine
	Logger *zap.Logger

	// Metrics, when set, counts responses per route and status and the
	// refusals, and is rendered by GET /metrics.
	Metrics *metrics.Metrics
	// ProtectMetrics requires an API key on /metrics too.
	ProtectMetrics bool
	// Version is reported by GET /version.
	Version string

	// MaxConcurrentRequests caps the generation requests in flight; 0
	// means no cap (the engine's own queue bound still applies).
	MaxConcurrentRequests int
	// MaxQueuedRequests is how many generation requests beyond
	// MaxConcurrentRequests wait for a slot (FIFO) before the next is
	// refused with 429 (529 on Anthropic routes). 0 means none wait.
	MaxQueuedRequests int
	// MaxQueueWait is how long a request may wait in that queue: past it,
	// it is refused as a full queue refuses (429/529 with Retry-After),
	// at the next once-a-second sweep. 0 means no deadline;
	// DefaultMaxQueueWait is what `vajra serve` sets.
	MaxQueueWait time.Duration
	// RetryAfter is what a refused request is told to wait (Retry-After,
	// retry-after-ms). Default DefaultRetryAfter.
	RetryAfter time.Duration
	// MaxConnections caps open connections: one beyond it gets a canned
	// 503 and is closed at once. 0 means DefaultMaxConnections().
	MaxConnections int
	// IdleTimeout closes a connection idle between requests for longer;
	// RequestReadTimeout answers 408 and closes one whose request is still
	// incomplete after it (see timeouts.go). 0 disables each.
	IdleTimeout        time.Duration
	RequestReadTimeout time.Duration

	// StreamKeepalive is how long a stream may send nothing before the
	// loop sends a keep-alive: an SSE comment (": keep-alive"), an
	// Anthropic ping event, a WebSocket ping frame (keepalive.go). A
	// request parked in the admission queue this long gets its session
	// before its permit, so that its stream's head and keep-alives can go
	// out after validation (admission.go). 0 turns both off;
	// DefaultStreamKeepalive is what `vajra serve` sets.
	StreamKeepalive time.Duration

	// WebSockets starts the sessions of upgraded WebSocket connections
	// (GET /v1/realtime, GET /v1/responses with Upgrade: websocket).
	// Default: Sessions.
	WebSockets WSStarter
	// MaxWSMessageBytes bounds one client WebSocket message after
	// reassembly; a bigger one closes its connection with 1009.
	// Default DefaultMaxWSMessageBytes.
	MaxWSMessageBytes int

	// AllowedOrigins enables CORS for these origins ("*": any).
	AllowedOrigins []string
	// Control, when set, takes vLLM's engine control endpoints (POST
	// /reset_prefix_cache, /sleep, /wake_up, GET /is_sleeping:
	// control_routes.go); 404 without it.
	Control EngineControl
	// Workers, when set, renders GET /workers (the remote engine's
	// workers and their state, as JSON); called off the loop.
	Workers func() []byte
	// AccessLog, when set, gets one line per request (sample it: see
	// cmd/vajra). Never per token.
	AccessLog *zap.Logger
}

// DefaultMaxOutboundBytes lets a client fall about 4 MiB behind before it is
// cut off: at ~200 bytes a frame that is ~20,000 tokens of slack, far more
// than a reader that keeps up ever needs, and a bound on memory per
// connection for one that does not.
const DefaultMaxOutboundBytes = 4 << 20

// Server is a running Vajra network layer.
type Server struct {
	gnet.BuiltinEventEngine

	opts       Options
	log        *zap.Logger
	sessions   *actors.Sessions
	webSockets WSStarter
	keys       keySet
	routes     routeTable

	maxBuffered  int // inbound bytes one connection may hold at all
	maxPipelined int // inbound bytes a busy connection holds before it is paused
	readPauses   atomic.Uint64

	// Bodies of the model routes, rendered once.
	modelsBody  []byte
	modelBodies [][]byte
	propsBody   []byte // GET /props (props.go); nil without an engine.Describer

	eng  gnet.Engine
	addr net.Addr
	// Accepting (accept.go): Vajra's listener, gnet's private socket,
	// closed when gnet's loops are up, and the hand-offs in progress.
	ln          *net.TCPListener
	gnetSock    string
	loopsUp     chan struct{}
	loopsUpOnce sync.Once
	enrolls     chan (<-chan gnet.RegisteredResult)
	// acceptHook, set by tests before Start, replaces the listener's
	// AcceptTCP in acceptLoop.
	acceptHook func() (*net.TCPConn, error)
	loops      sync.Map // gnet.EventLoop → *loop
	started    chan error
	done       chan error
	stopped    chan struct{}   // closed when gnet.Run returned
	ctlDone    <-chan struct{} // closed when the spareproc controller ended; nil if none ran
	stopping   atomic.Bool     // Stop was called
	runErr     error           // why gnet.Run returned; read after stopped
	draining   atomic.Bool
	bellMu     sync.Mutex
	bells      []int // writer ends of the loops' doorbells
	// Send path (sendbatch.go): useRing is settled at Start; ringLoops
	// counts the loops that send through io_uring: all of them from Start
	// when useRing, less each whose ring could not be set up or failed.
	useRing   bool
	ringLoops atomic.Int32

	// Counters, read by metrics.
	openConns     atomic.Int64
	parseErrors   atomic.Uint64
	slowConsumers atomic.Uint64
	bytesWritten  atomic.Uint64
	clientAborts  atomic.Uint64

	// WebSocket counters (ws_conn.go).
	wsOpen           atomic.Int64
	wsProtocolErrors atomic.Uint64
	wsCloses         wsCloseCounts

	// inflight counts exchanges in flight (sessions, off-loop routes,
	// parked requests): a drain waits for it to reach zero.
	inflight atomic.Int64
	idle     chan struct{} // signalled when inflight drops to 0

	// The nudge timers (nudge.go): reserve is the number of Ps this
	// server's loops and its engine's threads (in C calls) hold, counted
	// in reservedProcs while it runs; nudges counts the timers' firings,
	// timers their descriptors (under bellMu).
	reserve int
	nudges  atomic.Uint64
	timers  []int

	adm          *admission // nil: no cap on concurrent requests
	maxConns     int64
	retryHeaders []byte // Retry-After and retry-after-ms lines of a 429/529
	cors         *corsPolicy
	access       *zap.Logger
	offloop      chan struct{} // bounds off-loop work running at once
	versionBody  []byte
	listenerOff  atomic.Bool // the listener was closed by Drain

	routeMetrics map[*route]*metrics.Route
	rejected     struct {
		overloaded, draining, maxConns, unauthorized, timeout, queueTimeout, descriptors *metrics.Counter
	}
	idleClosed atomic.Uint64 // connections closed by IdleTimeout
	keepalives atomic.Uint64 // keep-alives written (keepalive.go)
	keepSweeps uint32        // sweeps of silence before a keep-alive; 0: off
}

// New builds a Server; Start runs it.
func New(opts Options) (*Server, error) {
	if opts.Sessions == nil {
		return nil, errors.New("netio: Options.Sessions is required")
	}
	if len(opts.Models) == 0 {
		return nil, errors.New("netio: at least one served model name is required")
	}
	switch opts.IOUring {
	case "":
		opts.IOUring = IOUringAuto
	case IOUringAuto, IOUringOn, IOUringOff:
	default:
		return nil, fmt.Errorf("netio: io-uring %q: want auto, on or off", opts.IOUring)
	}
	if opts.Limits == (httpparse.Limits{}) {
		opts.Limits = httpparse.DefaultLimits()
	}
	if opts.MaxOutboundBytes <= 0 {
		opts.MaxOutboundBytes = DefaultMaxOutboundBytes
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.MaxPipelinedBytes <= 0 {
		opts.MaxPipelinedBytes = DefaultMaxPipelinedBytes
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = DefaultRetryAfter
	}
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = DefaultMaxConnections()
	}
	if opts.WebSockets == nil {
		opts.WebSockets = opts.Sessions
	}
	if opts.MaxWSMessageBytes <= 0 {
		opts.MaxWSMessageBytes = DefaultMaxWSMessageBytes
	}
	s := &Server{
		opts:       opts,
		log:        opts.Logger,
		sessions:   opts.Sessions,
		webSockets: opts.WebSockets,
		keys:       newKeySet(opts.APIKeys),
		started:    make(chan error, 1),
		done:       make(chan error, 1),
		stopped:    make(chan struct{}),
		loopsUp:    make(chan struct{}),
		idle:       make(chan struct{}, 1),
		maxConns:   int64(opts.MaxConnections),
		access:     opts.AccessLog,
		offloop:    make(chan struct{}, 2*runtime.GOMAXPROCS(0)),
	}
	if opts.StreamKeepalive > 0 {
		s.keepSweeps = keepaliveSweeps(opts.StreamKeepalive)
	}
	s.maxBuffered = opts.Limits.MaxHeaderBytes + int(opts.Limits.MaxBody) + 4096
	s.maxPipelined = opts.MaxPipelinedBytes
	s.routes = newRouteTable()
	s.renderModels(time.Now().Unix())
	s.setupFleet()
	return s, nil
}

// renderModels renders the model list and each model's body once: they
// only change with the configuration.
func (s *Server) renderModels(created int64) {
	models := make([]openai.Model, len(s.opts.Models))
	for i, id := range s.opts.Models {
		models[i] = openai.Model{ID: id, Created: created, OwnedBy: "vajra", MaxModelLen: s.opts.MaxModelLen, Root: id}
		describeModel(&models[i], s.opts.Engine) // props.go
		s.modelBodies = append(s.modelBodies, openai.AppendModel(nil, &models[i]))
	}
	s.propsBody = renderProps(s.opts.Engine, s.opts.Models) // props.go
	s.modelsBody = openai.AppendModelList(nil, models)
}

// Start listens and serves in the background. It returns once the listener
// is bound (or failed). Safe for concurrent use, once.
func (s *Server) Start() error {
	if err := s.chooseSendPath(); err != nil {
		return err
	}
	loops := s.opts.Loops
	if loops <= 0 {
		loops = runtime.GOMAXPROCS(0)
	}
	if s.useRing {
		s.ringLoops.Store(int32(loops)) // a loop's ring is set up with its first connection
	}
	held := 0
	if h, ok := engine.As[engine.ProcHolder](s.opts.Engine); ok {
		held = h.HeldProcs()
	}
	if !s.opts.KeepGOMAXPROCS {
		s.ctlDone = spareproc.Start(s.log, loops, held, s.stopped)
	}
	s.reserve = loops + held
	// The sweep always runs: besides the timeouts and the stream
	// keep-alives it ends WebSocket close handshakes (ws_conn.go).
	go s.sweeper()
	gnetAddr, err := s.listen()
	if err != nil {
		return err
	}
	reservedProcs.Add(int32(s.reserve))
	go func() {
		defer reservedProcs.Add(-int32(s.reserve))
		opts := []gnet.Option{
			gnet.WithNumEventLoop(loops),
			gnet.WithReusePort(false),
			// As net.Listen does on Unix: a restarted server binds its port
			// even while the old one's closed connections sit in TIME_WAIT.
			gnet.WithReuseAddr(true),
			// OnTick's first call says the loops are up.
			gnet.WithTicker(true),
			gnet.WithLogger(s.log.Sugar()),
		}
		err := gnet.Run(s, gnetAddr, opts...)
		select {
		case s.started <- err: // failed before booting
		default:
		}
		if err == nil && !s.stopping.Load() {
			// gnet ended on its own (its accept path, which ends the
			// engine on EMFILE, never runs: see accept.go).
			err = errors.New("netio: the gnet engine stopped unexpectedly (see the log)")
		}
		s.runErr = err
		_ = s.closeListener()
		s.closeRings()
		close(s.stopped)
		s.done <- err
	}()
	if err := <-s.started; err != nil {
		return err
	}
	select {
	case <-s.loopsUp:
	case <-s.stopped:
		return s.runErr
	}
	s.startAccepting()
	return nil
}

// Addr is the bound listen address (after Start).
func (s *Server) Addr() net.Addr { return s.addr }

// Stop closes the listener and every connection. Sessions of closed
// connections are aborted. Safe for concurrent use.
func (s *Server) Stop(ctx context.Context) error {
	s.stopping.Store(true)
	_ = s.closeListener()
	select {
	case <-s.stopped:
		s.waitControl() // already down (Done fired)
		return nil
	default:
	}
	if err := s.eng.Stop(ctx); err != nil {
		return fmt.Errorf("netio: stop: %w", err)
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.waitControl()
	return nil
}

// waitControl waits for the GOMAXPROCS controller, if this server ran one,
// to end (it ends when the engine stopped): a server started after Stop
// then finds GOMAXPROCS free to manage.
func (s *Server) waitControl() {
	if s.ctlDone != nil {
		<-s.ctlDone
	}
}

// Release frees what outlives the gnet engine (the doorbells' writer ends,
// the nudge timers). Call after Stop, once no session can send any more.
func (s *Server) Release() { s.closeBells() }

// Done is closed when the network engine stopped, by Stop or on its own
// (gnet ending on an error of its own; accept errors are not among them,
// see accept.go); Err then says why. Safe for concurrent use.
func (s *Server) Done() <-chan struct{} { return s.stopped }

// Err is nil after a Stop, the reason after gnet stopped on its own. Valid
// once Done is closed.
func (s *Server) Err() error {
	if s.stopping.Load() {
		return nil
	}
	return s.runErr
}

// SetDraining makes /health answer 503 so load balancers stop sending.
func (s *Server) SetDraining(on bool) { s.draining.Store(on) }

// OnBoot records the engine. Called by gnet.
func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	s.eng = eng
	s.started <- nil
	return gnet.None
}

// OnOpen sets up a connection. Loop-only.
func (s *Server) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	switch x := gc.Context().(type) {
	case *doorbell:
		x.opened()
		return nil, gnet.None
	case *nudgeTimer:
		x.opened()
		return nil, gnet.None
	}
	// The acceptor counted the connection and refused those over
	// --max-connections (accept.go).
	c := &conn{
		gc:   gc,
		loop: s.loopOf(gc.EventLoop()),
		srv:  s,
	}
	c.loop.trackConn(c)
	gc.SetContext(c)
	return nil, gnet.None
}

// OnTraffic serves what arrived. Loop-only.
func (s *Server) OnTraffic(gc gnet.Conn) gnet.Action {
	c, ok := gc.Context().(*conn)
	if !ok {
		switch x := gc.Context().(type) {
		case *doorbell:
			x.answer(gc)
		case *nudgeTimer:
			x.fired(gc)
		}
		return gnet.None
	}
	if c.ws != nil {
		c.ws.traffic()
		return gnet.None
	}
	if c.busy {
		// A session owns the exchange; later pipelined requests wait in
		// gnet's buffer, and past MaxPipelinedBytes the connection is no
		// longer read (backpressure.go). maxBuffered is the last resort.
		if gc.InboundBuffered() > s.maxBuffered {
			return gnet.Close
		}
		c.backpressure()
		return gnet.None
	}
	if c.serve() {
		return gnet.Close
	}
	return gnet.None
}

// OnClose tells the session, if any, that its client is gone. Loop-only.
func (s *Server) OnClose(gc gnet.Conn, _ error) gnet.Action {
	switch c := gc.Context().(type) {
	case *conn:
		s.openConns.Add(-1)
		c.loop.untrackConn(c)
		c.onClose()
	case *doorbell:
		c.closed()
	case *nudgeTimer:
		c.closed()
	}
	return gnet.None
}

// loopOf returns Vajra's state for a gnet event loop, creating it on first
// use. Called once per connection, not per request.
func (s *Server) loopOf(el gnet.EventLoop) *loop {
	if l, ok := s.loops.Load(el); ok {
		return l.(*loop)
	}
	nl := &loop{el: el, srv: s, now: time.Now(), epfd: epollOf(el), timer: -1}
	nl.bell.Store(-1)
	// Only el's own goroutine calls loopOf for el: nl is stored.
	nl.batch = s.newSendBatch(nl)
	l, loaded := s.loops.LoadOrStore(el, nl)
	if !loaded {
		go s.installDoorbell(nl)
		go s.installNudgeTimer(nl)
	}
	return l.(*loop)
}

// closeRings releases the loops' io_uring rings once gnet stopped them.
func (s *Server) closeRings() {
	s.loops.Range(func(_, v any) bool {
		l := v.(*loop)
		if l.batch != nil {
			l.batch.close()
			l.batch = nil
		}
		return true
	})
}

// Wakes returns how many doorbell rings the loops answered (tests, metrics).
func (s *Server) Wakes() uint64 {
	var n uint64
	s.loops.Range(func(_, v any) bool { n += v.(*loop).wakes.Load(); return true })
	return n
}

// OpenConnections is the number of open client connections.
func (s *Server) OpenConnections() int64 { return s.openConns.Load() }

var ridCounter atomic.Uint64

var ridPrefix = strconv.FormatInt(time.Now().UnixNano()&0xffffffff, 36)

// requestID returns the request's sane X-Request-Id, or a new one.
func requestID(req *httpparse.Request) string {
	var buf [48]byte
	return string(appendRequestID(buf[:0], req))
}

// appendRequestID appends the request's sane X-Request-Id, or a new one
// (never empty).
func appendRequestID(dst []byte, req *httpparse.Request) []byte {
	if v := req.Header("x-request-id"); saneRequestID(v) {
		return append(dst, v...)
	}
	dst = append(dst, ridPrefix...)
	dst = append(dst, '-')
	return strconv.AppendUint(dst, ridCounter.Add(1), 36)
}

// saneRequestID accepts ids of 1..128 visible ASCII characters without
// quotes or backslashes, so an id is safe in logs and JSON.
func saneRequestID(v []byte) bool {
	if len(v) == 0 || len(v) > 128 {
		return false
	}
	for _, b := range v {
		if b <= ' ' || b >= 0x7f || b == '"' || b == '\\' {
			return false
		}
	}
	return true
}
