package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/vajra-go/vajra/internal/sse"
)

// readBufSize is each connection's read buffer. 16 KiB holds a response head
// and many token events; 1,000 streams cost 16 MiB.
const readBufSize = 16 << 10

// maxHeadBytes bounds a response head: it must fit in the read buffer.
const maxHeadBytes = readBufSize

// maxErrorBody bounds how much of a non-2xx body is read (and kept for the
// first error sample) before the connection is dropped.
const maxErrorBody = 64 << 10

// Errors of a single request, by kind. Each request ends with at most one.
var (
	ErrDial      = errors.New("bench: dial")
	ErrStatus    = errors.New("bench: non-2xx status")
	ErrInStream  = errors.New("bench: error event in stream")
	ErrTruncated = errors.New("bench: stream ended without its terminal event")
	ErrTimeout   = errors.New("bench: request timed out")
	ErrProtocol  = errors.New("bench: malformed response")
)

// httpConn is one keep-alive HTTP/1.1 connection with its read buffer. Owned
// by one goroutine at a time.
type httpConn struct {
	nc   net.Conn
	buf  []byte
	r, w int // unread bytes are buf[r:w]
	used bool
}

func dialHTTP(ctx context.Context, addr string, timeout time.Duration) (*httpConn, error) {
	d := net.Dialer{Timeout: timeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrDial, addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return &httpConn{nc: nc, buf: make([]byte, readBufSize)}, nil
}

func (c *httpConn) close() {
	if c != nil && c.nc != nil {
		_ = c.nc.Close()
	}
}

// fill reads more bytes into the buffer, compacting it first when the free
// tail is small.
func (c *httpConn) fill() error {
	if c.r == c.w {
		c.r, c.w = 0, 0
	} else if len(c.buf)-c.w < len(c.buf)/4 && c.r > 0 {
		c.w = copy(c.buf, c.buf[c.r:c.w])
		c.r = 0
	}
	if c.w == len(c.buf) {
		return fmt.Errorf("%w: head over %d bytes", ErrProtocol, maxHeadBytes)
	}
	n, err := c.nc.Read(c.buf[c.w:])
	c.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// respHead is what the instrument needs of a response head.
type respHead struct {
	status    int
	mode      bodyMode
	length    int64
	keepAlive bool
}

var crlfcrlf = []byte("\r\n\r\n")

// parseHead parses a status line and header fields (RFC 9112 §4, §6.3).
func parseHead(h []byte) (respHead, error) {
	var rh respHead
	line, rest, _ := bytes.Cut(h, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	// status-line = HTTP-version SP status-code SP [ reason-phrase ]
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return rh, fmt.Errorf("%w: status line %q", ErrProtocol, trunc(line))
	}
	code, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return rh, fmt.Errorf("%w: status line %q", ErrProtocol, trunc(line))
	}
	rh.status = code
	rh.keepAlive = line[7] == '1' // HTTP/1.1 defaults to persistent
	rh.mode = bodyClose
	haveLength := false
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "content-length"):
			n, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || n < 0 {
				return rh, fmt.Errorf("%w: Content-Length %q", ErrProtocol, trunc(value))
			}
			if haveLength && n != rh.length {
				return rh, fmt.Errorf("%w: conflicting Content-Length", ErrProtocol) // RFC 9112 §6.3 (5)
			}
			rh.length, haveLength = n, true
		case asciiEqualFold(name, "transfer-encoding"):
			if bytes.Contains(bytes.ToLower(value), []byte("chunked")) {
				rh.mode = bodyChunked
			}
		case asciiEqualFold(name, "connection"):
			v := bytes.ToLower(value)
			if bytes.Contains(v, []byte("close")) {
				rh.keepAlive = false
			} else if bytes.Contains(v, []byte("keep-alive")) {
				rh.keepAlive = true
			}
		}
	}
	// RFC 9112 §6.3: chunked wins over Content-Length.
	switch {
	case rh.mode == bodyChunked:
	case rh.status == 204 || rh.status == 304 || rh.status/100 == 1:
		rh.mode = bodyNone
	case haveLength:
		rh.mode = bodyLength
	default:
		rh.keepAlive = false
	}
	return rh, nil
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		if lower(b[i]) != s[i] {
			return false
		}
	}
	return true
}

func lower(b byte) byte {
	if b >= 'A' && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}

func trunc(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// stream is the per-request state that turns events into measurements. One
// per worker, reused across requests; it implements sse.Handler.
type stream struct {
	d        Dialect
	every    bool // Config.EveryChunk
	clk      *clock
	now      int64 // ns since the run's epoch, of the read being parsed
	start    int64
	head     int64 // response head (Realtime: response.created); 0 = none yet
	first    int64 // first token; 0 = none yet
	last     int64 // latest token
	end      int64 // terminal event
	tokens   int
	usage    int // output tokens the server reported, -1 if none
	terminal bool
	failed   bool // in-stream error
	errMsg   []byte
	respID   []byte // Responses: the response's id (for -chain)
	rec      *recorder
	measured bool
}

func (s *stream) reset(start int64, measured bool) {
	s.start, s.head, s.first, s.last, s.end = start, 0, 0, 0, 0
	s.tokens, s.usage = 0, -1
	s.terminal, s.failed = false, false
	s.errMsg = s.errMsg[:0]
	s.respID = s.respID[:0]
	s.measured = measured
}

// OnEvent implements sse.Handler: the hot path, one call per event.
func (s *stream) OnEvent(name, data []byte) {
	k := classify(s.d, name, data)
	if k == evOther && s.every && emptyText(s.d, data) {
		k = evToken
	}
	switch k {
	case evToken:
		s.tokens++
		if s.tokens == 1 {
			s.first = s.now
		} else {
			s.rec.gap(s.now, s.now-s.last)
		}
		s.last = s.now
		s.rec.token(s.now)
		if s.d == DialectCompletions && bytes.Contains(data, patUsageObj) {
			// Completions servers may put usage on the last text chunk.
			s.usage = usageTokens(data)
		}
	case evTerminal:
		s.terminal = true
		s.end = s.now
		if s.d == DialectResponses {
			s.respID = appendFirstID(s.respID[:0], data)
		}
		if u := usageTokens(data); u >= 0 {
			s.usage = u
		}
	case evFailed:
		s.terminal, s.failed = true, true
		s.end = s.now
		s.keepErr(data)
	case evError:
		s.failed = true
		s.keepErr(data)
	case evStart:
		if s.head == 0 {
			s.head = s.now
		}
	default:
		// Few events are neither tokens nor terminal: the usage chunk of
		// chat and completions, message_start and message_delta (whose count
		// is the final one) of messages.
		if s.d != DialectResponses && s.d != DialectRealtime {
			if u := usageTokens(data); u >= 0 {
				s.usage = u
			}
		}
	}
}

func (s *stream) keepErr(data []byte) {
	if len(s.errMsg) == 0 {
		s.errMsg = append(s.errMsg, trunc(data)...)
	}
}

// errorf builds a request error.
type reqError struct {
	kind   error
	detail string
}

func (e *reqError) Error() string { return e.kind.Error() + ": " + e.detail }
func (e *reqError) Unwrap() error { return e.kind }

func newReqError(kind error, format string, args ...any) error {
	return &reqError{kind: kind, detail: fmt.Sprintf(format, args...)}
}

// doHTTP runs one request on c (a streaming or not) and fills s. It returns
// whether c may be reused, and the request's error.
func doHTTP(c *httpConn, req []byte, s *stream, sr *sse.Reader, deadline time.Time, stream bool) (reuse bool, err error) {
	_ = c.nc.SetDeadline(deadline)
	if _, err := c.nc.Write(req); err != nil {
		return false, timeoutOr(err, ErrDial, "write: %v", err)
	}
	c.used = true
	// Response head.
	var rh respHead
	for {
		if i := bytes.Index(c.buf[c.r:c.w], crlfcrlf); i >= 0 {
			s.now = s.clk.now()
			rh, err = parseHead(c.buf[c.r : c.r+i+4])
			c.r += i + 4
			if err != nil {
				return false, err
			}
			if rh.status/100 == 1 && rh.status != 101 {
				continue // 100 Continue and other interim responses
			}
			break
		}
		if err := c.fill(); err != nil {
			if errors.Is(err, ErrProtocol) {
				return false, err
			}
			return false, timeoutOr(err, ErrTruncated, "reading head: %v", err)
		}
	}
	s.head = s.now
	var d bodyDecoder
	d.start(rh.mode, rh.length)
	if rh.status/100 != 2 {
		var body []byte
		for !d.done() {
			for c.r < c.w && !d.done() {
				seg, n, derr := d.next(c.buf[c.r:c.w])
				c.r += n
				if derr != nil {
					return false, newReqError(ErrStatus, "status %d", rh.status)
				}
				if len(body) < 512 {
					body = append(body, seg[:min(len(seg), 512-len(body))]...)
				}
			}
			if d.done() || c.fill() != nil {
				break
			}
		}
		return d.done() && rh.keepAlive, newReqError(ErrStatus, "status %d: %s", rh.status, body)
	}
	sr.Reset()
	var whole []byte // non-stream body, for its usage
	for {
		for c.r < c.w && !d.done() {
			seg, n, derr := d.next(c.buf[c.r:c.w])
			c.r += n
			if derr != nil {
				return false, newReqError(ErrProtocol, "%v", derr)
			}
			if len(seg) == 0 {
				continue
			}
			s.rec.bytes(len(seg))
			if stream {
				if err := sr.Feed(seg, s); err != nil {
					return false, newReqError(ErrProtocol, "%v", err)
				}
			} else if len(whole) < sse.MaxEventBytes {
				whole = append(whole, seg...)
			}
		}
		if d.done() {
			break
		}
		if err := c.fill(); err != nil {
			if rh.mode == bodyClose && errors.Is(err, io.EOF) {
				break
			}
			if stream && s.terminal {
				// The terminal event arrived but the body did not end well:
				// the measurement stands, the connection does not.
				return false, nil
			}
			return false, timeoutOr(err, ErrTruncated, "after %d tokens: %v", s.tokens, err)
		}
		s.now = s.clk.now()
	}
	if !stream {
		s.now = s.clk.now()
		s.end = s.now
		s.terminal = true
		if u := usageTokens(whole); u >= 0 {
			s.usage = u
			s.tokens = u
			s.rec.tokens(s.now, u)
		}
		if s.d == DialectResponses {
			s.respID = appendFirstID(s.respID[:0], whole)
		}
		if bytes.Contains(whole, patErrorObj) {
			s.failed = true
			s.keepErr(whole)
		}
	}
	reuse = rh.keepAlive
	if s.failed {
		return reuse, newReqError(ErrInStream, "%s", s.errMsg)
	}
	if !s.terminal {
		return reuse, newReqError(ErrTruncated, "body ended after %d tokens without the terminal event", s.tokens)
	}
	return reuse, nil
}

func timeoutOr(err, kind error, format string, args ...any) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return newReqError(ErrTimeout, format, args...)
	}
	return newReqError(kind, format, args...)
}

// buildRequest returns the raw bytes of one HTTP/1.1 request.
func buildRequest(method, host, path string, hdr [][2]string, body []byte) []byte {
	var b []byte
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nUser-Agent: vajra-bench\r\n"...)
	for _, h := range hdr {
		b = append(b, h[0]...)
		b = append(b, ": "...)
		b = append(b, h[1]...)
		b = append(b, "\r\n"...)
	}
	if body != nil {
		b = append(b, "Content-Type: application/json\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, body...)
}
