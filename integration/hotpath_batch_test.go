package integration_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/internal/uring"
	"github.com/vajra-go/vajra/internal/wiretest"
)

// TestBatchedTokenAllocs holds the per-token claim on the batched send
// path: with io_uring live, a step that gives a token to each of 16
// streams on one loop leaves in batched sends (one submit carrying several
// connections) and allocates nothing per token.
func TestBatchedTokenAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates; make test runs the Allocs tests again without -race")
	}
	if err := uring.Probe(); err != nil {
		t.Skipf("io_uring unavailable here: %v", err)
	}
	const streams = 16
	eng := &handEngine{started: make(chan handSession, 1)}
	srv, first := hotServerOf(t, func(c *vajra.Config) {
		c.Engine = eng
		c.IOUring = "on"
	})
	addr := srv.Addr().String()
	type stream struct {
		hs     handSession
		r      *bufio.Reader
		frames []byte
	}
	ss := make([]stream, streams)
	body := `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"stream":true}`
	for i := range ss {
		conn := first
		if i > 0 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			conn = c
		}
		fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		ss[i].hs = <-eng.started
		ss[i].r = bufio.NewReaderSize(conn, 64<<10)
		ss[i].frames = make([]byte, 0, 1024)
		for {
			line, err := ss[i].r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if line == "\r\n" {
				break
			}
		}
	}
	tok := []byte(" hello")
	ids := []int{42}
	rbuf := make([]byte, 4096)
	var d engine.Delta
	first16 := true
	step := func() {
		// One engine step: every stream's token is delivered, then read.
		for i := range ss {
			d = engine.Delta{Text: tok, TokenIDs: ids, First: first16}
			ss[i].frames = ss[i].hs.req.Formatter.AppendDelta(ss[i].frames[:0], &d)
			ss[i].hs.sink.Deliver(ss[i].frames, nil)
		}
		first16 = false
		for i := range ss {
			if _, err := io.ReadFull(ss[i].r, rbuf[:len(ss[i].frames)]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 200 { // warm every buffer up to its steady size
		step()
	}
	mfs := wiretest.Scrape(t, addr)
	submits0, sends0 := wiretest.Value(mfs, "vajra_io_uring_submits_total"), wiretest.Value(mfs, "vajra_io_uring_sends_total")
	got := processAllocsPerRun(500, step) / streams
	mfs = wiretest.Scrape(t, addr)
	submits, sends := wiretest.Value(mfs, "vajra_io_uring_submits_total")-submits0, wiretest.Value(mfs, "vajra_io_uring_sends_total")-sends0
	t.Logf("%.4f allocations per token; %v sends in %v submits", got, sends, submits)
	if got > maxTokenAllocs {
		t.Errorf("a streamed token allocates %.4f times on the batched path, want 0 (at most %v)", got, maxTokenAllocs)
	}
	if submits == 0 || sends <= submits {
		t.Errorf("%v sends in %v submits: no batch carried more than one connection", sends, submits)
	}
}
