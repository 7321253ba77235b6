package netio

import (
	"bytes"
	"strings"

	"github.com/vajra-go/vajra/httpparse"
)

// CORS (Fetch standard, "CORS protocol"): with --allowed-origins set, a
// preflight (OPTIONS with Origin and Access-Control-Request-Method) is
// answered on the loop, before auth (browsers send no credentials on a
// preflight), and a response to an allowed Origin carries
// Access-Control-Allow-Origin. Without allowed origins, nothing changes:
// no CORS header is ever sent and OPTIONS is an unknown method.

// corsPolicy is the set of allowed origins.
type corsPolicy struct {
	any     bool
	origins map[string]bool
}

func newCORSPolicy(origins []string) *corsPolicy {
	if len(origins) == 0 {
		return nil
	}
	p := &corsPolicy{origins: map[string]bool{}}
	for _, o := range origins {
		if o == "*" {
			p.any = true
		}
		p.origins[o] = true
	}
	return p
}

// allowed reports whether origin may read responses. Loop-only (no
// allocation: map lookup by string(b)).
func (p *corsPolicy) allowed(origin []byte) bool {
	if p == nil || len(origin) == 0 || !saneHeaderValue(origin) {
		return false
	}
	return p.any || p.origins[string(origin)]
}

// corsMaxAge is how long (seconds) a browser may cache a preflight answer.
const corsMaxAge = "600"

// appendAllowOrigin appends the headers of a response to an allowed
// origin. The origin is echoed (rather than "*") so that credentialed
// requests work, hence Vary: Origin.
func appendAllowOrigin(dst, origin []byte) []byte {
	dst = append(dst, "Access-Control-Allow-Origin: "...)
	dst = append(dst, origin...)
	dst = append(dst, "\r\nVary: Origin\r\nAccess-Control-Expose-Headers: X-Request-Id, Retry-After, retry-after-ms\r\n"...)
	return dst
}

// isPreflight reports whether req is a CORS preflight.
func isPreflight(req *httpparse.Request) bool {
	return string(req.Method) == "OPTIONS" && len(req.Header("origin")) > 0 &&
		len(req.Header("access-control-request-method")) > 0
}

// appendPreflight answers a preflight: 204 with the Allow-* headers for an
// allowed origin, 403 without them otherwise. The requested headers are
// echoed when they are a clean token list (the SDKs send their own
// x-stainless-* and anthropic-* headers).
func (s *Server) appendPreflight(dst []byte, req *httpparse.Request) []byte {
	origin := req.Header("origin")
	if !s.cors.allowed(origin) {
		return appendResponse(dst, req.Minor, 403, "", "", nil, nil, !req.KeepAlive)
	}
	var h []byte
	h = appendAllowOrigin(h, origin)
	h = append(h, "Access-Control-Allow-Methods: GET, POST, DELETE, OPTIONS\r\nAccess-Control-Allow-Credentials: true\r\nAccess-Control-Max-Age: "+corsMaxAge+"\r\n"...)
	if rh := req.Header("access-control-request-headers"); len(rh) > 0 && tokenList(rh) {
		h = append(h, "Access-Control-Allow-Headers: "...)
		h = append(h, rh...)
		h = append(h, "\r\n"...)
	} else {
		h = append(h, "Access-Control-Allow-Headers: Authorization, Content-Type, X-Api-Key, X-Request-Id, Anthropic-Version, Anthropic-Beta, OpenAI-Beta\r\n"...)
	}
	return appendResponse(dst, req.Minor, 204, "", "", h, nil, !req.KeepAlive)
}

// tokenList reports whether v is a comma-separated list of header names
// (RFC 9110 §5.6.2 tokens), safe to echo.
func tokenList(v []byte) bool {
	for _, b := range v {
		switch {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~, \t", b) >= 0:
		default:
			return false
		}
	}
	return true
}

// saneHeaderValue reports whether v is visible ASCII (and spaces) only, so
// that echoing it cannot split a header.
func saneHeaderValue(v []byte) bool {
	for _, b := range v {
		if b < ' ' || b >= 0x7f {
			return false
		}
	}
	return true
}

// insertHeaders puts extra header lines into a complete response in dst
// (just before the blank line that ends its head).
func insertHeaders(dst, extra []byte) []byte {
	i := bytes.Index(dst, []byte("\r\n\r\n"))
	if i < 0 || len(extra) == 0 {
		return dst
	}
	i += 2
	n := len(dst)
	dst = append(dst, extra...)
	copy(dst[i+len(extra):], dst[i:n])
	copy(dst[i:], extra)
	return dst
}
