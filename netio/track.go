package netio

import (
	"bytes"
	"strconv"
	"time"
	"unsafe"

	"go.uber.org/zap"

	"github.com/vajra-go/vajra/actors"
	"github.com/vajra-go/vajra/httpparse"
)

// tracked is the actors.Conn a session (or off-loop route) gets: the
// exchange, plus what is recorded once per request when it ends: the
// response status per route, one access-log line, the CORS header, and
// Retry-After on an overload answer. Only the first and last calls of an
// exchange pass through anything but the exchange: Send goes straight on.
// Calls come from one goroutine at a time (the session's).
type tracked struct {
	x      exchange
	srv    *Server
	rt     *route
	start  time.Time
	cors   []byte // Access-Control-Allow-Origin lines, or nil
	status int
	ended  bool
	worker []byte // the X-Vajra-Worker value the session sent, if any

	// req is the session's Request and ridBuf the bytes of the request
	// id, kept here so that neither costs an allocation of its own: the
	// session holds t for as long as it holds either.
	req    actors.Request
	ridBuf [ridBufLen]byte
}

// ridBufLen holds a generated request id (at most 21 bytes) or a client's
// UUID (36); a longer client id is copied to the heap.
const ridBufLen = 40

// setRequestID returns the request's id (requestID), formatted into
// t.ridBuf when it fits. The string is a view of bytes that are never
// written again (t is not reused), so it is as immutable as a copy.
func (t *tracked) setRequestID(req *httpparse.Request) string {
	b := appendRequestID(t.ridBuf[:0], req)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// Respond implements actors.Conn.
func (t *tracked) Respond(status int, contentType string, headers, body []byte) {
	t.status = status
	t.worker = workerOf(headers)
	headers = t.headers(status, headers)
	t.end()
	t.x.Respond(status, contentType, headers, body)
}

// StartStream implements actors.Conn.
func (t *tracked) StartStream(contentType string, headers []byte) bool {
	t.status = 200
	t.worker = workerOf(headers)
	return t.x.StartStream(contentType, t.headers(200, headers))
}

// Send implements actors.Conn.
func (t *tracked) Send(p []byte) { t.x.Send(p) }

// SendDeferred implements actors.DeferredSender.
func (t *tracked) SendDeferred(p []byte) actors.Waker { return t.x.SendDeferred(p) }

// EndStream implements actors.Conn.
func (t *tracked) EndStream(last []byte) {
	t.end()
	t.x.EndStream(last)
}

// Abandon implements actors.Conn.
func (t *tracked) Abandon() {
	t.end()
	t.x.Abandon()
}

// refuseQueued answers a request that waited in the admission queue past
// MaxQueueWait: 429 (529 on Anthropic routes) with the retry hints, as a
// full queue answers. Loop-only (the sweep); the request's session never
// started (a held session answers its own), so nothing else calls t.
func (t *tracked) refuseQueued() {
	status := 429
	if t.rt.dialect == dialectAnthropic {
		status = 529
	}
	body := appendErrorBody(nil, t.rt.dialect, status, actors.QueueTimeoutCode, actors.QueueTimeoutMessage)
	t.Respond(status, contentTypeJSON, nil, body)
}

// headers adds the CORS lines and, on an overload answer, the retry hints.
func (t *tracked) headers(status int, h []byte) []byte {
	retry := status == 429 || status == 529
	if t.cors == nil && !retry {
		return h
	}
	out := make([]byte, 0, len(h)+len(t.cors)+len(t.srv.retryHeaders))
	out = append(out, h...)
	out = append(out, t.cors...)
	if retry {
		out = append(out, t.srv.retryHeaders...)
	}
	return out
}

// end records the exchange, once. It runs before the exchange's end is
// handed to the loop: once the loop has written the last byte, a client may
// read /metrics at once and must find this request counted.
func (t *tracked) end() {
	if t.ended {
		return
	}
	t.ended = true
	status := t.status
	if status == 0 {
		status = 499 // abandoned before any status: nginx's "client closed request"
	}
	t.srv.routeMetrics[t.rt].Inc(status)
	t.srv.logAccess(t.rt, t.x.requestID, status, t.start, nil, nil, t.worker)
}

// logAccess writes one access-log line, if the sampled logger wants it.
// method and path are only set on the loop (inline routes); sessions log
// the route's name. Allocates only for a line that is written.
func (s *Server) logAccess(rt *route, requestID string, status int, start time.Time, method, path, worker []byte) {
	if s.access == nil {
		return
	}
	ce := s.access.Check(zap.InfoLevel, "request")
	if ce == nil {
		return
	}
	fields := []zap.Field{
		zap.String("route", rt.name),
		zap.Int("status", status),
		zap.Duration("duration", time.Since(start)),
	}
	if requestID != "" {
		fields = append(fields, zap.String("request_id", requestID))
	}
	if method != nil {
		fields = append(fields, zap.ByteString("method", method), zap.ByteString("path", path))
	}
	if worker != nil {
		fields = append(fields, zap.ByteString("worker", worker))
	}
	ce.Write(fields...)
}

// appendRetryHeaders renders the retry hints of an overload answer:
// Retry-After in whole seconds (RFC 9110 §10.2.3) and retry-after-ms, which
// the Stainless SDKs (openai-go, anthropic-sdk-go, the JS SDKs) prefer.
func appendRetryHeaders(dst []byte, d time.Duration) []byte {
	secs := int64((d + time.Second - 1) / time.Second)
	dst = append(dst, "Retry-After: "...)
	dst = strconv.AppendInt(dst, max(secs, 1), 10)
	dst = append(dst, "\r\nretry-after-ms: "...)
	dst = strconv.AppendInt(dst, max(d.Milliseconds(), 1), 10)
	return append(dst, "\r\n"...)
}

// workerHeader is the header line the session sends to name the remote
// worker of a request (actors.Config.WorkerHeader).
const workerHeader = "X-Vajra-Worker: "

// workerOf is the X-Vajra-Worker value in headers (a view of them), or
// nil: the access log's worker field.
func workerOf(headers []byte) []byte {
	i := bytes.Index(headers, []byte(workerHeader))
	if i < 0 {
		return nil
	}
	v := headers[i+len(workerHeader):]
	if j := bytes.IndexByte(v, '\r'); j >= 0 {
		v = v[:j]
	}
	return v
}
