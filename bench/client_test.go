package bench

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra/internal/sse"
)

// scriptConn is a net.Conn whose reads return the scripted parts one by
// one (each part whole if the reader's buffer allows), then io.EOF, so the
// client sees exactly these read boundaries. Writes are discarded.
type scriptConn struct {
	net.Conn // nil: only the methods below are used
	parts    []string
	eof      bool // io.EOF after the parts; else block-free "timeout"
}

func (c *scriptConn) Read(p []byte) (int, error) {
	for len(c.parts) > 0 && c.parts[0] == "" {
		c.parts = c.parts[1:]
	}
	if len(c.parts) == 0 {
		if c.eof {
			return 0, io.EOF
		}
		return 0, os.ErrDeadlineExceeded
	}
	n := copy(p, c.parts[0])
	c.parts[0] = c.parts[0][n:]
	return n, nil
}
func (c *scriptConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }
func (c *scriptConn) Close() error                     { return nil }

// sharedRecorder serves every exchange: a recorder is large (its histograms)
// and these tests check the stream, not the recorder.
var sharedRecorder = newRecorder(0, noStop, time.Second)

// pipeExchange runs one doHTTP against a scripted response delivered in
// parts. closeAfter makes the server close after the parts (EOF); otherwise
// a further read times out, as on a live keep-alive connection.
func pipeExchange(t *testing.T, d Dialect, streaming bool, parts []string, closeAfter bool) (*stream, bool, error) {
	t.Helper()
	req := buildRequest("POST", "127.0.0.1", "/v1"+d.path(), nil, []byte(`{}`))
	c := &httpConn{nc: &scriptConn{parts: append([]string(nil), parts...), eof: closeAfter}, buf: make([]byte, readBufSize)}
	s := &stream{d: d, clk: &clock{epoch: time.Now()}, rec: sharedRecorder}
	s.reset(1, true)
	var sse sse.Reader
	reuse, err := doHTTP(c, req, s, &sse, time.Now().Add(5*time.Second), streaming)
	return s, reuse, err
}

const sseHead = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

// TestDoHTTPEverySplit runs each dialect's stream through the HTTP client
// in chunked, Content-Length and close-delimited framing, with the bytes
// split in two at every offset.
func TestDoHTTPEverySplit(t *testing.T) {
	for d, body := range dialectStreams {
		framings := map[string]struct {
			resp      string
			closeConn bool
			reuse     bool
		}{
			"chunked7":  {sseHead + chunkedBody(body, 7), false, true},
			"chunkedEv": {sseHead + chunkedBody(body, 1<<20), false, true},
			"length": {fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s",
				len(body), body), false, true},
			"close": {"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + body, true, false},
		}
		for name, fr := range framings {
			t.Run(string(d)+"/"+name, func(t *testing.T) {
				step := 1
				for split := 0; split <= len(fr.resp); split += step {
					s, reuse, err := pipeExchange(t, d, true, []string{fr.resp[:split], fr.resp[split:]}, fr.closeConn)
					if err != nil || s.tokens != 3 || s.usage != 3 || !s.terminal || reuse != fr.reuse {
						t.Fatalf("split %d: err %v tokens %d usage %d terminal %v reuse %v", split, err, s.tokens, s.usage, s.terminal, reuse)
					}
				}
			})
		}
	}
}

func TestDoHTTPErrors(t *testing.T) {
	chat := dialectStreams[DialectChat]
	noDone := strings.TrimSuffix(chat, "data: [DONE]\n\n")
	f := func(name string, parts []string, closeConn bool, want error, wantReuse bool) {
		t.Helper()
		_, reuse, err := pipeExchange(t, DialectChat, true, parts, closeConn)
		if !errors.Is(err, want) || (want == nil) != (err == nil) || reuse != wantReuse {
			t.Errorf("%s: err %v reuse %v; want %v reuse %v", name, err, reuse, want, wantReuse)
		}
	}
	f("ok", []string{sseHead + chunkedBody(chat, 64)}, false, nil, true)
	f("status", []string{"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: 21\r\n\r\n{\"error\":{\"code\":1}}\n"}, false, ErrStatus, true)
	f("status-close", []string{"HTTP/1.1 500 Oops\r\nConnection: close\r\n\r\nboom"}, true, ErrStatus, false)
	f("truncated-mid-body", []string{sseHead + chunkedBody(chat, 64)[:300]}, true, ErrTruncated, false)
	f("no-terminal", []string{sseHead + chunkedBody(noDone, 64)}, false, ErrTruncated, true)
	f("in-stream-error", []string{sseHead + chunkedBody("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"error\":{\"message\":\"engine died\",\"type\":\"server_error\"}}\n\ndata: [DONE]\n\n", 1000)}, false, ErrInStream, true)
	f("bad-chunk", []string{sseHead + "zz\r\nhello\r\n0\r\n\r\n"}, false, ErrProtocol, false)
	f("bad-status-line", []string{"HTTP/2 200\r\n\r\n"}, false, ErrProtocol, false)
	f("eof-before-head", []string{"HTTP/1.1 200 OK\r\n"}, true, ErrTruncated, false)
	f("interim-100", []string{"HTTP/1.1 100 Continue\r\n\r\n" + sseHead + chunkedBody(chat, 64)}, false, nil, true)
}

func TestDoHTTPNonStream(t *testing.T) {
	body := `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":16,"total_tokens":19}}`
	resp := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	for split := 0; split <= len(resp); split += 5 {
		s, reuse, err := pipeExchange(t, DialectChat, false, []string{resp[:split], resp[split:]}, false)
		if err != nil || s.tokens != 16 || !reuse {
			t.Fatalf("split %d: err %v tokens %d reuse %v", split, err, s.tokens, reuse)
		}
	}
}

func TestParseHead(t *testing.T) {
	f := func(head string, want respHead, wantErr bool) {
		t.Helper()
		got, err := parseHead([]byte(head))
		if (err != nil) != wantErr || (!wantErr && got != want) {
			t.Errorf("parseHead(%q) = %+v, %v; want %+v err=%v", head, got, err, want, wantErr)
		}
	}
	f("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", respHead{200, bodyLength, 5, true}, false)
	f("HTTP/1.1 200 OK\r\ncontent-length: 5\r\nConnection: close\r\n\r\n", respHead{200, bodyLength, 5, false}, false)
	f("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", respHead{200, bodyChunked, 5, true}, false)
	f("HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\n", respHead{200, bodyLength, 5, false}, false)
	f("HTTP/1.0 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\n", respHead{200, bodyLength, 5, true}, false)
	f("HTTP/1.1 200 OK\r\n\r\n", respHead{200, bodyClose, 0, false}, false)
	f("HTTP/1.1 204 No Content\r\n\r\n", respHead{204, bodyNone, 0, true}, false)
	f("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", respHead{}, true)
	f("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", respHead{}, true)
	f("HTTP/1.1 2x0 OK\r\n\r\n", respHead{}, true)
	f("SIP/2.0 200 OK\r\n\r\n", respHead{}, true)
}

func TestChunkedDecoderEverySplit(t *testing.T) {
	payload := "hello, chunked world"
	wire := "5;ext=1\r\nhello\r\n2\r\n, \r\nD\r\nchunked world\r\n0\r\nTrailer: x\r\n\r\nNEXT"
	for split := 0; split <= len(wire); split++ {
		var d bodyDecoder
		d.start(bodyChunked, 0)
		var got []byte
		rest := ""
		for _, part := range []string{wire[:split], wire[split:]} {
			p := []byte(part)
			for len(p) > 0 && !d.done() {
				seg, n, err := d.next(p)
				if err != nil {
					t.Fatalf("split %d: %v", split, err)
				}
				got = append(got, seg...)
				p = p[n:]
			}
			rest += string(p)
		}
		if string(got) != payload || !d.done() || rest != "NEXT" {
			t.Fatalf("split %d: payload %q done %v rest %q", split, got, d.done(), rest)
		}
	}
}
