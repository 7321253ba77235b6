package netio

import (
	"fmt"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/vajra-go/vajra/internal/uring"
)

// Batched sends (--io-uring): when a loop answers its doorbell, the pending
// bytes of every ready connection leave in one io_uring_enter(2) instead of
// one write(2) per connection.
//
// Only bytes that gnet would have written at once go through the ring: a
// connection whose gnet outbound buffer holds unsent bytes (its socket was
// full) gets its new bytes through gnet, behind them, so a connection's bytes
// never take two paths at the same time. Every send of a batch has completed
// when the ring's Submit returns (sends carry MSG_DONTWAIT, so a full socket
// answers with a short count or EAGAIN instead of being parked in the
// kernel); what did not fit is handed to gnet, which buffers it and waits for
// EPOLLOUT exactly as after a short write(2). So between two batches nothing
// is in flight, and gnet's own writes (inline responses, keep-alives, close
// frames) cannot interleave with a batch.
//
// A batch of one connection is written with write(2): one system call
// either way, and gnet's is the shorter path.

// Send paths (Options.IOUring).
const (
	IOUringAuto = "auto" // io_uring where it works, else write(2)
	IOUringOn   = "on"   // io_uring, or Start fails
	IOUringOff  = "off"  // write(2)
)

// sendBatchEntries bounds one batch: above the connections a loop streams to
// in one engine step at the scale one core carries (a few thousand at 20 ms
// cost one submit per 1,024), while its rings stay small (96 KiB per loop).
const sendBatchEntries = 1024

// notSent marks a batched send that got no completion (the ring failed).
const notSent = -1 << 31

// probeRing checks that batched sends work here (a variable for tests).
var probeRing = uring.Probe

// chooseSendPath settles the send path at Start (New checked the mode).
func (s *Server) chooseSendPath() error {
	if s.opts.IOUring == IOUringOff {
		s.log.Info("send path: write(2) (--io-uring off)")
		return nil
	}
	if err := probeRing(); err != nil {
		if s.opts.IOUring == IOUringOn {
			return fmt.Errorf("netio: --io-uring on: %w", err)
		}
		s.log.Info("send path: write(2) (io_uring unavailable)", zap.Error(err))
		return nil
	}
	s.useRing = true
	s.log.Info("send path: io_uring, one submit per event loop wake")
	return nil
}

// sendBatch is a loop's batch of sends. Loop-only, but for the counters.
type sendBatch struct {
	l     *loop
	ring  *uring.Ring
	items []batchItem
	res   []uring.Completion
}

// batchItem is one connection's bytes in a batch, and what to do after.
type batchItem struct {
	c   *conn
	buf []byte
	end endKind
	res int32
}

// newSendBatch gives l a ring, or returns nil (l writes with write(2)).
func (s *Server) newSendBatch(l *loop) *sendBatch {
	if !s.useRing {
		return nil
	}
	r, err := uring.New(sendBatchEntries)
	if err != nil {
		s.log.Warn("io_uring: this event loop sends with write(2)", zap.Error(err))
		s.ringLoops.Add(-1)
		return nil
	}
	n := r.Entries()
	return &sendBatch{l: l, ring: r, items: make([]batchItem, 0, n), res: make([]uring.Completion, 0, n)}
}

// add takes c's pending bytes into the batch, or writes them through gnet
// when they must follow bytes gnet still holds. Loop-only.
func (b *sendBatch) add(c *conn) {
	buf, end, ok := c.takeOutbox()
	if !ok {
		return
	}
	if b.ring == nil || len(buf) == 0 || c.gc.OutboundBuffered() > 0 {
		c.writeAndFinish(buf, end)
		c.resumeWS()
		return
	}
	b.items = append(b.items, batchItem{c: c, buf: buf, end: end, res: notSent})
	if len(b.items) == cap(b.items) {
		b.flush()
	}
}

// flush sends the batch and finishes each connection's part: what did not
// fit goes to gnet, a failed socket closes, then the exchange's end is acted
// on, in the order the connections were queued. Loop-only.
func (b *sendBatch) flush() {
	items := b.items
	switch len(items) {
	case 0:
		return
	case 1:
		it := items[0]
		items[0] = batchItem{}
		b.items = items[:0]
		it.c.writeAndFinish(it.buf, it.end)
		it.c.resumeWS()
		return
	}
	for i := range items {
		it := &items[i]
		// Each connection is in the batch once: its Fd stays its own
		// until its item is finished below.
		_ = b.ring.Send(it.c.gc.Fd(), it.buf, uint64(i))
		it.c.srv.bytesWritten.Add(uint64(len(it.buf)))
	}
	res, err := b.ring.Submit(b.res[:0])
	for _, r := range res {
		items[r.Tag].res = r.Res
	}
	b.res = res[:0]
	b.l.ringSubmits.Add(1)
	b.l.ringSends.Add(uint64(len(items)))
	if err != nil {
		// Sends without a result are written through gnet below; the
		// ring is closed first, so none of them can still go out.
		b.l.srv.log.Warn("io_uring: submit failed; this event loop sends with write(2) from now on", zap.Error(err))
		b.close()
		b.l.batch = nil
		b.l.srv.ringLoops.Add(-1)
	}
	for i := range items {
		it := items[i]
		items[i] = batchItem{} // no buffer or connection kept past the batch
		c, buf, r := it.c, it.buf, it.res
		switch {
		case int(r) == len(buf):
		case r >= 0:
			_, _ = c.gc.Write(buf[r:]) // the socket is full: gnet holds the rest
		case r == -int32(unix.EAGAIN) || r == notSent:
			_, _ = c.gc.Write(buf)
		default:
			// The socket failed (EPIPE, ECONNRESET): gnet closes a
			// connection whose write fails, and so does this path.
			c.closing = true
			_ = c.gc.Close()
			continue
		}
		if c.afterWrite(0) {
			c.finish(it.end)
		}
		c.resumeWS()
	}
	b.items = items[:0]
}

// close releases the ring (the loop stopped, or the ring failed).
func (b *sendBatch) close() {
	if b.ring != nil {
		_ = b.ring.Close()
		b.ring = nil
	}
}
