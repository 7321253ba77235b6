package soak

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"time"
)

// The raw TCP client: requests are built as bytes so that they can be cut
// at any offset, pipelined, sent chunked or broken on purpose.

// dialect is one generation API as the raw client speaks it.
type dialect struct {
	name string
	path string
	// body renders a request for n tokens.
	body func(model string, n int, stream bool) string
	// end is what the last event of a complete stream contains.
	end string
}

// prompt is the user text of every raw request: short, so that requests
// are cheap and the soak spends its time on the connections.
const prompt = "Tell me about the sea."

var dialects = []dialect{
	{"chat", "/v1/chat/completions", func(m string, n int, s bool) string {
		return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}],"max_tokens":%d,"stream":%t,"ignore_eos":true}`, m, prompt, n, s)
	}, "data: [DONE]"},
	{"completions", "/v1/completions", func(m string, n int, s bool) string {
		return fmt.Sprintf(`{"model":%q,"prompt":%q,"max_tokens":%d,"stream":%t,"ignore_eos":true}`, m, prompt, n, s)
	}, "data: [DONE]"},
	// store:false: the store's bound would otherwise fill during a long soak.
	{"responses", "/v1/responses", func(m string, n int, s bool) string {
		return fmt.Sprintf(`{"model":%q,"input":%q,"max_output_tokens":%d,"stream":%t,"store":false}`, m, prompt, n, s)
	}, `"sequence_number"`},
	{"messages", "/v1/messages", func(m string, n int, s bool) string {
		return fmt.Sprintf(`{"model":%q,"max_tokens":%d,"messages":[{"role":"user","content":%q}],"stream":%t}`, m, n, prompt, s)
	}, "event: message_stop"},
}

// request renders one HTTP/1.1 request; chunked sends the body in two
// chunks instead of with a Content-Length.
func request(method, path, body string, chunked bool, extra ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: soak\r\n", method, path)
	for _, h := range extra {
		b.WriteString(h)
		b.WriteString("\r\n")
	}
	if method == http.MethodGet {
		b.WriteString("\r\n")
		return b.Bytes()
	}
	b.WriteString("Content-Type: application/json\r\n")
	if strings.HasPrefix(path, "/v1/messages") {
		b.WriteString("anthropic-version: 2023-06-01\r\n")
	}
	if !chunked {
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(body), body)
		return b.Bytes()
	}
	b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
	half := len(body) / 2
	for _, part := range []string{body[:half], body[half:]} {
		if part != "" {
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(part), part)
		}
	}
	b.WriteString("0\r\n\r\n")
	return b.Bytes()
}

// opTimeout bounds every read and write of the raw client.
const opTimeout = 30 * time.Second

// dial opens a loopback connection with a deadline for everything on it.
func dial(addr string) (*net.TCPConn, error) {
	c, err := net.DialTimeout("tcp", addr, opTimeout)
	if err != nil {
		return nil, err
	}
	tc := c.(*net.TCPConn)
	_ = tc.SetDeadline(time.Now().Add(opTimeout))
	return tc, nil
}

// cut closes c the way a client that goes away does: an orderly close, or
// a reset (SO_LINGER 0) when rst.
func cut(c *net.TCPConn, rst bool) {
	if rst {
		_ = c.SetLinger(0)
	}
	_ = c.Close()
}

// genRequest is a random generation request of the raw client.
func genRequest(r *rand.Rand, model string, tokens int, stream bool) (dialect, []byte) {
	d := dialects[r.IntN(len(dialects))]
	return d, request(http.MethodPost, d.path, d.body(model, tokens, stream), r.IntN(4) == 0)
}

// readFull reads one response from br and checks it is a whole 200: a
// stream must contain its dialect's last event.
func readFull(br *bufio.Reader, d dialect, stream bool) error {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fmt.Errorf("%s: reading the head: %w", d.name, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("%s: reading the body after %d bytes: %w", d.name, len(body), err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d: %.200s", d.name, resp.StatusCode, body)
	}
	if stream && !bytes.Contains(body[max(0, len(body)-400):], []byte(d.end)) {
		return fmt.Errorf("%s: stream of %d bytes ends without %s: %q", d.name, len(body), d.end, body[max(0, len(body)-200):])
	}
	if !stream && (len(body) == 0 || body[0] != '{') {
		return fmt.Errorf("%s: body %.200q", d.name, body)
	}
	return nil
}

// cutRequest sends a random prefix of a generation request (inside the
// head, or inside the body: before any of it, mid-body, mid-chunk) and
// goes away. Nothing is expected back; the server must free the
// connection and its parser.
func cutRequest(r *rand.Rand, addr, model string, inBody bool) error {
	_, req := genRequest(r, model, 16, r.IntN(2) == 0)
	head := bytes.Index(req, []byte("\r\n\r\n")) + 4
	n := r.IntN(head) // strictly inside the head
	if inBody {
		n = head + r.IntN(len(req)-head) // the whole head, part of the body
	}
	c, err := dial(addr)
	if err != nil {
		return err
	}
	defer cut(c, r.IntN(2) == 0)
	if _, err := c.Write(req[:n]); err != nil {
		return fmt.Errorf("writing %d bytes: %w", n, err)
	}
	return nil
}

// cutResponse sends a whole request and goes away after reading skip
// bytes of the answer: 0 (before the answer), the head, or part of the
// stream.
func cutResponse(r *rand.Rand, addr, model string, where string) error {
	stream := where == "mid_stream" || r.IntN(4) != 0
	tokens := 8 + r.IntN(120)
	d := dialects[r.IntN(len(dialects))]
	// Connection: close, so that a stream shorter than skip (an engine's
	// early end of sequence) ends in EOF rather than a kept-alive wait.
	req := request(http.MethodPost, d.path, d.body(model, tokens, stream), r.IntN(4) == 0, "Connection: close")
	c, err := dial(addr)
	if err != nil {
		return err
	}
	defer cut(c, r.IntN(2) == 0)
	if _, err := c.Write(req); err != nil {
		return err
	}
	switch where {
	case "before_response":
		return nil
	case "after_head":
		br := bufio.NewReaderSize(c, 256)
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return fmt.Errorf("%s: reading the head: %w", d.name, err)
			}
			if len(line) <= 2 {
				return nil
			}
		}
	default: // mid_stream: a random number of bytes past the head
		skip := 200 + r.IntN(tokens*60)
		n, err := io.CopyN(io.Discard, c, int64(skip))
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("%s: read %d of %d bytes: %w", d.name, n, skip, err)
		}
		return nil
	}
}

// slowReader reads at most chunk bytes per Read and pauses before each:
// a client that reads slower than the server writes. The pause shapes the
// load; it synchronises nothing.
type slowReader struct {
	c     net.Conn
	chunk int
	pause time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	time.Sleep(s.pause)
	if len(p) > s.chunk {
		p = p[:s.chunk]
	}
	return s.c.Read(p)
}

// slowRead streams a request through a small receive buffer, reading 512
// bytes every 2 ms (about 250 KB/s, below the 1 ms-per-token stream of
// 150-300 byte events), and checks the stream is whole. With stall, it
// reads nothing for a while and then goes away, with output queued.
func slowRead(r *rand.Rand, addr, model string, stall bool) error {
	tokens := 64 + r.IntN(256)
	d, req := genRequest(r, model, tokens, true)
	c, err := dial(addr)
	if err != nil {
		return err
	}
	_ = c.SetReadBuffer(4 << 10)
	if stall {
		defer cut(c, r.IntN(2) == 0)
		if _, err := c.Write(req); err != nil {
			return err
		}
		// Wait for the first bytes, then leave the rest unread while the
		// server keeps producing.
		var b [1]byte
		if _, err := c.Read(b[:]); err != nil {
			return fmt.Errorf("%s: first byte: %w", d.name, err)
		}
		time.Sleep(time.Duration(10+r.IntN(100)) * time.Millisecond)
		return nil
	}
	defer c.Close()
	if _, err := c.Write(req); err != nil {
		return err
	}
	return readFull(bufio.NewReaderSize(&slowReader{c: c, chunk: 512, pause: 2 * time.Millisecond}, 512), d, true)
}

// pipelined writes a burst of 2-8 requests in one write (cheap routes,
// generation requests streamed and not, bad bodies) and reads the answers
// in order; sometimes it goes away after reading only some of them.
func pipelined(r *rand.Rand, addr, model string) error {
	type item struct {
		req    []byte
		d      dialect
		gen    bool // a generation request, checked by readFull
		stream bool
		status int // else the expected status
	}
	n := 2 + r.IntN(7)
	items := make([]item, n)
	var burst []byte
	for i := range items {
		switch k := r.IntN(6); k {
		case 0:
			items[i] = item{req: request(http.MethodGet, "/v1/models", "", false), status: 200}
		case 1:
			items[i] = item{req: request(http.MethodGet, "/health", "", false), status: 200}
		case 2:
			d := dialects[r.IntN(len(dialects))]
			items[i] = item{req: request(http.MethodPost, d.path, `{"model":`, r.IntN(2) == 0), status: 400}
		default:
			stream := k != 3
			d, req := genRequest(r, model, 4+r.IntN(24), stream)
			items[i] = item{req: req, d: d, gen: true, stream: stream}
		}
		burst = append(burst, items[i].req...)
	}
	read := n
	if r.IntN(4) == 0 {
		read = r.IntN(n) // go away early
	}
	c, err := dial(addr)
	if err != nil {
		return err
	}
	defer cut(c, r.IntN(2) == 0)
	if _, err := c.Write(burst); err != nil {
		return err
	}
	br := bufio.NewReader(c)
	for i := range read {
		it := items[i]
		if it.gen {
			if err := readFull(br, it.d, it.stream); err != nil {
				return fmt.Errorf("pipelined %d/%d: %w", i+1, n, err)
			}
			continue
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return fmt.Errorf("pipelined %d/%d: %w", i+1, n, err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("pipelined %d/%d: body: %w", i+1, n, err)
		}
		if resp.StatusCode != it.status {
			return fmt.Errorf("pipelined %d/%d: %s: status %d, want %d", i+1, n, bytes.SplitN(it.req, []byte("\r\n"), 2)[0], resp.StatusCode, it.status)
		}
	}
	return nil
}

// badRequest is a request the server must refuse with status, and then
// close the connection when closes, or else keep serving it.
type badRequest struct {
	name   string
	raw    []byte
	status int
	closes bool
}

// badRequests are the bad bodies and broken framings the soak sends.
var badRequests = func() []badRequest {
	m := `"vajra-sim"`
	post := func(path, body string) []byte { return request(http.MethodPost, path, body, false) }
	var deep strings.Builder
	for range 5000 {
		deep.WriteByte('[')
	}
	return []badRequest{
		{"truncated JSON", post("/v1/chat/completions", `{"model":`+m+`,"messages":[{"role":"us`), 400, false},
		{"messages not an array", post("/v1/chat/completions", `{"model":`+m+`,"messages":"hi"}`), 400, false},
		{"invalid UTF-8", post("/v1/chat/completions", `{"model":`+m+`,"messages":[{"role":"user","content":"a`+"\xff\xfe"+`"}]}`), 400, false},
		{"lone surrogate", post("/v1/completions", `{"model":`+m+`,"prompt":"\ud800"}`), 400, false},
		{"negative max_tokens", post("/v1/completions", `{"model":`+m+`,"prompt":"x","max_tokens":-3}`), 400, false},
		{"max_tokens past the context", post("/v1/chat/completions", `{"model":`+m+`,"messages":[{"role":"user","content":"x"}],"max_tokens":100000000}`), 400, false},
		{"unknown model", post("/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"x"}]}`), 404, false},
		{"messages without max_tokens", post("/v1/messages", `{"model":`+m+`,"messages":[{"role":"user","content":"x"}]}`), 400, false},
		{"responses input a number", post("/v1/responses", `{"model":`+m+`,"input":5}`), 400, false},
		{"empty body", post("/v1/chat/completions", ``), 400, false},
		{"binary garbage", post("/v1/messages", "\x00\x01\x02\x03garbage"), 400, false},
		{"deep nesting", post("/v1/chat/completions", deep.String()), 400, false},
		{"Content-Length and chunked", []byte("POST /v1/chat/completions HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 400, true},
		{"bad chunk size", []byte("POST /v1/chat/completions HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"), 400, true},
		{"huge Content-Length", []byte("POST /v1/chat/completions HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\nContent-Length: 1099511627776\r\n\r\n{"), 413, true},
		// An unregistered method is refused as soon as it is read (httpparse).
		{"unknown method", []byte("HELLO THERE\r\n\r\n"), 501, true},
		{"TLS to the plain port", []byte("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"), 400, true},
	}
}()

// badBody sends one bad request and checks the refusal; when the server
// keeps the connection, a GET /health on it must still answer 200.
func badBody(r *rand.Rand, addr string) error {
	b := badRequests[r.IntN(len(badRequests))]
	c, err := dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write(b.raw); err != nil {
		return err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", b.name, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("%s: body: %w", b.name, err)
	}
	if resp.StatusCode != b.status {
		return fmt.Errorf("%s: status %d, want %d: %.200s", b.name, resp.StatusCode, b.status, body)
	}
	if resp.Close != b.closes {
		return fmt.Errorf("%s: Connection: close is %t, want %t", b.name, resp.Close, b.closes)
	}
	if b.closes {
		// The server must close: EOF (or a reset) before the deadline.
		if _, err := br.ReadByte(); err == nil {
			return fmt.Errorf("%s: bytes after a closing refusal", b.name)
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return fmt.Errorf("%s: connection left open after Connection: close", b.name)
		}
		return nil
	}
	if _, err := c.Write(request(http.MethodGet, "/health", "", false)); err != nil {
		return fmt.Errorf("%s: health after: %w", b.name, err)
	}
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		return fmt.Errorf("%s: health after: %w", b.name, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: health after: status %d", b.name, resp.StatusCode)
	}
	return nil
}
