package httpparse

import (
	"strconv"
	"time"

	"github.com/vajra-go/vajra/codegen"
)

// statusText holds the reason phrases of RFC 9110 section 15 plus the codes
// of other RFCs a front door can send (429, 431).
var statusText = map[int]string{
	100: "Continue", 101: "Switching Protocols",
	200: "OK", 201: "Created", 202: "Accepted", 203: "Non-Authoritative Information",
	204: "No Content", 205: "Reset Content", 206: "Partial Content",
	300: "Multiple Choices", 301: "Moved Permanently", 302: "Found", 303: "See Other",
	304: "Not Modified", 307: "Temporary Redirect", 308: "Permanent Redirect",
	400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden",
	404: "Not Found", 405: "Method Not Allowed", 406: "Not Acceptable",
	407: "Proxy Authentication Required", 408: "Request Timeout", 409: "Conflict",
	410: "Gone", 411: "Length Required", 412: "Precondition Failed",
	413: "Content Too Large", 414: "URI Too Long", 415: "Unsupported Media Type",
	416: "Range Not Satisfiable", 417: "Expectation Failed", 421: "Misdirected Request",
	422: "Unprocessable Content", 426: "Upgrade Required", 428: "Precondition Required",
	429: "Too Many Requests", 431: "Request Header Fields Too Large",
	500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway",
	503: "Service Unavailable", 504: "Gateway Timeout", 505: "HTTP Version Not Supported",
}

// StatusText returns the reason phrase for code, or "" if unknown.
//
// Safe for concurrent use.
func StatusText(code int) string { return statusText[code] }

// AppendStatusLine appends "HTTP/1.<minor> <status> <reason>\r\n". minor is
// 0 or 1 (RFC 9110 section 6.2: a server normally answers 1.1 even to a
// 1.0 request); status must be 100..999. An unknown status gets an empty
// reason phrase, which RFC 9112 section 4 allows.
//
// Safe for concurrent use.
func AppendStatusLine(dst []byte, minor, status int) []byte {
	dst = append(dst, "HTTP/1.0 "...)
	if minor == 1 {
		dst[len(dst)-2] = '1'
	}
	dst = append(dst, byte('0'+status/100%10), byte('0'+status/10%10), byte('0'+status%10), ' ')
	dst = append(dst, statusText[status]...)
	return append(dst, '\r', '\n')
}

// AppendHeader appends "name: value\r\n". name must be a token (it comes
// from our code). Bytes of value that are not allowed in a field value (CR,
// LF, NUL and other controls except HTAB) are replaced by SP, so an
// upstream value cannot inject a header (net/http does the same).
//
// Safe for concurrent use.
func AppendHeader[N, V ~string | ~[]byte](dst []byte, name N, value V) []byte {
	dst = append(dst, name...)
	dst = append(dst, ':', ' ')
	start := len(dst)
	dst = append(dst, value...)
	for i := start; i < len(dst); i++ {
		if !isValue[dst[i]] {
			dst[i] = ' '
		}
	}
	return append(dst, '\r', '\n')
}

// AppendContentLength appends "Content-Length: n\r\n".
//
// Safe for concurrent use.
func AppendContentLength(dst []byte, n int64) []byte {
	dst = append(dst, "Content-Length: "...)
	dst = strconv.AppendInt(dst, n, 10)
	return append(dst, '\r', '\n')
}

// AppendDate appends "Date: <IMF-fixdate>\r\n" for t (RFC 9110 section
// 5.6.7 and 6.6.1).
//
// Safe for concurrent use.
func AppendDate(dst []byte, t time.Time) []byte {
	dst = append(dst, "Date: "...)
	dst = t.UTC().AppendFormat(dst, "Mon, 02 Jan 2006 15:04:05 GMT")
	return append(dst, '\r', '\n')
}

// AppendChunkHeader appends the size line of a chunk of n > 0 bytes
// ("<hex>\r\n"). The caller appends the n data bytes and then AppendCRLF.
// n == 0 would be the last-chunk: use AppendLastChunk.
//
// Safe for concurrent use.
func AppendChunkHeader(dst []byte, n int) []byte {
	dst = strconv.AppendUint(dst, uint64(n), 16)
	return append(dst, '\r', '\n')
}

// AppendCRLF appends "\r\n" (the end of chunk data, or of a header section).
//
// Safe for concurrent use.
func AppendCRLF(dst []byte) []byte { return append(dst, '\r', '\n') }

// AppendChunk appends data as one chunk: size line, data, CRLF. Empty data
// appends nothing, because a zero-size chunk would end the body.
//
// Safe for concurrent use.
func AppendChunk(dst, data []byte) []byte {
	if len(data) == 0 {
		return dst
	}
	dst = AppendChunkHeader(dst, len(data))
	dst = append(dst, data...)
	return append(dst, '\r', '\n')
}

// AppendLastChunk appends the last-chunk and an empty trailer section,
// "0\r\n\r\n", which ends a chunked body.
//
// Safe for concurrent use.
func AppendLastChunk(dst []byte) []byte { return append(dst, "0\r\n\r\n"...) }

// Canned error responses. Each is a complete HTTP/1.1 response with
// Connection: close and an OpenAI-shaped JSON body:
//
//	{"error":{"message":"...","type":"invalid_request_error","param":null,"code":"..."}}
//
// They carry no Date header (RFC 9110 section 6.6.1 asks for one from a
// server with a clock): use AppendErrorResponse where a clock is at hand.
var (
	cannedByErr    map[error][]byte
	cannedByStatus map[int][]byte
	bodyByErr      map[error][]byte
	bodyByStatus   map[int][]byte
)

// statusCodes are the generic codes of ErrorResponse.
var statusCodes = map[int]struct{ code, message string }{
	400: {"bad_request", "the request is malformed"},
	408: {"request_timeout", "the request was not received in time"},
	413: {"request_too_large", "the request body is larger than this server accepts"},
	414: {"uri_too_long", "the request line is longer than this server accepts"},
	415: {"unsupported_media_type", "the request body's media type is not supported"},
	417: {"expectation_failed", "the only supported expectation is 100-continue"},
	431: {"request_header_fields_too_large", "the request header section is larger than this server accepts"},
	500: {"internal_error", "internal error"},
	501: {"not_implemented", "the request uses a feature this server does not implement"},
	505: {"http_version_not_supported", "only HTTP/1.0 and HTTP/1.1 are supported"},
}

func init() {
	cannedByErr = make(map[error][]byte, len(errTable))
	bodyByErr = make(map[error][]byte, len(errTable))
	for err, info := range errTable {
		body := errorBody(info.status, info.code, info.message)
		bodyByErr[err] = body
		cannedByErr[err] = appendErrorResponse(nil, info.status, body, time.Time{})
	}
	cannedByStatus = make(map[int][]byte, len(statusCodes))
	bodyByStatus = make(map[int][]byte, len(statusCodes))
	for status, sc := range statusCodes {
		body := errorBody(status, sc.code, sc.message)
		bodyByStatus[status] = body
		cannedByStatus[status] = appendErrorResponse(nil, status, body, time.Time{})
	}
}

// errorBody renders the OpenAI-shaped JSON error body. message and code are
// fixed ASCII text from the tables above, never client bytes.
func errorBody(status int, code, message string) []byte {
	typ := "invalid_request_error"
	if status >= 500 && status != 501 && status != 505 {
		typ = "server_error"
	}
	b := []byte(`{"error":{"message":`)
	b = codegen.AppendJSONStringS(b, message)
	b = append(b, `,"type":`...)
	b = codegen.AppendJSONStringS(b, typ)
	b = append(b, `,"param":null,"code":`...)
	b = codegen.AppendJSONStringS(b, code)
	return append(b, "}}"...)
}

func appendErrorResponse(dst []byte, status int, body []byte, now time.Time) []byte {
	dst = AppendStatusLine(dst, 1, status)
	if !now.IsZero() {
		dst = AppendDate(dst, now)
	}
	dst = append(dst, "Content-Type: application/json\r\n"...)
	dst = AppendContentLength(dst, int64(len(body)))
	dst = append(dst, "Connection: close\r\n\r\n"...)
	return append(dst, body...)
}

// ErrorResponse returns the canned response for status (400, 408, 413, 414,
// 415, 417, 431, 500, 501, 505) with a generic code, or nil for other
// statuses. The bytes are shared: do not modify them.
//
// Safe for concurrent use.
func ErrorResponse(status int) []byte { return cannedByStatus[status] }

// Response returns the canned response for e: its status, and a body whose
// code is e.Code. The bytes are shared: do not modify them.
//
// Safe for concurrent use.
func (e *Error) Response() []byte {
	if b, ok := cannedByErr[e.Err]; ok {
		return b
	}
	return cannedByStatus[400]
}

// AppendErrorResponse appends the response for e with a Date header for now
// (RFC 9110 section 6.6.1). It is the same as e.Response() plus Date.
//
// Safe for concurrent use.
func AppendErrorResponse(dst []byte, e *Error, now time.Time) []byte {
	body, ok := bodyByErr[e.Err]
	status := e.Status
	if !ok {
		body, status = bodyByStatus[400], 400
	}
	return appendErrorResponse(dst, status, body, now)
}
