package netio_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra/internal/uring"
	"github.com/vajra-go/vajra/netio"
)

// needRing skips where the kernel refuses io_uring (the fallback has its
// own test, which runs everywhere), or fails with VAJRA_REQUIRE_IO_URING
// set (.ci/run sets it on a kernel that has io_uring).
func needRing(t *testing.T) {
	t.Helper()
	if err := uring.Probe(); err != nil {
		if os.Getenv("VAJRA_REQUIRE_IO_URING") != "" {
			t.Fatalf("io_uring unavailable and VAJRA_REQUIRE_IO_URING is set: %v", err)
		}
		t.Skipf("io_uring unavailable here: %v", err)
	}
}

func streamBody(tokens int) string {
	return fmt.Sprintf(`{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":%d,"ignore_eos":true,"stream":true}`, tokens)
}

// openStreams starts n streamed requests of tokens each on their own
// connections (one loop, so that one wake carries many connections), and
// returns readers positioned after each response head. It dials itself
// rather than through rawStream: a receive buffer fixed after the request
// is sent no longer bounds the window (autotuning has grown it), and the
// stalled-reader test then sees no short send at all.
func openStreams(t *testing.T, addr string, n, tokens int, rcvbuf int) []*bufio.Reader {
	t.Helper()
	rs := make([]*bufio.Reader, n)
	for i := range rs {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if rcvbuf > 0 {
			_ = c.(*net.TCPConn).SetReadBuffer(rcvbuf)
		}
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		body := streamBody(tokens)
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		rs[i] = bufio.NewReader(c)
	}
	return rs
}

// readStream reads one response to its end and checks it is whole: a 200
// head, every token's event in order, the usage-free end and [DONE].
func readStream(t *testing.T, i int, r *bufio.Reader, tokens int) {
	t.Helper()
	head, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "HTTP/1.1 200") {
		t.Fatalf("stream %d: head %q, %v", i, head, err)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream %d: head cut: %v", i, err)
		}
		if line == "\r\n" {
			break
		}
	}
	got, done, errs := readEvents(t, r, nil)
	if got != tokens || !done || errs != 0 {
		t.Fatalf("stream %d: %d tokens of %d, [DONE] %v, %d errors", i, got, tokens, done, errs)
	}
}

// TestBatchedSendsDeliverEveryByte: 64 streams on one loop, through
// io_uring and through write(2): every stream arrives whole, and the
// metrics say which path ran and that io_uring carried several
// connections' sends per submit.
func TestBatchedSendsDeliverEveryByte(t *testing.T) {
	for _, mode := range []string{netio.IOUringOn, netio.IOUringOff} {
		t.Run(mode, func(t *testing.T) {
			if mode == netio.IOUringOn {
				needRing(t)
			}
			srv := startServer(t, 2*time.Millisecond, func(o *netio.Options) {
				o.Loops = 1
				o.IOUring = mode
			})
			const streams, tokens = 64, 50
			rs := openStreams(t, srv.addr, streams, tokens, 0)
			for i, r := range rs {
				readStream(t, i, r, tokens)
			}
			mfs := scrape(t, srv.addr)
			loops, submits, sends := value(mfs, "vajra_io_uring_event_loops"), value(mfs, "vajra_io_uring_submits_total"), value(mfs, "vajra_io_uring_sends_total")
			switch mode {
			case netio.IOUringOn:
				if loops != 1 || submits == 0 || sends <= submits {
					t.Fatalf("io_uring: %v loops, %v submits, %v sends: want 1 loop and batches of more than one send", loops, submits, sends)
				}
			case netio.IOUringOff:
				if loops != 0 || submits != 0 || sends != 0 {
					t.Fatalf("write(2): %v loops, %v submits, %v sends: want none through io_uring", loops, submits, sends)
				}
			}
		})
	}
}

// TestBatchedSendsStalledReaders: clients that read nothing until their
// engine sessions finished make the batched sends come back short, then
// EAGAIN; the rest must go through gnet's buffer, behind what the socket
// took, and later batches must not pass it. Every byte arrives, in order.
func TestBatchedSendsStalledReaders(t *testing.T) {
	needRing(t)
	srv := startServer(t, 0, func(o *netio.Options) { // ITL 0: as fast as the engine can go
		o.Loops = 1
		o.IOUring = netio.IOUringOn
		o.MaxOutboundBytes = 64 << 20 // stalled, not slow consumers
	})
	// About 9 MB each, beyond what the kernel buffers: the client's
	// receive buffer is fixed at 256 KiB (the kernel doubles it), the
	// server's send buffer grows to tcp_wmem's 4 MB at most. (A receive
	// buffer of a few KiB would show a loopback TCP stall of its own: the
	// window never reopens by a full 64 KiB segment, and the sender sits
	// in its persist timer.)
	const streams, tokens = 8, 60000
	rs := openStreams(t, srv.addr, streams, tokens, 256<<10)
	for range streams {
		select {
		case res := <-srv.eng.finals:
			if res.Err != nil {
				t.Fatalf("engine session ended with %v", res.Err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the engine sessions did not finish")
		}
	}
	for i, r := range rs {
		readStream(t, i, r, tokens)
	}
	mfs := scrape(t, srv.addr)
	if v := value(mfs, "vajra_slow_consumer_aborts_total"); v != 0 {
		t.Fatalf("%v slow-consumer aborts", v)
	}
	if value(mfs, "vajra_io_uring_sends_total") <= value(mfs, "vajra_io_uring_submits_total") {
		t.Fatal("no batch carried more than one send")
	}
}

// TestIOUringFallback: where io_uring is refused (an old kernel,
// kernel.io_uring_disabled, a seccomp filter), auto serves with write(2)
// and on refuses to start; an unknown mode is refused at New.
func TestIOUringFallback(t *testing.T) {
	restore := netio.SetRingProbe(func() error { return errors.New("io_uring_setup: operation not permitted") })
	defer restore()

	srv := startServer(t, 0, func(o *netio.Options) { o.Loops = 1 })
	rs := openStreams(t, srv.addr, 2, 5, 0)
	for i, r := range rs {
		readStream(t, i, r, 5)
	}
	if v := value(scrape(t, srv.addr), "vajra_io_uring_event_loops"); v != 0 {
		t.Fatalf("auto without io_uring: %v loops on io_uring", v)
	}

	opts := netio.Options{Addr: "127.0.0.1:0", Models: []string{modelName}, Sessions: srv.sessions, Engine: srv.eng, IOUring: netio.IOUringOn}
	n, err := netio.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err == nil || !strings.Contains(err.Error(), "io-uring on") {
		if err == nil {
			_ = n.Stop(context.Background())
		}
		t.Fatalf("Start with --io-uring on and no io_uring: %v, want an error", err)
	}

	opts.IOUring = "sometimes"
	if _, err := netio.New(opts); err == nil {
		t.Fatal("New accepted io-uring mode \"sometimes\"")
	}
}
