package netio

import (
	"time"

	"github.com/vajra-go/vajra/codegen"
)

// Stream keep-alives. A proxy or load balancer with a short idle timeout
// drops a stream that sends nothing for a while: a long prefill, a request
// in the engine's waiting queue, a model that thinks before it writes. So
// a stream that has sent nothing for Options.StreamKeepalive gets a
// keep-alive, in the stream's dialect and transport framing:
//
//   - OpenAI routes (chat, completions, Responses): the SSE comment line
//     ": keep-alive\n\n", which every SSE parser skips (WHATWG HTML
//     §9.2.6: a line starting with a colon is ignored);
//   - Anthropic Messages: the ping event Anthropic itself sends,
//     "event: ping\ndata: {\"type\":\"ping\"}\n\n", which the SDKs skip;
//
// each as one HTTP/1.1 chunk, or bare on an HTTP/1.0 close-delimited body;
// and a WebSocket connection gets an empty ping frame (ws_conn.go sets it
// as the connection's keep-alive frame at the 101).
//
// The loop writes them, never a session: nothing is added per token. The
// per-token cost is one loop-only store (conn.wrote, in flushOutbox); the
// sweep (timeouts.go), which runs every keepaliveSweep, counts the sweeps
// since a connection last wrote and, at keepaliveSweeps of them, queues a
// keep-alive. It does so only while the exchange's stream head is out and
// its end is not (outbox.keepalive is set by StartStream and cleared by
// the exchange's end, under the outbox lock), and only when nothing is
// pending: the outbox only ever holds whole frames, so a keep-alive
// appended to an empty one lands between two events, never inside one,
// never after the last chunk, and never on a response that is not a stream.
//
// A stream silent for K therefore gets its keep-alive after between K and
// K plus one sweep period of silence (the sweep counts whole periods from
// the first sweep after the last write), and one every K (rounded up to
// whole periods) while the silence lasts. None is added while the socket
// still holds unsent bytes: the client is not reading, which is the
// slow-consumer limit's business.
//
// A request parked in the admission queue has no head out, and netio may
// not write one before the body is validated; past the keep-alive period
// its session starts held (admission.go), writes the head after
// validation, and from then on the sweep keeps it alive like any stream.

// DefaultStreamKeepalive is what `vajra serve` sets: well under the 30 to
// 60 s idle timeouts of common proxies and load balancers (nginx's
// proxy_read_timeout is 60 s, AWS ALB's idle timeout 60 s, Cloudflare's
// 100 s), and rare enough to cost nothing.
const DefaultStreamKeepalive = 15 * time.Second

// Keep-alive frames, rendered once: the SSE comment and the Anthropic ping,
// raw and in a chunk. The ping is written by the same codegen event writer
// as the Messages formatter's ping after message_start.
var (
	keepaliveComment        = []byte(": keep-alive\n\n")
	keepaliveCommentChunked = frame(codegen.FramingChunked, func(dst []byte) []byte { return append(dst, keepaliveComment...) })
	keepalivePing           = ping(codegen.FramingRaw)
	keepalivePingChunked    = ping(codegen.FramingChunked)
)

// frame wraps what body appends in one transport frame of f.
func frame(f codegen.Framing, body func([]byte) []byte) []byte {
	dst, mark := codegen.BeginFrame(nil, f)
	return codegen.EndFrame(body(dst), f, mark)
}

// ping renders Anthropic's ping event in framing f.
func ping(f codegen.Framing) []byte {
	dst, mark := codegen.BeginEvent(nil, f, "ping")
	return codegen.EndEvent(dst, f, mark)
}

// keepaliveFrame is the keep-alive of a stream on a route of dialect d,
// chunked or raw.
func keepaliveFrame(d dialect, chunked bool) []byte {
	switch {
	case d == dialectAnthropic && chunked:
		return keepalivePingChunked
	case d == dialectAnthropic:
		return keepalivePing
	case chunked:
		return keepaliveCommentChunked
	}
	return keepaliveComment
}

// keepaliveSweep is the sweep's period when keep-alives are on: half the
// keep-alive period, so that a keep-alive comes at most half a period
// late, but never more often than once a second, the sweep's own period
// for the other timeouts (the default keep-alive, 15 s, leaves it there).
func keepaliveSweep(k time.Duration) time.Duration {
	return min(sweepPeriod, max(k/2, time.Millisecond))
}

// keepaliveSweeps is how many sweep periods of silence make a keep-alive
// period: k rounded up to whole sweeps.
func keepaliveSweeps(k time.Duration) uint32 {
	p := keepaliveSweep(k)
	return uint32((k + p - 1) / p)
}

// keepalive counts one more sweep of silence on c's exchange and, when the
// stream has been silent for the keep-alive period, writes it a
// keep-alive. sweeps is keepaliveSweeps of the configured period.
// Loop-only (the sweep).
func (c *conn) keepalive(sweeps uint32) {
	if c.wrote {
		c.wrote, c.quiet = false, 0
		return
	}
	if c.quiet++; c.quiet < sweeps || c.gc.OutboundBuffered() > 0 {
		// Not silent long enough, or the client has not even read what
		// was written (the slow-consumer limit's business): nothing to add.
		return
	}
	o := &c.out
	o.mu.Lock()
	if o.keepalive == nil || len(o.pending) > 0 || o.end != endNone || o.closed {
		// No stream head out yet, or its end queued, or bytes on their
		// way anyway: nothing to add.
		o.mu.Unlock()
		return
	}
	o.pending = append(o.pending, o.keepalive...)
	o.mu.Unlock()
	c.srv.keepalives.Add(1)
	c.flushOutbox()
	c.wrote, c.quiet = false, 0
}
