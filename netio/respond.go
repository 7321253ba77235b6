package netio

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/vajra-go/vajra/httpparse"
)

const (
	contentTypeJSON = "application/json"
	contentTypeSSE  = "text/event-stream"
)

// appendResponse appends a complete response with a Content-Length body.
// headers are extra header lines, each ending in CRLF.
func appendResponse(dst []byte, minor, status int, contentType, requestID string, headers, body []byte, closeConn bool) []byte {
	dst = appendHead(dst, minor, status, contentType, requestID, headers, closeConn)
	dst = httpparse.AppendContentLength(dst, int64(len(body)))
	dst = append(dst, "\r\n"...)
	return append(dst, body...)
}

// appendStreamHead appends the head of a streamed 200 response: chunked on
// HTTP/1.1, close-delimited otherwise (RFC 9112 §6.3 rule 8).
func appendStreamHead(dst []byte, minor int, contentType, requestID string, headers []byte, chunked, closeConn bool) []byte {
	dst = appendHead(dst, minor, 200, contentType, requestID, headers, closeConn)
	dst = append(dst, "Cache-Control: no-cache\r\n"...)
	if chunked {
		dst = append(dst, "Transfer-Encoding: chunked\r\n"...)
	}
	return append(dst, "\r\n"...)
}

func appendHead(dst []byte, minor, status int, contentType, requestID string, headers []byte, closeConn bool) []byte {
	dst = httpparse.AppendStatusLine(dst, minor, status)
	dst = append(dst, "Date: "...)
	dst = append(dst, httpDate()...)
	dst = append(dst, "\r\n"...)
	if contentType != "" {
		dst = append(dst, "Content-Type: "...)
		dst = append(dst, contentType...)
		dst = append(dst, "\r\n"...)
	}
	if requestID != "" {
		dst = append(dst, "X-Request-Id: "...)
		dst = append(dst, requestID...)
		dst = append(dst, "\r\n"...)
	}
	if closeConn {
		dst = append(dst, "Connection: close\r\n"...)
	} else if minor == 0 {
		dst = append(dst, "Connection: keep-alive\r\n"...)
	}
	return append(dst, headers...)
}

// appendParseError answers a request the parser refused. The connection
// closes after it (RFC 9112 §9.3: the framing of what follows is in doubt).
func appendParseError(dst []byte, err error) []byte {
	var pe *httpparse.Error
	if errors.As(err, &pe) {
		return httpparse.AppendErrorResponse(dst, pe, time.Now())
	}
	return append(dst, httpparse.ErrorResponse(400)...)
}

// appendRouteError answers a request refused by precheck.
func appendRouteError(dst []byte, rt *route, status, minor int, keepAlive bool) []byte {
	var msg, code string
	switch status {
	case 401:
		msg, code = "Invalid or missing API key.", "invalid_api_key"
	case 404:
		msg, code = "Unknown route.", "not_found"
	case 405:
		msg, code = "Method not allowed on this route.", "method_not_allowed"
	case 415:
		msg, code = "Content-Type must be application/json.", "unsupported_media_type"
	case 503:
		msg, code = "The server is shutting down.", "server_draining"
	default:
		msg = httpparse.StatusText(status)
	}
	return appendErrorResponse(dst, minor, status, rt.dialect, code, msg, !keepAlive || status == 503)
}

// appendOverloaded refuses a generation request for which no admission
// permit is free: 429 (OpenAI routes) or 529 overloaded_error (Anthropic
// routes, as Anthropic's API answers), with Retry-After and
// retry-after-ms, before any stream starts. Stainless SDKs retry both.
func (s *Server) appendOverloaded(dst []byte, rt *route, minor int, keepAlive bool, requestID string) []byte {
	status := 429
	if rt.dialect == dialectAnthropic {
		status = 529
	}
	body := appendErrorBody(nil, rt.dialect, status, "server_overloaded",
		"The server is at its limit of concurrent and queued requests (--max-concurrent-requests, --max-queued-requests); retry after the time in Retry-After.")
	return appendResponse(dst, minor, status, contentTypeJSON, requestID, s.retryHeaders, body, !keepAlive)
}

// appendErrorResponse appends a JSON error response in the dialect's shape.
func appendErrorResponse(dst []byte, minor, status int, d dialect, code, message string, closeConn bool) []byte {
	body := appendErrorBody(nil, d, status, code, message)
	return appendResponse(dst, minor, status, contentTypeJSON, "", nil, body, closeConn)
}

// dateCache holds the current IMF-fixdate (RFC 9110 §5.6.7), refreshed at
// most once a second: an origin server with a clock sends Date.
var dateCache atomic.Pointer[dateEntry]

type dateEntry struct {
	sec  int64
	text []byte
}

func httpDate() []byte {
	now := time.Now()
	if d := dateCache.Load(); d != nil && d.sec == now.Unix() {
		return d.text
	}
	d := &dateEntry{sec: now.Unix(), text: now.UTC().AppendFormat(nil, "Mon, 02 Jan 2006 15:04:05 GMT")}
	dateCache.Store(d)
	return d.text
}
