package httpparse

import "math"

// Header is one header (or trailer) field. Name and Value are slices of the
// buffer passed to Parse; Value has its optional whitespace (OWS) trimmed
// (RFC 9110 section 5.5).
type Header struct{ Name, Value []byte }

// Request is one parsed request. Every []byte field is a slice of the buffer
// passed to Parse, except Body of a chunked request, which is a slice of the
// Parser's scratch buffer. The slices are capped (three-index slices), so
// appending to one never overwrites the input. They are valid until the
// caller discards those bytes of the buffer or calls Parse again, whichever
// comes first; copy what must live longer.
type Request struct {
	Method []byte // a registered method token, e.g. "POST"
	Target []byte // the raw request-target, e.g. "/v1/chat/completions?x=1"
	Path   []byte // Target without the query; for absolute-form the path part (may be empty: treat as "/"); "*" for OPTIONS *
	Query  []byte // after '?', without it; nil when the target has no '?'
	// Authority is the authority of an absolute-form target
	// ("http://host:port/path"); nil for origin-form and asterisk-form.
	Authority []byte
	Minor     int // HTTP/1.Minor: 0 or 1

	// Headers are the header fields in wire order. The backing array
	// belongs to the Parser (capacity Limits.MaxHeaders) and is reused by
	// the next call to Parse.
	Headers []Header
	// Trailers are the trailer fields of a chunked body, in wire order
	// (same backing array as Headers); empty otherwise. They are validated
	// and reported, never merged into Headers (RFC 9110 section 6.5.1).
	Trailers []Header

	// Host is the Host header value, or for an absolute-form target its
	// authority (RFC 9112 section 3.2.2: the server uses the target's
	// authority and ignores Host). nil when absent (HTTP/1.0 only).
	Host        []byte
	ContentType []byte // the first Content-Type value; nil when absent

	ContentLength int64 // the Content-Length value; -1 when absent (also for chunked)
	Chunked       bool  // Transfer-Encoding: chunked
	KeepAlive     bool  // the connection stays open after the response (HTTP/1.1 unless "close"; HTTP/1.0 only with "keep-alive")
	Expect100     bool  // Expect: 100-continue in an HTTP/1.1 request (ignored in 1.0, RFC 9110 section 10.1.1)

	// Upgrade is the first protocol of the Upgrade header (e.g.
	// "websocket", compare case-insensitively) when the request is
	// HTTP/1.1 and Connection lists "upgrade"; nil otherwise. A server that
	// accepts it takes the connection over after buf[:n]; one that declines
	// keeps parsing HTTP (RFC 9110 section 7.8).
	Upgrade []byte

	// Body is the body: for Content-Length a slice of the input, for
	// chunked the decoded data in the Parser's scratch buffer; empty when
	// the request has none.
	Body []byte
}

// Header returns the value of the first header field whose name equals name
// case-insensitively (ASCII), or nil. It does not allocate.
func (r *Request) Header(name string) []byte {
	for i := range r.Headers {
		if equalFold(r.Headers[i].Name, name) {
			return r.Headers[i].Value
		}
	}
	return nil
}

// Parser states. One constant per state, nats-server style; the order
// matters only in that every state before stateLineStart belongs to the
// request line (whose limit is MaxRequestLine).
const (
	stateStart     uint8 = iota // before the method; skips empty lines (RFC 9112 section 2.2)
	stateStartLF                // CR of an empty line seen, LF expected
	stateMethod                 // in the method token
	stateTarget                 // in the request-target
	stateVersion                // in "HTTP/1.x"
	stateReqLineLF              // CR after the version seen, LF expected
	stateLineStart              // at the start of a field line or of the final CRLF
	stateName                   // in a field name
	stateValueOWS               // after the colon, skipping OWS
	stateValue                  // in a field value
	stateFieldLF                // CR after a field value seen, LF expected
	stateHeadLF                 // CR of the empty line ending the section seen, LF expected
	stateBodyCL                 // waiting for Content-Length bytes
	stateChunked                // in a chunked body (ChunkedDecoder)
	stateDone                   // request complete (transient)
)

// Target forms (RFC 9112 section 3.2).
const (
	formOrigin uint8 = iota
	formAbsolute
	formAsterisk
)

// maxMethodLen is the length of the longest registered method we accept
// ("UPDATEREDIRECTREF"); a longer token cannot be one, so the parser answers
// 501 without waiting for the rest of the line.
const maxMethodLen = 17

// fieldOff is a field line as offsets into the buffer: name [ns,ne), value
// [vs,ve). Offsets, not slices, because the caller may move the buffer
// between calls.
type fieldOff struct{ ns, ne, vs, ve int }

// reqState is everything the Parser knows about the request in progress.
// It is reset with one assignment when a request completes.
type reqState struct {
	state  uint8
	form   uint8
	minor  uint8
	pos    int // next unexamined byte of the buffer
	limEnd int // the current phase (request line, header or trailer section) must end before this offset

	mStart, mEnd int // method
	tEnd         int // target is [mEnd+1, tEnd)
	pathS, pathE int
	qS           int // query start; valid when hasQuery
	hasQuery     bool
	authS, authE int // absolute-form authority

	lineStart, nameEnd, valStart, valEnd int // field line in progress
	headEnd                              int // offset after the header section
	nhead                                int // header fields (the rest of Parser.fields are trailers)
	trailer                              bool
	headDone                             bool

	hostCount    int
	hostS, hostE int
	hasCT        bool
	ctS, ctE     int
	hasUpgrade   bool
	upS, upE     int
	hasCL        bool
	cl           int64
	teSeen       bool
	chunked      bool
	connClose    bool
	connKeep     bool
	connUpgrade  bool
	expect100    bool
	keepAlive    bool
	upgrade      bool
}

// Parser is an incremental HTTP/1.1 request parser for one connection.
//
// Loop-only: a Parser belongs to one connection and is used from that
// connection's event loop; it is not safe for concurrent use.
//
// It keeps its progress as offsets, never as pointers into the buffer, so
// the caller may move or grow the buffer between calls as long as the bytes
// already passed keep their values and position relative to buf[0].
type Parser struct {
	lim    Limits
	r      reqState
	err    *Error         // sticky: once framing is in doubt, every call fails
	closed bool           // the last request closes the connection
	fields []fieldOff     // cap lim.MaxHeaders
	out    []Header       // cap lim.MaxHeaders; backs Request.Headers and Trailers
	body   []byte         // scratch for decoded chunked bodies, reused
	cd     ChunkedDecoder // decodes a chunked body into body

	waiveHost bool // test hook: skip the missing-Host check (conformance test)
	scanned   int  // test hook: bytes examined, to prove linear work
}

// NewParser returns a Parser with limits l (zero fields mean the defaults).
//
// Safe for concurrent use.
func NewParser(l Limits) *Parser {
	p := &Parser{}
	p.SetLimits(l)
	return p
}

// SetLimits sets the limits (zero fields mean the defaults) and resets the
// parser. The zero Parser uses the defaults.
//
// Loop-only.
func (p *Parser) SetLimits(l Limits) {
	p.lim = l.withDefaults()
	p.fields = make([]fieldOff, 0, p.lim.MaxHeaders)
	p.out = make([]Header, p.lim.MaxHeaders)
	p.Reset()
}

// Reset forgets the request in progress, a sticky error and the closed
// state, so the Parser can serve a new connection. Buffers are kept.
//
// Loop-only.
func (p *Parser) Reset() {
	p.err = nil
	p.closed = false
	p.resetRequest()
}

func (p *Parser) resetRequest() {
	p.r = reqState{limEnd: p.lim.MaxRequestLine, cl: -1}
	p.fields = p.fields[:0]
}

// HeadersDone reports whether the head (request line and header section) of
// the current request is complete while its body is still pending. When it
// is, the fields of the Request passed to the last Parse call, other than
// Body, are valid (for that call's buffer): a server uses this to send
// "100 Continue" when Expect100 is set.
//
// Loop-only.
func (p *Parser) HeadersDone() bool { return p.r.headDone }

// Parse examines buf, which starts at the first byte of the current request
// (the caller discards the bytes of completed requests). It returns:
//
//   - n > 0, nil: a complete request (head and body) is buf[:n]; req is
//     filled. The parser is ready for the next request, which starts at
//     buf[n]: pipelined requests are parsed by calling Parse again on
//     buf[n:].
//   - 0, nil: more bytes are needed. The parser remembers how far it got
//     and resumes there: call again with the same bytes plus more (the
//     buffer may have moved). If HeadersDone, req's head fields are filled.
//   - 0, *Error: the request is malformed or over a limit. The error is
//     sticky (every later call returns it until Reset): write
//     (*Error).Response and close the connection, because its framing is
//     in doubt.
//
// After a request with KeepAlive false, Parse accepts no more bytes: any
// further byte is ErrDataAfterClose (the server closes after responding).
//
// Loop-only. Parse does not allocate, except to grow the chunked-body
// scratch buffer up to the largest body seen, and to build an *Error.
func (p *Parser) Parse(buf []byte, req *Request) (n int, err error) {
	if p.err != nil {
		return 0, p.err
	}
	if p.lim.MaxHeaders == 0 {
		p.SetLimits(Limits{})
	}
	if p.closed {
		if len(buf) == 0 {
			return 0, nil
		}
		return 0, p.fail(ErrDataAfterClose, buf, 0)
	}
	r := &p.r
	i := r.pos
	if len(buf) < i {
		return 0, p.fail(ErrBufferShrunk, buf, len(buf))
	}
	from := i
	var fail error
	done := false

loop:
	for {
		end := len(buf)
		if end > r.limEnd {
			end = r.limEnd
		}
		if i >= end {
			break
		}
		switch r.state {
		case stateStart:
			c := buf[i]
			if c == '\r' {
				r.state = stateStartLF
				i++
				continue
			}
			if c == '\n' {
				fail = ErrBareLF
				break loop
			}
			r.mStart = i
			r.state = stateMethod

		case stateStartLF:
			if buf[i] != '\n' {
				fail = ErrBareCR
				break loop
			}
			i++
			r.state = stateStart

		case stateMethod:
			lim := min(end, r.mStart+maxMethodLen+1)
			for i < lim && isToken[buf[i]] {
				i++
			}
			if i == r.mStart+maxMethodLen+1 {
				fail = ErrMethodNotImplemented
				i = r.mStart
				break loop
			}
			if i == end {
				continue
			}
			if buf[i] != ' ' || i == r.mStart {
				fail = ErrMethod
				break loop
			}
			r.mEnd = i
			if !knownMethod(buf[r.mStart:i]) {
				fail = ErrMethodNotImplemented
				i = r.mStart
				break loop
			}
			i++
			r.state = stateTarget

		case stateTarget:
			for i < end {
				c := buf[i]
				if isTarget[c] {
					i++
					continue
				}
				switch c {
				case '%':
					// pct-encoded = "%" HEXDIG HEXDIG (RFC 3986 section
					// 2.1). Stop at '%' until both digits are here; the
					// rescan is at most 2 bytes.
					if i+2 >= end {
						if end < len(buf) {
							fail = ErrRequestLineTooLong
							break loop
						}
						break loop
					}
					if unhex[buf[i+1]] < 0 || unhex[buf[i+2]] < 0 {
						fail = ErrTarget
						break loop
					}
					i += 3
					continue
				case ' ':
					if i == r.mEnd+1 {
						fail = ErrTarget
						break loop
					}
					r.tEnd = i
					if fail = p.parseTarget(buf); fail != nil {
						i = r.mEnd + 1
						break loop
					}
					i++
					r.state = stateVersion
					continue loop
				case '\r', '\n':
					// "GET /\r\n": an HTTP/0.9 request line. RFC 9112
					// section 3 requires HTTP-version.
					fail = ErrVersion
				default:
					fail = ErrTarget
				}
				break loop
			}

		case stateVersion:
			vs := r.tEnd + 1
			for i < end {
				c := buf[i]
				switch k := i - vs; k {
				case 0, 1, 2, 3, 4:
					// HTTP-name is case-sensitive %s"HTTP" (RFC 9112
					// section 2.3).
					if c != "HTTP/"[k] {
						fail = ErrVersion
						break loop
					}
				case 5:
					if c != '1' {
						fail = versionErr(c)
						break loop
					}
				case 6:
					if c != '.' {
						fail = versionErr(c)
						break loop
					}
				case 7:
					if c != '0' && c != '1' {
						fail = versionErr(c)
						break loop
					}
					r.minor = c - '0'
				default:
					switch {
					case c == '\r':
						i++
						r.state = stateReqLineLF
						continue loop
					case c == '\n':
						fail = ErrBareLF
					default:
						fail = versionErr(c)
					}
					break loop
				}
				i++
			}

		case stateReqLineLF:
			if buf[i] != '\n' {
				fail = ErrBareCR
				break loop
			}
			i++
			r.limEnd = i + p.lim.MaxHeaderBytes
			r.state = stateLineStart

		case stateLineStart:
			c := buf[i]
			if c == '\r' {
				i++
				r.state = stateHeadLF
				continue
			}
			if isToken[c] {
				if len(p.fields) == cap(p.fields) {
					fail = ErrTooManyHeaders
					break loop
				}
				r.lineStart = i
				i++
				r.state = stateName
				continue
			}
			switch c {
			case ' ', '\t':
				// RFC 9112 section 2.2 (whitespace after the start
				// line) and section 5.2 (obs-fold): a server MAY reject;
				// we do, since folding is where smuggling hides.
				if len(p.fields) == r.nhead {
					fail = ErrLeadingWhitespace
				} else {
					fail = ErrObsFold
				}
			case '\n':
				fail = ErrBareLF
			default:
				fail = ErrFieldName
			}
			break loop

		case stateName:
			for i < end && isToken[buf[i]] {
				i++
			}
			if i == end {
				continue
			}
			switch buf[i] {
			case ':':
				r.nameEnd = i
				i++
				r.state = stateValueOWS
				continue
			case ' ', '\t':
				// RFC 9112 section 5.1: a server MUST reject whitespace
				// between field name and colon with 400.
				fail = ErrSpaceBeforeColon
			default:
				fail = ErrFieldName
			}
			break loop

		case stateValueOWS:
			for i < end && (buf[i] == ' ' || buf[i] == '\t') {
				i++
			}
			if i == end {
				continue
			}
			r.valStart = i
			r.state = stateValue

		case stateValue:
			for i < end && isValue[buf[i]] {
				i++
			}
			if i == end {
				continue
			}
			switch buf[i] {
			case '\r':
				// Trim trailing OWS (RFC 9110 section 5.5). The backward
				// scan covers only the trailing whitespace run.
				j := i
				for j > r.valStart && (buf[j-1] == ' ' || buf[j-1] == '\t') {
					j--
				}
				p.scanned += i - j
				r.valEnd = j
				i++
				r.state = stateFieldLF
				continue
			case '\n':
				fail = ErrBareLF
			default:
				// CTL other than HTAB, NUL and DEL are not field-vchar
				// (RFC 9110 section 5.5; RFC 9112 section 2.2 on bare CR).
				fail = ErrFieldValue
			}
			break loop

		case stateFieldLF:
			if buf[i] != '\n' {
				fail = ErrBareCR
				break loop
			}
			i++
			f := fieldOff{r.lineStart, r.nameEnd, r.valStart, r.valEnd}
			p.fields = append(p.fields, f)
			if !r.trailer {
				if fail = p.headerField(buf, f); fail != nil {
					i = r.lineStart
					break loop
				}
			}
			r.state = stateLineStart

		case stateHeadLF:
			if buf[i] != '\n' {
				fail = ErrBareCR
				break loop
			}
			i++
			if r.trailer {
				done = true
				break loop
			}
			if fail = p.endHead(i); fail != nil {
				break loop
			}
			if r.state == stateDone {
				done = true
				break loop
			}

		case stateBodyCL:
			if int64(len(buf)-r.headEnd) >= r.cl {
				i = r.headEnd + int(r.cl)
				done = true
				break loop
			}
			i = len(buf)

		default: // stateChunked
			if i, fail = p.chunked(buf, i); fail != nil {
				break loop
			}
		}
	}

	p.scanned += i - from
	if fail == nil && !done && i >= r.limEnd && i < len(buf) {
		if r.state <= stateReqLineLF {
			fail = ErrRequestLineTooLong
		} else {
			fail = ErrHeadersTooLarge
		}
	}
	if fail != nil {
		return 0, p.fail(fail, buf, i)
	}
	if done {
		p.fill(buf, req, i)
		if !r.keepAlive {
			p.closed = true
		}
		p.resetRequest()
		return i, nil
	}
	r.pos = i
	if r.headDone {
		p.fill(buf, req, -1)
	}
	return 0, nil
}

// versionErr is the error for byte c where "HTTP/1.0" or "HTTP/1.1" was
// expected: a digit means a well-formed but unsupported version (505), any
// other byte a malformed one (400).
func versionErr(c byte) error {
	if '0' <= c && c <= '9' {
		return ErrVersionNotSupported
	}
	return ErrVersion
}

// fail records err as the sticky error and returns it.
func (p *Parser) fail(err error, buf []byte, off int) error {
	p.err = newError(err, buf, off)
	return p.err
}

// endHead runs when the header section's final CRLF ends at offset i: it
// applies the whole-request rules and picks how the body is framed
// (RFC 9112 section 6.3).
func (p *Parser) endHead(i int) error {
	r := &p.r
	r.headEnd = i
	r.nhead = len(p.fields)
	// RFC 9112 section 3.2: a server MUST respond 400 to an HTTP/1.1
	// request that lacks a Host header field.
	if r.minor == 1 && r.hostCount == 0 && !p.waiveHost {
		return ErrMissingHost
	}
	if r.form == formAbsolute {
		// RFC 9112 section 3.2.2: use the target's authority, ignore Host.
		r.hostS, r.hostE, r.hostCount = r.authS, r.authE, 1
	}
	if r.minor == 1 {
		r.keepAlive = !r.connClose
		// RFC 9110 section 7.8: Upgrade counts only with the "upgrade"
		// connection option, and is ignored in HTTP/1.0.
		r.upgrade = r.connUpgrade && r.hasUpgrade
	} else {
		r.keepAlive = r.connKeep && !r.connClose
	}
	r.headDone = true
	r.limEnd = math.MaxInt
	switch {
	case r.chunked:
		p.body = p.body[:0]
		p.cd.Reset(p.lim)
		r.state = stateChunked
	case r.cl > 0:
		r.state = stateBodyCL
	default:
		r.state = stateDone
	}
	return nil
}

// chunked decodes chunked body bytes from offset i into the scratch body
// until it needs more bytes, fails, or reaches the trailer section (which
// the header states parse, with r.trailer set).
func (p *Parser) chunked(buf []byte, i int) (int, error) {
	r := &p.r
	for i < len(buf) {
		data, n, err := p.cd.Decode(buf[i:])
		i += n
		if err != nil {
			return i, err
		}
		p.body = append(p.body, data...)
		if p.cd.Last() {
			// The trailer section follows, parsed like a header section
			// with its own MaxHeaderBytes budget.
			r.trailer = true
			r.limEnd = i + p.lim.MaxHeaderBytes
			r.state = stateLineStart
			break
		}
	}
	return i, nil
}

// fill points req's fields into buf. end is the offset after the complete
// request, or -1 when only the head is done.
func (p *Parser) fill(buf []byte, req *Request, end int) {
	r := &p.r
	req.Method = buf[r.mStart:r.mEnd:r.mEnd]
	req.Target = buf[r.mEnd+1 : r.tEnd : r.tEnd]
	req.Path = buf[r.pathS:r.pathE:r.pathE]
	req.Query = nil
	if r.hasQuery {
		req.Query = buf[r.qS:r.tEnd:r.tEnd]
	}
	req.Authority = nil
	if r.form == formAbsolute {
		req.Authority = buf[r.authS:r.authE:r.authE]
	}
	req.Minor = int(r.minor)
	out := p.out[:len(p.fields)]
	for k, f := range p.fields {
		out[k] = Header{Name: buf[f.ns:f.ne:f.ne], Value: buf[f.vs:f.ve:f.ve]}
	}
	req.Headers = out[:r.nhead:r.nhead]
	req.Trailers = out[r.nhead:]
	req.Host = nil
	if r.hostCount > 0 {
		req.Host = buf[r.hostS:r.hostE:r.hostE]
	}
	req.ContentType = nil
	if r.hasCT {
		req.ContentType = buf[r.ctS:r.ctE:r.ctE]
	}
	req.ContentLength = r.cl
	req.Chunked = r.chunked
	req.KeepAlive = r.keepAlive
	req.Expect100 = r.expect100
	req.Upgrade = nil
	if r.upgrade {
		req.Upgrade = buf[r.upS:r.upE:r.upE]
	}
	req.Body = nil
	if end >= 0 {
		switch {
		case r.chunked:
			req.Body = p.body[:len(p.body):len(p.body)]
		case r.cl > 0:
			req.Body = buf[r.headEnd:end:end]
		}
	}
}
