package httpparse

// Default limits. Each is a named constant with its reason; a server
// overrides them with Limits. A zero field in Limits means "use the default".
const (
	// DefaultMaxRequestLine bounds the request line (method, target,
	// version, CRLF, and any empty lines before it). 8 KiB is what nginx
	// (large_client_header_buffers) and most proxies accept; the OpenAI and
	// Anthropic APIs use short paths. Exceeding it: 414.
	DefaultMaxRequestLine = 8 << 10

	// DefaultMaxHeaderBytes bounds the header section after the request line
	// (and, separately, the trailer section of a chunked body). SDK requests
	// send well under 2 KiB; 32 KiB leaves room for large cookies and
	// tracing headers. Exceeding it: 431.
	DefaultMaxHeaderBytes = 32 << 10

	// DefaultMaxHeaders bounds the number of header and trailer fields
	// together. It is also the capacity of Request.Headers, allocated once
	// per Parser. Exceeding it: 431.
	DefaultMaxHeaders = 100

	// DefaultMaxBody bounds the body (Content-Length or decoded chunked
	// data). 32 MiB fits a chat request with several base64 images.
	// Exceeding it: 413, decided as soon as Content-Length or a chunk size
	// says so, before the body is read.
	DefaultMaxBody = 32 << 20

	// DefaultMaxChunkExt bounds the total bytes of chunk extensions in one
	// chunked body. Nothing we serve uses extensions; they are parsed only to
	// be validated and discarded, so the budget is small. Exceeding it: 413.
	DefaultMaxChunkExt = 4 << 10

	// chunkOverheadAllowance is the chunked framing (size lines and CRLFs,
	// not extensions) allowed beyond one framing byte per data byte. It stops
	// a client from holding a connection's buffer with millions of 1-byte
	// chunks (compare net/http's chunkedReader excess check). Exceeding it:
	// 413 ErrChunkOverhead.
	chunkOverheadAllowance = 4 << 10
)

// Limits configures a Parser. A zero field means the default constant.
type Limits struct {
	MaxRequestLine int   // bytes, request line incl. CRLF; default DefaultMaxRequestLine
	MaxHeaderBytes int   // bytes, header section (and trailer section); default DefaultMaxHeaderBytes
	MaxHeaders     int   // fields, headers + trailers; default DefaultMaxHeaders
	MaxBody        int64 // bytes, body (decoded when chunked); default DefaultMaxBody
	MaxChunkExt    int   // bytes, all chunk extensions of one body; default DefaultMaxChunkExt
}

// DefaultLimits returns the default limits.
//
// Safe for concurrent use.
func DefaultLimits() Limits {
	return Limits{
		MaxRequestLine: DefaultMaxRequestLine,
		MaxHeaderBytes: DefaultMaxHeaderBytes,
		MaxHeaders:     DefaultMaxHeaders,
		MaxBody:        DefaultMaxBody,
		MaxChunkExt:    DefaultMaxChunkExt,
	}
}

// withDefaults returns l with every zero or negative field replaced by its
// default.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxRequestLine <= 0 {
		l.MaxRequestLine = d.MaxRequestLine
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if l.MaxHeaders <= 0 {
		l.MaxHeaders = d.MaxHeaders
	}
	if l.MaxBody <= 0 {
		l.MaxBody = d.MaxBody
	}
	if l.MaxChunkExt <= 0 {
		l.MaxChunkExt = d.MaxChunkExt
	}
	return l
}
