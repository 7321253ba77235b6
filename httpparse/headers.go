package httpparse

// Character classes as 256-entry tables: one load per byte instead of a
// chain of comparisons (the net/http "bitmask token table" habit).
var (
	isToken  [256]bool // tchar, RFC 9110 section 5.6.2
	isValue  [256]bool // field-vchar / SP / HTAB, RFC 9110 section 5.5 (obs-text allowed)
	isPath   [256]bool // pchar / "/" without '%', RFC 3986 section 3.3
	isQuery  [256]bool // pchar / "/" / "?" without '%', RFC 3986 section 3.4
	isTarget [256]bool // any byte some target form allows, except '%': the first, eager pass
	isRegN   [256]bool // reg-name without '%': unreserved / sub-delims, RFC 3986 section 3.2.2
	isIPLit  [256]bool // inside "[...]": unreserved / sub-delims / ":" (IPv6address and IPvFuture)
	unhex    [256]int8 // hex digit value, -1 for other bytes
)

func init() {
	const (
		alpha      = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		digit      = "0123456789"
		unreserved = alpha + digit + "-._~"
		subDelims  = "!$&'()*+,;="
	)
	set := func(t *[256]bool, chars string) {
		for i := 0; i < len(chars); i++ {
			t[chars[i]] = true
		}
	}
	set(&isToken, alpha+digit+"!#$%&'*+-.^_`|~")
	for c := 0; c < 256; c++ {
		isValue[c] = c == '\t' || c == ' ' || (c > 0x20 && c < 0x7f) || c >= 0x80
		unhex[c] = -1
	}
	for c := '0'; c <= '9'; c++ {
		unhex[c] = int8(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		unhex[c] = int8(c - 'a' + 10)
		unhex[c-'a'+'A'] = int8(c - 'a' + 10)
	}
	set(&isPath, unreserved+subDelims+":@/")
	set(&isQuery, unreserved+subDelims+":@/?")
	set(&isTarget, unreserved+subDelims+":@/?[]")
	set(&isRegN, unreserved+subDelims)
	set(&isIPLit, unreserved+subDelims+":")
}

// knownMethod reports whether m is a method this server parses: the methods
// of the IANA HTTP Method Registry except CONNECT (we are not a tunnel) and
// PRI (the HTTP/2 preface, never an HTTP/1.1 method). RFC 9110 section 9.1:
// an unrecognised method gets 501. The switch on string(m) does not
// allocate.
func knownMethod(m []byte) bool {
	switch string(m) {
	case "GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE",
		"QUERY", "ACL", "BASELINE-CONTROL", "BIND", "CHECKIN", "CHECKOUT", "COPY",
		"LABEL", "LINK", "LOCK", "MERGE", "MKACTIVITY", "MKCALENDAR", "MKCOL",
		"MKREDIRECTREF", "MKWORKSPACE", "MOVE", "ORDERPATCH", "PROPFIND",
		"PROPPATCH", "REBIND", "REPORT", "SEARCH", "UNBIND", "UNCHECKOUT",
		"UNLINK", "UNLOCK", "UPDATE", "UPDATEREDIRECTREF", "VERSION-CONTROL":
		return true
	}
	return false
}

// parseTarget checks the structure of the request-target [mEnd+1, tEnd)
// (its bytes already passed the isTarget/pct-encoding pass) and records
// path, query and authority offsets. RFC 9112 section 3.2.
func (p *Parser) parseTarget(buf []byte) error {
	r := &p.r
	ts, te := r.mEnd+1, r.tEnd
	t := buf[ts:te]
	p.scanned += len(t)
	switch c := t[0]; {
	case c == '/':
		r.form = formOrigin
		return p.pathQuery(buf, ts, te)
	case c == '*':
		// asterisk-form, only for OPTIONS (RFC 9112 section 3.2.4).
		if len(t) != 1 || string(buf[r.mStart:r.mEnd]) != "OPTIONS" {
			return ErrTarget
		}
		r.form = formAsterisk
		r.pathS, r.pathE = ts, te
		return nil
	case 'a' <= c|0x20 && c|0x20 <= 'z':
		// absolute-form (RFC 9112 section 3.2.2), for http and https
		// only: scheme "://" authority path-abempty ["?" query].
		var rest int
		switch {
		case len(t) >= 7 && equalFold(t[:7], "http://"):
			rest = ts + 7
		case len(t) >= 8 && equalFold(t[:8], "https://"):
			rest = ts + 8
		default:
			return ErrTarget
		}
		a := rest
		for a < te && buf[a] != '/' && buf[a] != '?' {
			a++
		}
		auth := buf[rest:a]
		// RFC 9110 section 4.2.1: an http URI with an empty host is
		// invalid; section 4.2.4: userinfo is deprecated and a recipient
		// SHOULD treat it as an error (we do: it is a phishing vector).
		if len(auth) == 0 || auth[0] == ':' || !validHost(auth) {
			return ErrTarget
		}
		r.form = formAbsolute
		r.authS, r.authE = rest, a
		return p.pathQuery(buf, a, te)
	}
	return ErrTarget
}

// pathQuery validates path ["?" query] in buf[s:e] and records offsets.
func (p *Parser) pathQuery(buf []byte, s, e int) error {
	r := &p.r
	i := s
	for i < e && buf[i] != '?' {
		if c := buf[i]; !isPath[c] && c != '%' {
			return ErrTarget
		}
		i++
	}
	r.pathS, r.pathE = s, i
	if i < e {
		r.hasQuery = true
		r.qS = i + 1
		for i++; i < e; i++ {
			if c := buf[i]; !isQuery[c] && c != '%' {
				return ErrTarget
			}
		}
	}
	return nil
}

// validHost reports whether h is uri-host [ ":" port ] (RFC 9110 section 7.2,
// RFC 3986 section 3.2.2), which includes the empty Host of a target URI
// without authority. '%' must start a pct-encoding.
func validHost(h []byte) bool {
	i := 0
	if len(h) > 0 && h[0] == '[' {
		i = 1
		for i < len(h) && h[i] != ']' {
			if !isIPLit[h[i]] {
				return false
			}
			i++
		}
		if i == len(h) || i == 1 {
			return false
		}
		i++
	} else {
		for i < len(h) && h[i] != ':' {
			c := h[i]
			if c == '%' {
				if i+2 >= len(h) || unhex[h[i+1]] < 0 || unhex[h[i+2]] < 0 {
					return false
				}
				i += 3
				continue
			}
			if !isRegN[c] {
				return false
			}
			i++
		}
	}
	if i == len(h) {
		return true
	}
	if h[i] != ':' {
		return false
	}
	for _, c := range h[i+1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// headerField applies the per-field rules to a completed header field line.
// It runs when the line's CRLF arrives, so a bad Content-Length is rejected
// without waiting for the rest of the head. Only the names that affect
// framing, routing or connection handling are examined.
func (p *Parser) headerField(buf []byte, f fieldOff) error {
	r := &p.r
	name, val := buf[f.ns:f.ne], buf[f.vs:f.ve]
	switch len(name) {
	case 4:
		if !lowerEq(name, "host") {
			return nil
		}
		p.scanned += len(val)
		// RFC 9112 section 3.2: 400 for more than one Host field line or
		// an invalid Host value.
		r.hostCount++
		if r.hostCount > 1 {
			return ErrDuplicateHost
		}
		if !validHost(val) {
			return ErrInvalidHost
		}
		r.hostS, r.hostE = f.vs, f.ve
	case 6:
		if !lowerEq(name, "expect") || r.minor == 0 {
			// RFC 9110 section 10.1.1: ignore Expect in HTTP/1.0.
			return nil
		}
		switch {
		case len(val) == 0:
		case equalFold(val, "100-continue"):
			r.expect100 = true
		default:
			// RFC 9110 section 10.1.1: MAY answer 417 to other
			// expectations; we do rather than guess.
			return ErrExpectation
		}
	case 7:
		if !lowerEq(name, "upgrade") || r.minor == 0 {
			return nil
		}
		p.scanned += len(val)
		s, e, ok := upgradeFirst(val)
		if !ok {
			return ErrUpgrade
		}
		if !r.hasUpgrade {
			r.hasUpgrade = true
			r.upS, r.upE = f.vs+s, f.vs+e
		}
	case 10:
		if !lowerEq(name, "connection") {
			return nil
		}
		p.scanned += len(val)
		return p.connection(val)
	case 12:
		if lowerEq(name, "content-type") && !r.hasCT {
			r.hasCT = true
			r.ctS, r.ctE = f.vs, f.ve
		}
	case 14:
		if !lowerEq(name, "content-length") {
			return nil
		}
		p.scanned += len(val)
		// RFC 9112 section 6.3: duplicate or invalid Content-Length is
		// unrecoverable framing; we reject even identical duplicates.
		if r.hasCL {
			return ErrDuplicateLength
		}
		// RFC 9112 section 6.1: CL together with TE "ought to be handled
		// as an error"; it is the classic smuggling vector.
		if r.teSeen {
			return ErrLengthWithEncoding
		}
		n, ok := parseContentLength(val)
		if !ok {
			return ErrContentLength
		}
		r.hasCL, r.cl = true, n
		if n > p.lim.MaxBody {
			return ErrBodyTooLarge
		}
	case 17:
		if !lowerEq(name, "transfer-encoding") {
			return nil
		}
		p.scanned += len(val)
		return p.transferEncoding(val)
	}
	return nil
}

// parseContentLength parses Content-Length = 1*DIGIT (RFC 9110 section 8.6):
// no sign, no whitespace inside (OWS around is already trimmed), no list,
// and no value above math.MaxInt64.
func parseContentLength(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (1<<63-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// transferEncoding applies RFC 9112 section 6.1 to one Transfer-Encoding
// field value: a list of transfer codings where chunked must be the final
// one, applied once, and is the only one we implement.
func (p *Parser) transferEncoding(val []byte) error {
	r := &p.r
	if r.minor == 0 {
		// RFC 9112 section 6.1: TE in an HTTP/1.0 message means faulty
		// framing.
		return ErrEncodingHTTP10
	}
	if r.hasCL {
		return ErrLengthWithEncoding
	}
	r.teSeen = true
	if len(val) > 0 && val[len(val)-1] == ',' {
		return ErrTransferEncoding // a trailing empty element, see below
	}
	elems := 0
	for rest := val; len(rest) > 0; {
		var el []byte
		el, rest = nextElement(rest)
		if len(el) == 0 {
			// RFC 9110 section 5.6.1.2 lets a recipient ignore empty list
			// elements; for the one header that decides framing we do not:
			// net/http rejects them, and any disagreement between two
			// parsers about Transfer-Encoding is a smuggling vector.
			return ErrTransferEncoding
		}
		elems++
		if r.chunked {
			// Something after chunked (or chunked twice): the body length
			// cannot be determined, 400 (RFC 9112 section 6.3 item 4).
			return ErrTransferEncoding
		}
		name := el
		for k, c := range el {
			if c == ';' || c == ' ' || c == '\t' {
				name = el[:k]
				break
			}
		}
		switch {
		case !isTokenString(name):
			return ErrTransferEncoding
		case equalFold(name, "chunked"):
			if len(name) != len(el) {
				return ErrTransferEncoding // chunked takes no parameters
			}
			r.chunked = true
		default:
			// RFC 9112 section 6.1: SHOULD answer 501 to a transfer
			// coding it does not understand (gzip, deflate, identity...).
			return ErrEncodingNotImpl
		}
	}
	if elems == 0 {
		return ErrTransferEncoding // 1#transfer-coding: the list is not empty
	}
	return nil
}

// connection applies one Connection field value: a list of tokens, compared
// case-insensitively (RFC 9110 section 7.6.1).
func (p *Parser) connection(val []byte) error {
	r := &p.r
	for rest := val; len(rest) > 0; {
		var el []byte
		el, rest = nextElement(rest)
		if len(el) == 0 {
			continue
		}
		if !isTokenString(el) {
			return ErrConnection
		}
		switch {
		case equalFold(el, "close"):
			r.connClose = true
		case equalFold(el, "keep-alive"):
			r.connKeep = true
		case equalFold(el, "upgrade"):
			r.connUpgrade = true
		}
	}
	return nil
}

// upgradeFirst validates an Upgrade value, 1#protocol with
// protocol = protocol-name ["/" protocol-version] (RFC 9110 section 7.8),
// and returns the offsets of the first protocol.
func upgradeFirst(val []byte) (s, e int, ok bool) {
	found := false
	for rest := val; len(rest) > 0; {
		var el []byte
		el, rest = nextElement(rest)
		if len(el) == 0 {
			continue
		}
		name, ver := el, []byte(nil)
		for k, c := range el {
			if c == '/' {
				name, ver = el[:k], el[k+1:]
				if len(ver) == 0 {
					return 0, 0, false
				}
				break
			}
		}
		if !isTokenString(name) || (ver != nil && !isTokenString(ver)) {
			return 0, 0, false
		}
		if !found {
			found = true
			s = elemOffset(val, el)
			e = s + len(el)
		}
	}
	return s, e, found
}

// elemOffset returns the offset of el, a subslice of val.
func elemOffset(val, el []byte) int {
	return cap(val) - cap(el)
}

// nextElement splits the first element off a comma-separated list and
// trims its OWS. The element is a subslice of b.
func nextElement(b []byte) (el, rest []byte) {
	k := 0
	for k < len(b) && b[k] != ',' {
		k++
	}
	el, rest = b[:k], b[k:]
	if len(rest) > 0 {
		rest = rest[1:]
	}
	for len(el) > 0 && (el[0] == ' ' || el[0] == '\t') {
		el = el[1:]
	}
	for len(el) > 0 && (el[len(el)-1] == ' ' || el[len(el)-1] == '\t') {
		el = el[:len(el)-1]
	}
	return el, rest
}

func isTokenString(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !isToken[c] {
			return false
		}
	}
	return true
}

// lowerEq reports whether token b equals the lower-case ASCII string s
// case-insensitively. Setting bit 0x20 lower-cases letters and leaves the
// other token bytes alone, so it is exact for tokens.
func lowerEq(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b[i]|0x20 != s[i] {
			return false
		}
	}
	return true
}

// equalFold reports whether b equals s under ASCII case folding.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c, d := b[i], s[i]
		if c == d {
			continue
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}
