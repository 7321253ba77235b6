// Package main (floor.go) is the floor reference server: the smallest gnet
// program that answers every request with pre-baked SSE frames of an OpenAI
// chat completion stream at a fixed cadence. It does no parsing beyond
// finding the end of a request and a few bytes.Index probes of the body, has
// no actors and no engine: what it costs is what the kernel and gnet cost, so
// no server built on gnet can beat it.
//
// One shared ticker drives all streams; on each tick every event loop that
// has live streams is woken once (EventLoop.Execute) and writes the next
// frame of each of its streams.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/vajra-go/vajra/bench/internal/tokens"
)

// Options configures the floor server.
type Options struct {
	Host string        // listen host; default 127.0.0.1
	Port int           // listen port; 0 picks a free port
	ITL  time.Duration // inter-token latency; 0: steps back to back, one token per stream per step
	// Tokens is the number of tokens per response; 0 means the request's
	// max_tokens when present, else tokens.DefaultCount.
	Tokens int
	// Loops is the number of event loops; 0 means GOMAXPROCS.
	Loops int
}

// maxHeadBytes bounds a request head; a client that sends more without the
// terminating blank line is disconnected. 64 KiB is far above any SDK's head.
const maxHeadBytes = 64 << 10

// maxBodyBytes bounds a request body (16 MiB) so a bogus Content-Length cannot
// make the server buffer without limit.
const maxBodyBytes = 16 << 20

// maxTokensCap bounds the tokens of one response taken from max_tokens.
const maxTokensCap = 1 << 20

// created is the fixed "created" timestamp of every chunk.
const created = 1700000000

// Serve starts a floor server and returns its address (host:port) and a stop
// function that shuts it down and waits for it. It returns once the server
// accepts connections.
func Serve(ctx context.Context, o Options) (addr string, stop func(), err error) {
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Loops <= 0 {
		o.Loops = runtime.GOMAXPROCS(0)
	}
	if o.Port == 0 {
		if o.Port, err = freePort(o.Host); err != nil {
			return "", nil, err
		}
	}
	addr = net.JoinHostPort(o.Host, strconv.Itoa(o.Port))
	s := newServer(o)
	proto := "tcp://" + addr
	done := make(chan error, 1)
	go func() {
		done <- gnet.Run(s, proto,
			gnet.WithMulticore(o.Loops > 1),
			gnet.WithNumEventLoop(o.Loops),
			gnet.WithReusePort(false),
			gnet.WithTCPNoDelay(gnet.TCPNoDelay),
			gnet.WithLockOSThread(false),
			gnet.WithLogger(quietLogger{}))
	}()
	select {
	case <-s.booted:
	case err := <-done:
		if err == nil {
			err = errors.New("floor: engine stopped before boot")
		}
		return "", nil, fmt.Errorf("floor: listen %s: %w", addr, err)
	case <-ctx.Done():
		return "", nil, ctx.Err()
	}
	tickCtx, cancelTick := context.WithCancel(context.Background())
	var tickWG sync.WaitGroup
	if o.ITL > 0 {
		tickWG.Add(1)
		go func() { defer tickWG.Done(); s.tick(tickCtx) }()
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancelTick()
			tickWG.Wait()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.engine.Stop(sctx)
			<-done
		})
	}
	go func() {
		select {
		case <-ctx.Done():
			stop()
		case <-tickCtx.Done():
		}
	}()
	return addr, stop, nil
}

// quietLogger drops gnet's debug and info lines (a banner per engine start)
// and prints warnings and errors to stderr.
type quietLogger struct{}

func (quietLogger) Debugf(string, ...any)     {}
func (quietLogger) Infof(string, ...any)      {}
func (quietLogger) Warnf(f string, a ...any)  { fmt.Fprintf(os.Stderr, "floor: gnet: "+f+"\n", a...) }
func (quietLogger) Errorf(f string, a ...any) { fmt.Fprintf(os.Stderr, "floor: gnet: "+f+"\n", a...) }
func (quietLogger) Fatalf(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "floor: gnet: "+f+"\n", a...)
	os.Exit(1)
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// frames are the pre-baked chunked-encoding frames of the stream: one chunk
// per SSE event. Index i of each slice is token i mod tokens.Len.
type frames struct {
	head  []byte   // status line and headers
	first [][]byte // first token: delta carries the role
	mid   [][]byte // tokens after the first and before the last
	last  [][]byte // last token: carries finish_reason
	only  [][]byte // a one-token stream: role and finish_reason
	done  []byte   // data: [DONE] then the terminating zero-size chunk
}

const streamHead = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"

func bakeFrames() *frames {
	f := &frames{head: []byte(streamHead)}
	f.done = appendChunk(nil, []byte("data: [DONE]\n\n"))
	f.done = append(f.done, "0\r\n\r\n"...)
	for i := 0; i < tokens.Len; i++ {
		t := tokens.Text(i)
		f.first = append(f.first, appendChunk(nil, chunkEvent(`"role":"assistant","content":"`+t+`"`, "null")))
		f.mid = append(f.mid, appendChunk(nil, chunkEvent(`"content":"`+t+`"`, "null")))
		f.last = append(f.last, appendChunk(nil, chunkEvent(`"content":"`+t+`"`, `"length"`)))
		f.only = append(f.only, appendChunk(nil, chunkEvent(`"role":"assistant","content":"`+t+`"`, `"length"`)))
	}
	return f
}

func chunkEvent(delta, finish string) []byte {
	return []byte(`data: {"id":"chatcmpl-floor","object":"chat.completion.chunk","created":` + strconv.Itoa(created) +
		`,"model":"floor","choices":[{"index":0,"delta":{` + delta + `},"finish_reason":` + finish + "}]}\n\n")
}

// appendChunk appends p as one HTTP/1.1 chunk (RFC 9112 §7.1).
func appendChunk(dst, p []byte) []byte {
	dst = strconv.AppendInt(dst, int64(len(p)), 16)
	dst = append(dst, "\r\n"...)
	dst = append(dst, p...)
	return append(dst, "\r\n"...)
}

// appendUsage appends the usage chunk that precedes [DONE] when the client
// asked for include_usage (the floor always sends it).
func appendUsage(dst []byte, prompt, completion int) []byte {
	var ev [256]byte
	p := append(ev[:0], `data: {"id":"chatcmpl-floor","object":"chat.completion.chunk","created":`...)
	p = strconv.AppendInt(p, created, 10)
	p = append(p, `,"model":"floor","choices":[],"usage":{"prompt_tokens":`...)
	p = strconv.AppendInt(p, int64(prompt), 10)
	p = append(p, `,"completion_tokens":`...)
	p = strconv.AppendInt(p, int64(completion), 10)
	p = append(p, `,"total_tokens":`...)
	p = strconv.AppendInt(p, int64(prompt+completion), 10)
	p = append(p, "}}\n\n"...)
	return appendChunk(dst, p)
}

// stream is one live streaming response. Loop-only: it is touched only on
// the event loop that owns its connection.
type stream struct {
	c      gnet.Conn
	next   int // index of the next token to write
	n      int // tokens to write
	prompt int
	closed bool // OnClose ran; drop at the next tick
}

// connState is a connection's context. Loop-only.
type connState struct {
	loop *loopState
	st   *stream // the live stream, nil when idle
}

// loopState holds one event loop's live streams. streams is loop-only;
// active and pending are read by the ticker goroutine.
type loopState struct {
	el      gnet.EventLoop
	streams []*stream
	active  atomic.Int32 // len(streams), for the ticker to skip idle loops
	pending atomic.Bool  // a tick is queued and has not run yet
	scratch []byte
	run     gnet.RunnableFunc
}

type server struct {
	gnet.BuiltinEventEngine
	o      Options
	f      *frames
	engine gnet.Engine
	booted chan struct{}

	mu    sync.Mutex
	loops map[gnet.EventLoop]*loopState
	list  atomic.Pointer[[]*loopState]

	jsonMu sync.Mutex
	json   map[int][]byte // non-stream responses by token count
}

func newServer(o Options) *server {
	return &server{o: o, f: bakeFrames(), booted: make(chan struct{}),
		loops: map[gnet.EventLoop]*loopState{}, json: map[int][]byte{}}
}

func (s *server) OnBoot(e gnet.Engine) gnet.Action {
	s.engine = e
	close(s.booted)
	return gnet.None
}

func (s *server) loopOf(el gnet.EventLoop) *loopState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ls, ok := s.loops[el]; ok {
		return ls
	}
	ls := &loopState{el: el}
	ls.run = func(context.Context) error { s.onTick(ls); return nil }
	s.loops[el] = ls
	list := make([]*loopState, 0, len(s.loops))
	for _, l := range s.loops {
		list = append(list, l)
	}
	s.list.Store(&list)
	return ls
}

func (s *server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	c.SetContext(&connState{loop: s.loopOf(c.EventLoop())})
	return nil, gnet.None
}

func (s *server) OnClose(c gnet.Conn, _ error) gnet.Action {
	if cs, ok := c.Context().(*connState); ok && cs.st != nil {
		cs.st.closed = true
		cs.st = nil
	}
	return gnet.None
}

func (s *server) OnTraffic(c gnet.Conn) gnet.Action {
	cs := c.Context().(*connState)
	if cs.st != nil {
		return gnet.None // a stream is live: leave the next request buffered
	}
	return s.serve(c, cs)
}

var (
	crlfcrlf      = []byte("\r\n\r\n")
	contentLength = []byte("\ncontent-length:")
	streamTrue    = []byte(`"stream":true`)
	streamTrueSp  = []byte(`"stream": true`)
	maxTokensKey  = []byte(`"max_tokens":`)
)

// serve answers every complete request buffered on c until a stream starts
// or the buffer runs dry. Loop-only.
func (s *server) serve(c gnet.Conn, cs *connState) gnet.Action {
	for {
		buf, _ := c.Peek(-1)
		if len(buf) == 0 {
			return gnet.None
		}
		end := bytes.Index(buf, crlfcrlf)
		if end < 0 {
			if len(buf) > maxHeadBytes {
				return gnet.Close
			}
			return gnet.None
		}
		head := buf[:end+2]
		cl, ok := headContentLength(head)
		if !ok || cl > maxBodyBytes {
			return gnet.Close
		}
		total := end + 4 + cl
		if len(buf) < total {
			return gnet.None
		}
		body := buf[end+4 : total]
		isStream := bytes.Contains(body, streamTrue) || bytes.Contains(body, streamTrueSp)
		n := s.o.Tokens
		if n <= 0 {
			n = bodyMaxTokens(body)
		}
		prompt := tokens.PromptTokens(len(body))
		_, _ = c.Discard(total) // buf, head and body are invalid from here on
		if !isStream {
			_, _ = c.Write(s.nonStream(n, prompt))
			continue
		}
		_, _ = c.Write(s.f.head)
		st := &stream{c: c, n: n, prompt: prompt}
		cs.st = st
		ls := cs.loop
		ls.streams = append(ls.streams, st)
		ls.active.Store(int32(len(ls.streams)))
		if s.o.ITL <= 0 {
			s.stepAgain(ls)
		}
		return gnet.None
	}
}

// headContentLength finds Content-Length in a request head (case-insensitive
// name, RFC 9110 §5.1). A head without one has an empty body.
func headContentLength(head []byte) (int, bool) {
	for i := 0; i+len(contentLength) <= len(head); i++ {
		if head[i] != '\n' {
			continue
		}
		j := i + 1
		k := 1
		for ; k < len(contentLength) && j < len(head); k, j = k+1, j+1 {
			if lower(head[j]) != contentLength[k] {
				break
			}
		}
		if k != len(contentLength) {
			continue
		}
		for j < len(head) && (head[j] == ' ' || head[j] == '\t') {
			j++
		}
		n, digits := 0, 0
		for ; j < len(head) && head[j] >= '0' && head[j] <= '9'; j++ {
			n = n*10 + int(head[j]-'0')
			digits++
			if n > maxBodyBytes {
				return n, true
			}
		}
		return n, digits > 0
	}
	return 0, true
}

func lower(b byte) byte {
	if b >= 'A' && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}

// bodyMaxTokens reads max_tokens from a request body, or the default.
func bodyMaxTokens(body []byte) int {
	i := bytes.Index(body, maxTokensKey)
	if i < 0 {
		return tokens.DefaultCount
	}
	j := i + len(maxTokensKey)
	for j < len(body) && body[j] == ' ' {
		j++
	}
	n, digits := 0, 0
	for ; j < len(body) && body[j] >= '0' && body[j] <= '9' && n < maxTokensCap; j++ {
		n = n*10 + int(body[j]-'0')
		digits++
	}
	if digits == 0 || n <= 0 {
		return tokens.DefaultCount
	}
	return min(n, maxTokensCap)
}

// writeNext writes st's next frame and reports whether the stream is over.
// Loop-only.
func (s *server) writeNext(ls *loopState, st *stream) bool {
	i := st.next
	var fr []byte
	switch {
	case st.n == 1:
		fr = s.f.only[0]
	case i == 0:
		fr = s.f.first[0]
	case i == st.n-1:
		fr = s.f.last[i%tokens.Len]
	default:
		fr = s.f.mid[i%tokens.Len]
	}
	st.next++
	if st.next < st.n {
		_, _ = st.c.Write(fr)
		return false
	}
	// Last token, usage, [DONE] and the zero chunk leave in one write.
	ls.scratch = append(ls.scratch[:0], fr...)
	ls.scratch = appendUsage(ls.scratch, st.prompt, st.n)
	ls.scratch = append(ls.scratch, s.f.done...)
	_, _ = st.c.Write(ls.scratch)
	return true
}

// nonStream returns the whole HTTP response for a non-streaming request.
func (s *server) nonStream(n, prompt int) []byte {
	s.jsonMu.Lock()
	defer s.jsonMu.Unlock()
	key := n<<32 | prompt
	if b, ok := s.json[key]; ok {
		return b
	}
	var content []byte
	for i := 0; i < n; i++ {
		content = append(content, tokens.Text(i)...)
	}
	body := fmt.Sprintf(`{"id":"chatcmpl-floor","object":"chat.completion","created":%d,"model":"floor","choices":[{"index":0,"message":{"role":"assistant","content":"%s"},"finish_reason":"length"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
		created, content, prompt, n, prompt+n)
	b := []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
	if len(s.json) < 4096 { // bound the cache; distinct shapes are few in a benchmark
		s.json[key] = b
	}
	return b
}

// tick drives every stream: once per ITL it wakes each loop that has live
// streams, unless that loop has not yet run the previous tick (then the loop
// is overloaded and its streams slow down, as a real server's would).
func (s *server) tick(ctx context.Context) {
	t := time.NewTicker(s.o.ITL)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		lp := s.list.Load()
		if lp == nil {
			continue
		}
		for _, ls := range *lp {
			if ls.active.Load() == 0 || ls.pending.Swap(true) {
				continue
			}
			if err := ls.el.Execute(ctx, ls.run); err != nil {
				ls.pending.Store(false)
			}
		}
	}
}

// stepAgain schedules the loop's next step at once: with no inter-token
// latency the cadence is "as fast as possible", one token of every live
// stream per step, steps back to back (the engine's cadence at ITL 0), each
// step one write per stream. Loop-only.
func (s *server) stepAgain(ls *loopState) {
	if !ls.pending.Swap(true) {
		if err := ls.el.Execute(context.Background(), ls.run); err != nil {
			ls.pending.Store(false)
		}
	}
}

// onTick writes one frame of every live stream of the loop. Loop-only.
func (s *server) onTick(ls *loopState) {
	ls.pending.Store(false)
	live := ls.streams[:0]
	var finished []*stream
	for _, st := range ls.streams {
		if st.closed {
			continue
		}
		if s.writeNext(ls, st) {
			finished = append(finished, st)
			continue
		}
		live = append(live, st)
	}
	clear(ls.streams[len(live):])
	ls.streams = live
	ls.active.Store(int32(len(live)))
	if s.o.ITL <= 0 && len(live) > 0 {
		s.stepAgain(ls)
	}
	// A keep-alive client may already have sent its next request.
	for _, st := range finished {
		cs, ok := st.c.Context().(*connState)
		if !ok || st.closed {
			continue // the last write failed and gnet closed the connection
		}
		cs.st = nil
		if st.c.InboundBuffered() > 0 {
			if s.serve(st.c, cs) == gnet.Close {
				_ = st.c.Close()
			}
		}
	}
}
