package httpparse

import (
	"errors"
	"strconv"
)

// Sentinel errors. Parse returns them wrapped in an *Error; compare with
// errors.Is. Every one of them means the connection's framing is in doubt:
// the server writes the matching error response (see (*Error).Response) and
// closes the connection.
var (
	ErrBareCR                = errors.New("httpparse: CR not followed by LF")
	ErrBareLF                = errors.New("httpparse: LF not preceded by CR")
	ErrMethod                = errors.New("httpparse: method is not a token")
	ErrMethodNotImplemented  = errors.New("httpparse: method not implemented")
	ErrTarget                = errors.New("httpparse: invalid request-target")
	ErrRequestLineTooLong    = errors.New("httpparse: request line too long")
	ErrVersion               = errors.New("httpparse: malformed HTTP version")
	ErrVersionNotSupported   = errors.New("httpparse: HTTP version not supported")
	ErrLeadingWhitespace     = errors.New("httpparse: whitespace between start line and first field")
	ErrObsFold               = errors.New("httpparse: obsolete line folding")
	ErrFieldName             = errors.New("httpparse: invalid field name")
	ErrSpaceBeforeColon      = errors.New("httpparse: whitespace between field name and colon")
	ErrFieldValue            = errors.New("httpparse: invalid character in field value")
	ErrHeadersTooLarge       = errors.New("httpparse: header section too large")
	ErrTooManyHeaders        = errors.New("httpparse: too many header fields")
	ErrMissingHost           = errors.New("httpparse: missing Host header")
	ErrDuplicateHost         = errors.New("httpparse: more than one Host header")
	ErrInvalidHost           = errors.New("httpparse: invalid Host header")
	ErrContentLength         = errors.New("httpparse: invalid Content-Length")
	ErrDuplicateLength       = errors.New("httpparse: more than one Content-Length")
	ErrLengthWithEncoding    = errors.New("httpparse: both Content-Length and Transfer-Encoding")
	ErrTransferEncoding      = errors.New("httpparse: invalid Transfer-Encoding")
	ErrEncodingNotImpl       = errors.New("httpparse: transfer coding not implemented")
	ErrEncodingHTTP10        = errors.New("httpparse: Transfer-Encoding in an HTTP/1.0 request")
	ErrBodyTooLarge          = errors.New("httpparse: body too large")
	ErrChunkSize             = errors.New("httpparse: invalid chunk size")
	ErrChunkExtension        = errors.New("httpparse: invalid chunk extension")
	ErrChunkExtensionTooLong = errors.New("httpparse: chunk extensions too large")
	ErrChunkOverhead         = errors.New("httpparse: too much chunked framing overhead")
	ErrChunkData             = errors.New("httpparse: chunk data not followed by CRLF")
	ErrExpectation           = errors.New("httpparse: unsupported expectation")
	ErrConnection            = errors.New("httpparse: invalid Connection header")
	ErrUpgrade               = errors.New("httpparse: invalid Upgrade header")
	ErrDataAfterClose        = errors.New("httpparse: data after a request that closes the connection")
	ErrBufferShrunk          = errors.New("httpparse: buffer shorter than the bytes already parsed")
)

// errInfo is one row of the error table: the HTTP status a server answers
// with, the stable code (used in logs, metrics and the JSON body) and the
// client-facing message. Messages are fixed text: they never contain bytes
// the client sent.
type errInfo struct {
	status  int
	code    string
	message string
}

// errTable maps every sentinel to its status, code and message. It is the
// one place that decides which status a parse failure gets.
var errTable = map[error]errInfo{
	ErrBareCR:                {400, "bare_cr", "CR must be followed by LF (RFC 9112 section 2.2)"},
	ErrBareLF:                {400, "bare_lf", "lines must end with CRLF (RFC 9112 section 2.2)"},
	ErrMethod:                {400, "invalid_method", "the request method must be a token (RFC 9110 section 9.1)"},
	ErrMethodNotImplemented:  {501, "method_not_implemented", "the request method is not implemented"},
	ErrTarget:                {400, "invalid_request_target", "the request-target is not a valid origin-form, absolute-form or asterisk-form (RFC 9112 section 3.2)"},
	ErrRequestLineTooLong:    {414, "request_line_too_long", "the request line is longer than this server accepts"},
	ErrVersion:               {400, "invalid_http_version", "the request line must end with HTTP/1.0 or HTTP/1.1 (RFC 9112 section 3)"},
	ErrVersionNotSupported:   {505, "http_version_not_supported", "only HTTP/1.0 and HTTP/1.1 are supported"},
	ErrLeadingWhitespace:     {400, "whitespace_after_start_line", "whitespace between the request line and the first header field (RFC 9112 section 2.2)"},
	ErrObsFold:               {400, "obsolete_line_folding", "header field values must not be folded (RFC 9112 section 5.2)"},
	ErrFieldName:             {400, "invalid_header_name", "a header field name is not a token or has no colon (RFC 9110 section 5.1)"},
	ErrSpaceBeforeColon:      {400, "whitespace_before_colon", "whitespace between a header field name and colon (RFC 9112 section 5.1)"},
	ErrFieldValue:            {400, "invalid_header_value", "a header field value contains a control character (RFC 9110 section 5.5)"},
	ErrHeadersTooLarge:       {431, "headers_too_large", "the header section is larger than this server accepts"},
	ErrTooManyHeaders:        {431, "too_many_headers", "the request has more header fields than this server accepts"},
	ErrMissingHost:           {400, "missing_host", "an HTTP/1.1 request must have a Host header (RFC 9112 section 3.2)"},
	ErrDuplicateHost:         {400, "duplicate_host", "a request must not have more than one Host header (RFC 9112 section 3.2)"},
	ErrInvalidHost:           {400, "invalid_host", "the Host header is not a valid uri-host[:port] (RFC 9110 section 7.2)"},
	ErrContentLength:         {400, "invalid_content_length", "Content-Length must be a decimal number (RFC 9110 section 8.6)"},
	ErrDuplicateLength:       {400, "duplicate_content_length", "a request must not have more than one Content-Length (RFC 9112 section 6.3)"},
	ErrLengthWithEncoding:    {400, "content_length_with_transfer_encoding", "a request must not have both Content-Length and Transfer-Encoding (RFC 9112 section 6.1)"},
	ErrTransferEncoding:      {400, "invalid_transfer_encoding", "chunked must be the final transfer coding, applied once (RFC 9112 section 6.3)"},
	ErrEncodingNotImpl:       {501, "transfer_encoding_not_implemented", "only the chunked transfer coding is implemented (RFC 9112 section 6.1)"},
	ErrEncodingHTTP10:        {400, "transfer_encoding_in_http10", "HTTP/1.0 requests must not use Transfer-Encoding (RFC 9112 section 6.1)"},
	ErrBodyTooLarge:          {413, "body_too_large", "the request body is larger than this server accepts"},
	ErrChunkSize:             {400, "invalid_chunk_size", "a chunk size must be 1 to 16 hex digits (RFC 9112 section 7.1)"},
	ErrChunkExtension:        {400, "invalid_chunk_extension", "a chunk extension is malformed (RFC 9112 section 7.1.1)"},
	ErrChunkExtensionTooLong: {413, "chunk_extensions_too_large", "the chunk extensions are larger than this server accepts"},
	ErrChunkOverhead:         {413, "chunk_overhead_too_large", "the chunked framing carries too little data for its size"},
	ErrChunkData:             {400, "invalid_chunk_data", "chunk data must be followed by CRLF (RFC 9112 section 7.1)"},
	ErrExpectation:           {417, "unsupported_expectation", "the only supported expectation is 100-continue (RFC 9110 section 10.1.1)"},
	ErrConnection:            {400, "invalid_connection_header", "the Connection header must be a list of tokens (RFC 9110 section 7.6.1)"},
	ErrUpgrade:               {400, "invalid_upgrade_header", "the Upgrade header must be a list of protocols (RFC 9110 section 7.8)"},
	ErrDataAfterClose:        {400, "data_after_close", "data received after a request that closes the connection"},
	ErrBufferShrunk:          {500, "internal_error", "internal error"},
}

// Error is a parse failure. Parse returns it as an error; use errors.As to
// get it and errors.Is to compare it with a sentinel.
type Error struct {
	Err     error  // the sentinel, e.g. ErrBareCR
	Status  int    // the HTTP status to answer with: 400, 413, 414, 417, 431, 501, 505 (500 for ErrBufferShrunk, a caller bug)
	Code    string // stable machine-readable code, e.g. "bare_cr"
	Offset  int    // offset of the offending byte, counted from the start of the buffer passed to Parse
	Snippet string // up to 16 bytes around Offset, Go-quoted (escaped): safe to log, never sent to the client
}

// Error implements error. The text names the sentinel, the offset and the
// escaped snippet; it never contains raw client bytes.
func (e *Error) Error() string {
	s := e.Err.Error() + " at offset " + strconv.Itoa(e.Offset)
	if e.Snippet != "" {
		s += " near " + e.Snippet
	}
	return s
}

// Unwrap returns the sentinel so errors.Is works.
func (e *Error) Unwrap() error { return e.Err }

// Message returns the fixed client-facing message for the error.
func (e *Error) Message() string { return errTable[e.Err].message }

// snippetLen is how many bytes around an error offset Error keeps: enough to
// recognise the problem in a log, too few to leak a credential.
const snippetLen = 16

// newError builds the *Error for sentinel err at offset off of buf. It is off
// the hot path: it runs once per connection at most.
func newError(err error, buf []byte, off int) *Error {
	info, ok := errTable[err]
	if !ok {
		info = errInfo{400, "bad_request", "bad request"}
	}
	e := &Error{Err: err, Status: info.status, Code: info.code, Offset: off}
	if off >= 0 && off <= len(buf) {
		lo := max(off-snippetLen/2, 0)
		hi := min(lo+snippetLen, len(buf))
		e.Snippet = strconv.QuoteToASCII(string(buf[lo:hi]))
	}
	return e
}
