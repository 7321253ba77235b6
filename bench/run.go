package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/vajra-go/vajra/internal/sse"
)

// rssSampleEvery is how often the server's RSS is sampled for its peak.
const rssSampleEvery = 200 * time.Millisecond

// runner is one run of one Config.
type runner struct {
	cfg Config
	t   target
	clk clock
	rec *recorder
	req []byte // the raw HTTP request, shared read-only by all workers
	// hdr and prompt build a chained request (-chain) per worker.
	hdr    [][2]string
	prompt string
	// -shared-prefix: the shared prefixes, and the requests built so far
	// (the next one's group).
	prefixes []string
	shared   atomic.Uint64
	rtItem   []byte // realtime: conversation.item.create
	rtCreate []byte // realtime: response.create
	wsURL    string
	wsOpts   *websocket.DialOptions

	promptN        atomic.Int64 // -unique-prompts: the last prompt's number (from a random base)
	measuredIssued atomic.Int64
	pool           sync.Mutex
	idle           []*worker // open loop: idle workers with their connections
}

// worker owns one connection (HTTP or WebSocket) and the per-request state.
type worker struct {
	r   *runner
	hc  *httpConn
	ws  *websocket.Conn
	s   stream
	sse sse.Reader
	msg []byte // realtime message buffer, reused
	// -chain: the id of this stream's previous response, and how many
	// requests of the current conversation have run.
	prevID  string
	chained int
	// -shared-prefix: the stream's requests so far.
	sent int
}

// Run runs one benchmark and returns its result. It refuses non-loopback
// targets before sending anything. The run is bounded by cfg.MaxTime and
// by ctx; requests cut short by either count as aborted, not as errors.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	t, err := resolveTarget(cfg.URL, cfg.BasePath)
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, t: t}
	// -unique-prompts numbers from a random nine-digit base, so that the
	// next run against the same server does not send the same prompts
	// (which its prefix cache would then hold); the width stays nine
	// digits for the first 100 million requests.
	r.promptN.Store(100_000_000 + rand.Int64N(800_000_000))
	prompt := BuildPrompt(cfg.PromptTokens)
	var hdr [][2]string
	if cfg.APIKey != "" {
		hdr = append(hdr, [2]string{"Authorization", "Bearer " + cfg.APIKey})
	}
	if cfg.Dialect == DialectRealtime {
		r.rtItem, r.rtCreate = realtimeMessages(prompt, cfg.MaxTokens, cfg.RealtimeBeta)
		r.wsURL = "ws://" + t.host + t.basePath + cfg.Dialect.path() + "?model=" + urlQueryEscape(cfg.Model)
		h := http.Header{}
		for _, kv := range hdr {
			h.Set(kv[0], kv[1])
		}
		if cfg.RealtimeBeta {
			h.Set("OpenAI-Beta", "realtime=v1")
		}
		addr := t.addr
		tr := &http.Transport{
			// Always dial the checked loopback address, never a resolved name.
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				d := net.Dialer{Timeout: cfg.DialTimeout}
				return d.DialContext(ctx, network, addr)
			},
			MaxIdleConnsPerHost: 0,
			DisableKeepAlives:   true,
		}
		r.wsOpts = &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}, HTTPHeader: h}
	} else {
		if cfg.Dialect == DialectMessages {
			hdr = append(hdr, [2]string{"anthropic-version", "2023-06-01"})
			if cfg.APIKey != "" {
				hdr = append(hdr, [2]string{"x-api-key", cfg.APIKey})
			}
		}
		accept := "application/json"
		if cfg.Stream {
			accept = "text/event-stream"
		}
		hdr = append(hdr, [2]string{"Accept", accept})
		body := requestFor(&cfg, prompt, cfg.Store, "")
		r.req = buildRequest("POST", t.host, t.basePath+cfg.Dialect.path(), hdr, body)
		r.hdr, r.prompt = hdr, prompt
		for g := 0; g < cfg.PrefixGroups && cfg.SharedPrefixTokens > 0; g++ {
			r.prefixes = append(r.prefixes, fmt.Sprintf("Shared context %d. %s", g, BuildPrompt(cfg.SharedPrefixTokens)))
		}
	}
	return r.run(ctx)
}

func urlQueryEscape(s string) string {
	const hex = "0123456789ABCDEF"
	var b []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b = append(b, c)
		} else {
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	return string(b)
}

func (r *runner) run(parent context.Context) (*Result, error) {
	cfg := r.cfg
	ctx, cancel := context.WithTimeout(parent, cfg.MaxTime)
	defer cancel()
	warmEnd := int64(cfg.Warmup)
	stopAt := int64(noStop)
	if cfg.Duration > 0 {
		stopAt = warmEnd + int64(cfg.Duration)
	}
	r.rec = newRecorder(warmEnd, stopAt, cfg.MaxTime)

	var srv serverWatch
	var self serverWatch
	if cfg.ServerPID > 0 {
		if _, err := ReadProc(cfg.ServerPID); err != nil {
			return nil, err // fail before sending anything
		}
		srv.pid = cfg.ServerPID
	}
	if cfg.ServerAllocs {
		srv.allocs.url = "http://" + r.t.addr + "/metrics"
		if err := srv.allocs.calibrate(ctx); err != nil {
			return nil, fmt.Errorf("bench: -server-allocs: %w", err)
		}
	}
	if cfg.EngineCPU {
		srv.engine.url = "http://" + r.t.addr + "/metrics"
		if err := srv.engine.check(ctx); err != nil {
			return nil, fmt.Errorf("bench: -engine-cpu: %w", err)
		}
	}
	if err := srv.sys.start(cfg.Syscalls, srv.pid); err != nil {
		return nil, err
	}
	defer srv.sys.stop() // a no-op once result has read the counts
	self.pid = selfPID()
	// The run's clock starts once the watchers are ready (perf takes up
	// to a second to open its events), so that the warm-up and the
	// streams' staggered starts are not eaten by their setup.
	r.clk.epoch = time.Now()

	bg, stopBG := context.WithCancel(ctx)
	var bgWG sync.WaitGroup
	defer func() { stopBG(); bgWG.Wait() }()
	if srv.pid > 0 {
		bgWG.Add(1)
		go func() { defer bgWG.Done(); srv.sampleRSS(bg) }()
	}
	if cfg.Progress != nil {
		bgWG.Add(1)
		go func() { defer bgWG.Done(); r.progress(bg) }()
	}
	// Phase marks: CPU "before" at the warm-up's end, "after" at stopAt.
	// With no warm-up, "before" is taken now, before any request.
	if warmEnd == 0 {
		srv.mark(0)
		self.mark(0)
	}
	phaseDone := make(chan struct{})
	go func() {
		defer close(phaseDone)
		if warmEnd > 0 {
			if !sleepUntil(ctx, r.clk.epoch.Add(time.Duration(warmEnd))) {
				return
			}
			srv.mark(0)
			self.mark(0)
		}
		if stopAt != noStop && sleepUntil(ctx, r.clk.epoch.Add(time.Duration(stopAt))) {
			srv.mark(1)
			self.mark(1)
			if cfg.CutAtStop {
				cancel() // requests still running are aborted, not drained
			}
		}
	}()

	var wg sync.WaitGroup
	if cfg.Rate > 0 {
		r.openLoop(ctx, &wg)
	} else {
		for i := 0; i < cfg.Concurrency; i++ {
			wg.Add(1)
			delay := time.Duration(0)
			if cfg.Ramp > 0 {
				delay = time.Duration(int64(cfg.Ramp) * int64(i) / int64(cfg.Concurrency))
			}
			go func() {
				defer wg.Done()
				w := r.newWorker()
				defer w.close()
				if delay > 0 && !sleepUntil(ctx, r.clk.epoch.Add(delay)) {
					return
				}
				for {
					start := r.clk.now()
					ok, measured := r.admit(ctx, start)
					if !ok {
						return
					}
					if w.do(ctx, start, measured) {
						// The server refuses connections: back off briefly
						// rather than spin on connect errors.
						sleepUntil(ctx, time.Now().Add(dialBackoff))
					}
				}
			}()
		}
	}
	wg.Wait()
	end := r.clk.now()
	if stopAt == noStop {
		// Count mode: the window closes when the last measured request ends.
		last := r.rec.lastDone.Load()
		if last < warmEnd {
			last = end
		}
		r.rec.stopAt.Store(last)
	}
	cancel()
	<-phaseDone // no mark runs concurrently from here on
	stopBG()
	bgWG.Wait()
	for _, w := range []*serverWatch{&srv, &self} {
		if !w.marked(0) {
			w.mark(0) // the run ended before the warm-up did
		}
		if !w.marked(1) {
			w.mark(1) // count mode, or the run was cut short
		}
	}
	res := r.result(&srv, &self, end)
	if parent.Err() != nil {
		return res, parent.Err()
	}
	return res, nil
}

// admit decides whether a request starting at now may run and whether it is
// measured. Safe for concurrent use.
func (r *runner) admit(ctx context.Context, now int64) (ok, measured bool) {
	if ctx.Err() != nil || now >= r.rec.stopAt.Load() {
		return false, false
	}
	if now < r.rec.warmEnd {
		return true, false
	}
	if n := r.cfg.Requests; n > 0 && r.measuredIssued.Add(1) > int64(n) {
		return false, false
	}
	return true, true
}

// openLoop dispatches Poisson arrivals at cfg.Rate until admit refuses.
// Latency is measured from each arrival's scheduled time, so a slow server
// cannot hide queueing delay (no coordinated omission).
func (r *runner) openLoop(ctx context.Context, wg *sync.WaitGroup) {
	rng := rand.New(rand.NewPCG(r.cfg.Seed, 0x5eed))
	var inflight atomic.Int64
	next := int64(0)
	for {
		next += int64(rng.ExpFloat64() / r.cfg.Rate * float64(time.Second))
		if !sleepUntil(ctx, r.clk.epoch.Add(time.Duration(next))) {
			return
		}
		ok, measured := r.admit(ctx, next)
		if !ok {
			return
		}
		if inflight.Load() >= int64(r.cfg.MaxInflight) {
			r.rec.dropped.Add(1)
			continue
		}
		inflight.Add(1)
		wg.Add(1)
		go func(start int64) {
			defer wg.Done()
			defer inflight.Add(-1)
			w := r.getWorker()
			w.do(ctx, start, measured)
			r.putWorker(w)
		}(next)
	}
}

func (r *runner) newWorker() *worker {
	w := &worker{r: r}
	w.s.d, w.s.every = r.cfg.Dialect, r.cfg.EveryChunk
	w.s.clk = &r.clk
	w.s.rec = r.rec
	return w
}

func (r *runner) getWorker() *worker {
	r.pool.Lock()
	if n := len(r.idle); n > 0 {
		w := r.idle[n-1]
		r.idle = r.idle[:n-1]
		r.pool.Unlock()
		return w
	}
	r.pool.Unlock()
	return r.newWorker()
}

func (r *runner) putWorker(w *worker) {
	r.pool.Lock()
	defer r.pool.Unlock()
	if len(r.idle) < r.cfg.MaxInflight {
		r.idle = append(r.idle, w)
		return
	}
	w.close()
}

func (w *worker) close() {
	if w.hc != nil {
		w.hc.close()
		w.hc = nil
	}
	if w.ws != nil {
		_ = w.ws.CloseNow()
		w.ws = nil
	}
}

// dialBackoff is how long a closed-loop stream waits after a failed connect.
const dialBackoff = 10 * time.Millisecond

// do runs one request and records it. It reports whether the request failed
// to connect.
func (w *worker) do(ctx context.Context, start int64, measured bool) (dialFailed bool) {
	r := w.r
	r.rec.active.Add(1)
	defer r.rec.active.Add(-1)
	w.s.reset(start, measured)
	deadline := r.clk.epoch.Add(time.Duration(start) + r.cfg.RequestTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	var err error
	if r.cfg.Dialect == DialectRealtime {
		err = w.doRealtime(ctx, deadline)
	} else {
		err = w.doHTTP(ctx, deadline)
	}
	if err != nil && ctx.Err() != nil {
		r.rec.aborted.Add(1) // cut by the run's end, not the server's fault
		w.close()
		return false
	}
	r.rec.finish(&w.s, err)
	return errors.Is(err, ErrDial)
}

func (w *worker) doHTTP(ctx context.Context, deadline time.Time) error {
	r := w.r
	for attempt := 0; ; attempt++ {
		if w.hc == nil {
			hc, err := dialHTTP(ctx, r.t.addr, r.cfg.DialTimeout)
			if err != nil {
				return err
			}
			w.hc = hc
		}
		reused := w.hc.used
		// The connection is captured: the worker may have dropped it (nil)
		// by the time a cancelled ctx runs this (-no-drain cuts every
		// request at once).
		hc := w.hc
		stop := context.AfterFunc(ctx, func() { _ = hc.nc.SetDeadline(time.Unix(1, 0)) })
		reuse, err := doHTTP(w.hc, w.request(), &w.s, &w.sse, deadline, r.cfg.Stream)
		w.chain(err)
		stop()
		if !reuse || err != nil && !errors.Is(err, ErrInStream) && !errors.Is(err, ErrStatus) {
			w.hc.close()
			w.hc = nil
		}
		// A keep-alive connection the server closed while idle fails before
		// any response byte: retry once on a fresh one (as net/http does).
		if err != nil && reused && attempt == 0 && w.s.head == 0 && (errors.Is(err, ErrTruncated) || errors.Is(err, ErrDial)) {
			if w.hc != nil {
				w.hc.close()
				w.hc = nil
			}
			continue
		}
		return err
	}
}

// maxRealtimeMessage bounds one WebSocket message.
const maxRealtimeMessage = sse.MaxEventBytes

func (w *worker) doRealtime(ctx context.Context, deadline time.Time) error {
	r := w.r
	rctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if w.ws == nil {
		c, resp, err := websocket.Dial(rctx, r.wsURL, r.wsOpts)
		if err != nil {
			if resp != nil && resp.StatusCode/100 != 2 && resp.StatusCode != 101 {
				return newReqError(ErrStatus, "status %d on WebSocket upgrade", resp.StatusCode)
			}
			return wsErr(rctx, ErrDial, "%v", err)
		}
		c.SetReadLimit(maxRealtimeMessage)
		w.ws = c
	}
	fail := func(err error) error {
		_ = w.ws.CloseNow()
		w.ws = nil
		return err
	}
	if err := w.ws.Write(rctx, websocket.MessageText, r.rtItem); err != nil {
		return fail(wsErr(rctx, ErrTruncated, "write: %v", err))
	}
	if err := w.ws.Write(rctx, websocket.MessageText, r.rtCreate); err != nil {
		return fail(wsErr(rctx, ErrTruncated, "write: %v", err))
	}
	s := &w.s
	for !s.terminal {
		_, rd, err := w.ws.Reader(rctx)
		if err != nil {
			return fail(wsErr(rctx, ErrTruncated, "after %d tokens: %v", s.tokens, err))
		}
		w.msg = w.msg[:0]
		for {
			if len(w.msg) == cap(w.msg) {
				w.msg = append(w.msg, 0)[:len(w.msg)]
			}
			n, err := rd.Read(w.msg[len(w.msg):cap(w.msg)])
			w.msg = w.msg[:len(w.msg)+n]
			if err == io.EOF {
				break
			}
			if err != nil {
				return fail(wsErr(rctx, ErrTruncated, "after %d tokens: %v", s.tokens, err))
			}
		}
		s.now = r.clk.now()
		r.rec.bytes(len(w.msg))
		s.OnEvent(nil, w.msg)
	}
	if s.failed {
		return newReqError(ErrInStream, "%s", s.errMsg)
	}
	return nil
}

func wsErr(ctx context.Context, kind error, format string, args ...any) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return newReqError(ErrTimeout, format, args...)
	}
	return newReqError(kind, format, args...)
}

// sleepUntil waits for t or ctx; it reports whether t was reached.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// serverWatch samples one process: CPU at the window's two ends, RSS peak,
// (with allocs.url) its heap allocation count and (with engine.url) its
// engine's compute CPU.
type serverWatch struct {
	pid     int
	allocs  allocWatch
	engine  engineCPUWatch
	sys     syscallWatch
	mu      sync.Mutex
	at      [2]*ProcSample
	peakRSS atomic.Int64
	errs    int
}

// mark reads the window's start (i = 0) or end (1). The engine's counter
// is scraped before the process's CPU is read at the start and after it at
// the end, so that the scrapes' own CPU stays out of the process's window;
// system call counting opens around the CPU window the same way.
func (s *serverWatch) mark(i int) {
	ctx := context.Background()
	s.allocs.mark(ctx, i)
	if i == 0 {
		s.engine.mark(ctx, i)
		s.sys.mark(i)
	} else {
		defer s.engine.mark(ctx, i)
		defer s.sys.mark(i)
	}
	if s.pid <= 0 {
		return
	}
	ps, err := ReadProc(s.pid)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errs++
		return
	}
	s.at[i] = &ps
	s.notePeak(ps.RSSBytes)
}

func (s *serverWatch) marked(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at[i] != nil
}

func (s *serverWatch) notePeak(v int64) {
	for {
		p := s.peakRSS.Load()
		if v <= p || s.peakRSS.CompareAndSwap(p, v) {
			return
		}
	}
}

func (s *serverWatch) sampleRSS(ctx context.Context) {
	t := time.NewTicker(rssSampleEvery)
	defer t.Stop()
	for {
		if ps, err := ReadProc(s.pid); err == nil {
			s.notePeak(ps.RSSBytes)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// progress prints the run's state every cfg.ProgressEvery (every second,
// redrawing one line, on a terminal).
func (r *runner) progress(ctx context.Context) {
	every := r.cfg.ProgressEvery
	if r.cfg.ProgressTTY {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var lastTok int64
	lastAt := r.clk.now()
	for {
		select {
		case <-ctx.Done():
			if r.cfg.ProgressTTY {
				fmt.Fprint(r.cfg.Progress, "\r\033[K")
			}
			return
		case <-t.C:
		}
		now := r.clk.now()
		tok := r.rec.tokensAll.Load()
		rate := float64(tok-lastTok) / (float64(now-lastAt) / 1e9)
		lastTok, lastAt = tok, now
		phase := "measure"
		switch {
		case now < r.rec.warmEnd:
			phase = "warmup"
		case now >= r.rec.stopAt.Load():
			phase = "drain"
		}
		line := fmt.Sprintf("%6.1fs %-7s active=%d ok=%d err=%d tok/s=%.0f",
			float64(now)/1e9, phase, r.rec.active.Load(), r.rec.okReqs.Load()+r.rec.warmReqs.Load(),
			r.rec.errCount()+r.rec.warmErrs.Load(), rate)
		if r.cfg.ProgressTTY {
			total := r.cfg.Warmup + r.cfg.Duration
			frac := 0.0
			if total > 0 {
				frac = min(1, float64(now)/float64(total))
			} else if r.cfg.Requests > 0 {
				frac = min(1, float64(r.rec.okReqs.Load()+r.rec.errCount())/float64(r.cfg.Requests))
			}
			const width = 30
			bar := make([]byte, width)
			for i := range bar {
				if float64(i) < frac*width {
					bar[i] = '#'
				} else {
					bar[i] = '.'
				}
			}
			fmt.Fprintf(r.cfg.Progress, "\r\033[K[%s] %s", bar, line)
		} else {
			fmt.Fprintln(r.cfg.Progress, line)
		}
	}
}

// request is the raw request the worker sends next: the shared one, with
// -unique-prompts one of its own, or with -chain the next turn of its
// conversation.
func (w *worker) request() []byte {
	r := w.r
	if r.cfg.UniquePrompts {
		p := strconv.FormatInt(r.promptN.Add(1), 10) + " " + r.prompt
		body := requestFor(&r.cfg, p, r.cfg.Store, "")
		return buildRequest("POST", r.t.host, r.t.basePath+r.cfg.Dialect.path(), r.hdr, body)
	}
	if len(r.prefixes) > 0 {
		// One of the shared prefixes in turn, then the request's own words.
		w.sent++
		n := r.shared.Add(1)
		prompt := r.prefixes[int(n%uint64(len(r.prefixes)))] + fmt.Sprintf("\nRequest %d-%p: ", w.sent, w) + r.prompt
		body := requestFor(&r.cfg, prompt, r.cfg.Store, "")
		return buildRequest("POST", r.t.host, r.t.basePath+r.cfg.Dialect.path(), r.hdr, body)
	}
	if r.cfg.Chain == 0 || w.prevID == "" {
		return r.req
	}
	body := requestFor(&r.cfg, r.prompt, true, w.prevID)
	return buildRequest("POST", r.t.host, r.t.basePath+r.cfg.Dialect.path(), r.hdr, body)
}

// chain notes the response id the last request returned, for the next
// turn; after Chain turns (or a failure) the conversation starts over.
func (w *worker) chain(err error) {
	if w.r.cfg.Chain == 0 {
		return
	}
	w.chained++
	if err != nil || len(w.s.respID) == 0 || w.chained >= w.r.cfg.Chain {
		w.prevID, w.chained = "", 0
		return
	}
	w.prevID = string(w.s.respID)
}
