package httpparse

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

// The llhttp corpus (nodejs/llhttp v9.4.2, MIT, Copyright Fedor Indutny
// and Node.js contributors) is copied into testdata/llhttp with its
// license and README.

// llhttpVectorsPath is the corpus, relative to the package directory.
const llhttpVectorsPath = "testdata/llhttp/vectors.jsonl"

// llhttpVectorCount is how many vectors the corpus holds (its README): a
// shortened file fails the test rather than checking less.
const llhttpVectorCount = 251

type llhttpVector struct {
	File     string         `json:"file"`
	Line     int            `json:"line"`
	Name     string         `json:"name"`
	Type     string         `json:"type"`
	Meta     map[string]any `json:"meta"`
	InputB64 string         `json:"input_b64"`
	Summary  struct {
		Messages int `json:"messages"`
		Error    *struct {
			Name   string `json:"name"`
			Reason string `json:"reason"`
			Offset int    `json:"offset"`
		} `json:"error"`
		Paused *struct {
			Offset int `json:"offset"`
		} `json:"paused"`
		Incomplete bool        `json:"incomplete"`
		Method     string      `json:"method"`
		URL        string      `json:"url"`
		Version    string      `json:"version"`
		Headers    [][2]string `json:"headers"`
		Body       string      `json:"body"`
	} `json:"summary"`
}

// loadVectors reads the corpus. A missing or short corpus is a failure,
// not a skip: the test would otherwise pass while checking nothing.
func loadVectors(t *testing.T) []llhttpVector {
	t.Helper()
	f, err := os.Open(llhttpVectorsPath)
	if err != nil {
		t.Fatalf("the llhttp corpus is missing (restore %s): %v", llhttpVectorsPath, err)
	}
	defer f.Close()
	var vs []llhttpVector
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var v llhttpVector
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s:%d: %v", llhttpVectorsPath, len(vs)+1, err)
		}
		vs = append(vs, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(vs) != llhttpVectorCount {
		t.Fatalf("%s holds %d vectors, want %d", llhttpVectorsPath, len(vs), llhttpVectorCount)
	}
	return vs
}

// stricter lists the strict llhttp request vectors that llhttp accepts (or
// leaves incomplete) and we reject, keyed by vector name, with the error we
// give and the RFC clause that justifies it. For the missing-Host
// exceptions the test also re-runs the vector with the Host rule waived and
// then requires llhttp's outcome (or the `then` error when a second rule of
// ours applies), so the rest of the parser is still checked against llhttp.
type stricter struct {
	err  error
	why  string
	then error
}

const (
	whyHost       = "RFC 9112 section 3.2: a server MUST respond 400 to an HTTP/1.1 request without Host"
	whyMethod     = "RFC 9110 section 9.1: a method not in the IANA registry is not recognised, 501"
	whyConnect    = "RFC 9110 section 9.3.6: CONNECT is for tunnelling proxies; this server does not implement it, 501"
	whyVersion    = "RFC 9112 section 2.3: HTTP-version is HTTP-name \"/\" DIGIT \".\" DIGIT with HTTP-name %s\"HTTP\""
	whyNoVersion  = "RFC 9112 section 3: request-line = method SP request-target SP HTTP-version; HTTP/0.9 is not supported"
	whyTE         = "RFC 9112 section 6.1: a server SHOULD answer 501 to a transfer coding it does not implement (only chunked is)"
	whyTargetChar = "RFC 9112 section 3.2 / RFC 3986 section 3.3-3.4: the request-target must be a valid URI component; '\"', '\\\\', '|' are not allowed"
	whyFragment   = "RFC 9112 section 3.2.1: origin-form = absolute-path [\"?\" query], no fragment"
	whyUserinfo   = "RFC 9110 section 4.2.4: a recipient SHOULD treat userinfo in an http URI as an error"
	whyPRI        = "RFC 9113 section 3.4: PRI is the HTTP/2 connection preface, not an HTTP/1.1 method; no HTTP/2 prior knowledge here, 501"
)

var llhttpStricter = map[string]stricter{
	"Connection header / `keep-alive` / Setting flag":                                                           {ErrMissingHost, whyHost, nil},
	"Connection header / `keep-alive` / Restarting when keep-alive is explicitly":                               {ErrMissingHost, whyHost, nil},
	"Connection header / `close` / Setting flag on `close`":                                                     {ErrMissingHost, whyHost, nil},
	"Connection header / `close` / Setting flag on `close` followed by tab":                                     {ErrMissingHost, whyHost, nil},
	"Connection header / Parsing multiple tokens / Sample":                                                      {ErrMissingHost, whyHost, nil},
	"Connection header / Parsing multiple tokens / Multiple tokens with folding and LWS":                        {ErrMissingHost, whyHost, nil},
	"Connection header / `upgrade` / Setting a flag and pausing":                                                {ErrMissingHost, whyHost, nil},
	"Connection header / `upgrade` / Emitting part of body and pausing":                                         {ErrMissingHost, whyHost, nil},
	"Content-Length header / `Content-Length` with zeroes":                                                      {ErrMissingHost, whyHost, nil},
	"Content-Length header / `Content-Length` with follow-up headers":                                           {ErrMissingHost, whyHost, nil},
	"Content-Length header / Spaces in `Content-Length` (surrounding)":                                          {ErrMissingHost, whyHost, nil},
	"Content-Length header / Spaces in `Content-Length` (surrounding) / Tabs in `Content-Length` (surrounding)": {ErrMissingHost, whyHost, nil},
	"Content-Length header / Content-Length reset when no body is received":                                     {ErrMissingHost, whyHost, nil},
	"Finish / It should be safe to finish after GET request":                                                    {ErrMissingHost, whyHost, nil},
	"Methods / REPORT request":                                                                    {ErrMissingHost, whyHost, nil},
	"Methods / CONNECT request":                                                                   {ErrMethodNotImplemented, whyConnect, nil},
	"Methods / CONNECT request with CAPS":                                                         {ErrMethodNotImplemented, whyConnect, nil},
	"Methods / CONNECT with body":                                                                 {ErrMethodNotImplemented, whyConnect, nil},
	"Methods / M-SEARCH request":                                                                  {ErrMethodNotImplemented, whyMethod, nil},
	"Methods / PURGE request":                                                                     {ErrMethodNotImplemented, whyMethod, nil},
	"Methods / SOURCE request":                                                                    {ErrMethodNotImplemented, whyMethod, nil},
	"Methods / SOURCE request with ICE":                                                           {ErrMethodNotImplemented, whyMethod, nil},
	"Methods / OPTIONS request with RTSP":                                                         {ErrVersion, whyVersion, nil},
	"Methods / ANNOUNCE request with RTSP":                                                        {ErrMethodNotImplemented, whyMethod, nil},
	"Methods / PRI request HTTP2":                                                                 {ErrMethodNotImplemented, whyPRI, nil},
	"Pausing / on_message_begin":                                                                  {ErrMissingHost, whyHost, nil},
	"Pausing / on_message_complete":                                                               {ErrMissingHost, whyHost, nil},
	"Pausing / on_protocol_complete":                                                              {ErrMissingHost, whyHost, nil},
	"Pausing / on_method_complete":                                                                {ErrMissingHost, whyHost, nil},
	"Pausing / on_url_complete":                                                                   {ErrMissingHost, whyHost, nil},
	"Pausing / on_version_complete":                                                               {ErrMissingHost, whyHost, nil},
	"Pausing / on_header_field_complete":                                                          {ErrMissingHost, whyHost, nil},
	"Pausing / on_header_value_complete":                                                          {ErrMissingHost, whyHost, nil},
	"Pausing / on_headers_complete":                                                               {ErrMissingHost, whyHost, nil},
	"Pausing / on_chunk_header":                                                                   {ErrMissingHost, whyHost, nil},
	"Pausing / on_chunk_extension_name":                                                           {ErrMissingHost, whyHost, nil},
	"Pausing / on_chunk_extension_value":                                                          {ErrMissingHost, whyHost, nil},
	"Pausing / on_chunk_complete":                                                                 {ErrMissingHost, whyHost, nil},
	"Pipelining / Should parse multiple events":                                                   {ErrMissingHost, whyHost, nil},
	"Sample requests / Simple request":                                                            {ErrMissingHost, whyHost, nil},
	"Sample requests / Request with method starting with `H`":                                     {ErrMissingHost, whyHost, nil},
	"Sample requests / DUMBPACK":                                                                  {ErrMissingHost, whyHost, nil},
	"Sample requests / No headers and no body":                                                    {ErrMissingHost, whyHost, nil},
	"Sample requests / One header and no body":                                                    {ErrMissingHost, whyHost, nil},
	"Sample requests / Prefix newline":                                                            {ErrMissingHost, whyHost, nil},
	"Sample requests / No HTTP version":                                                           {ErrVersion, whyNoVersion, nil},
	"Sample requests / Request starting with CRLF":                                                {ErrMissingHost, whyHost, nil},
	"Sample requests / Extended Characters":                                                       {ErrMissingHost, whyHost, nil},
	"Sample requests / 255 ASCII in header value":                                                 {ErrMissingHost, whyHost, nil},
	"Transfer-Encoding header / `chunked` / Parsing and setting flag":                             {ErrMissingHost, whyHost, nil},
	"Transfer-Encoding header / `chunked` / Parse chunks with lowercase size":                     {ErrMissingHost, whyHost, nil},
	"Transfer-Encoding header / `chunked` / Parse chunks with uppercase size":                     {ErrMissingHost, whyHost, nil},
	"Transfer-Encoding header / `chunked` / POST with `Transfer-Encoding: chunked`":               {ErrMissingHost, whyHost, nil},
	"Transfer-Encoding header / `chunked` / Two chunks and triple zero prefixed end chunk":        {ErrMissingHost, whyHost, nil},
	"Transfer-Encoding header / `chunked` / Trailing headers":                                     {ErrMissingHost, whyHost, nil},
	"Transfer-Encoding header / `chunked` / Chunk extensions":                                     {ErrMissingHost, whyHost, nil},
	"Transfer-Encoding header / `chunked` / Chunk extensions quoting":                             {ErrMissingHost, whyHost, nil},
	"Transfer-Encoding header / POST with `chunked` as last transfer-encoding":                    {ErrTarget, whyFragment + "; " + whyTE, nil},
	"Transfer-Encoding header / POST with `chunked` as last transfer-encoding (multiple headers)": {ErrTarget, whyFragment + "; " + whyTE, nil},
	"URI / Quotes in URI":                                                                         {ErrTarget, whyTargetChar, nil},
	"URI / Query URL with question mark":                                                          {ErrMissingHost, whyHost, nil},
	"URI / Host terminated by a query string":                                                     {ErrMissingHost, whyHost, nil},
	"URI / `host:port` terminated by a query string":                                              {ErrMissingHost, whyHost, nil},
	"URI / Query URL with vertical bar character":                                                 {ErrTarget, whyTargetChar, nil},
	"URI / `host:port` terminated by a space":                                                     {ErrMissingHost, whyHost, nil},
	"URI / Fragment in URI":                                                                       {ErrTarget, whyFragment, nil},
	"URI / Underscore in hostname":                                                                {ErrMethodNotImplemented, whyConnect, nil},
	"URI / `host:port` and basic auth":                                                            {ErrTarget, whyUserinfo, nil},
}

func TestLLHTTPConformance(t *testing.T) {
	vs := loadVectors(t)
	seen := map[string]bool{}
	strict, lenient := 0, 0
	for _, v := range vs {
		in, err := base64.StdEncoding.DecodeString(v.InputB64)
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		switch {
		case strings.HasPrefix(v.Type, "request-lenient"):
			lenient++
			o := run(defaultParser(), in)
			if o.Err == nil {
				t.Errorf("lenient vector %q (%s:%d) accepted, must be rejected: %v", v.Name, v.File, v.Line, o)
			}
		case v.Type == "request" || v.Type == "request-finish":
			strict++
			t.Run(v.Name, func(t *testing.T) {
				o := runSplits(t, defaultParser, in)
				ex, listed := llhttpStricter[v.Name]
				if listed {
					seen[v.Name] = true
					if v.Summary.Error != nil {
						t.Fatalf("listed as stricter but llhttp rejects it too (%s): remove it from the table", v.Summary.Error.Name)
					}
					if !errors.Is(o.Err, ex.err) {
						t.Fatalf("listed as rejected with %v (%s), got %v", ex.err, ex.why, o)
					}
					if !errors.Is(ex.err, ErrMissingHost) {
						return
					}
					// Waive the Host rule and compare with llhttp.
					o = runSplits(t, func() *Parser { p := defaultParser(); p.waiveHost = true; return p }, in)
					if ex.then != nil {
						if !errors.Is(o.Err, ex.then) {
							t.Fatalf("with Host waived: want %v, got %v", ex.then, o)
						}
						return
					}
					if v.Meta["skipBody"] == true {
						return // llhttp's skipBody callback is not wire behaviour
					}
				}
				if msg := compareLLHTTP(v, in, o); msg != "" {
					t.Fatalf("%s\ninput %q\nllhttp %+v\nours   %v", msg, in, v.Summary, o)
				}
			})
		}
	}
	for name := range llhttpStricter {
		if !seen[name] {
			t.Errorf("exception %q matches no strict vector", name)
		}
	}
	t.Logf("%d strict vectors (%d deliberately stricter), %d lenient vectors rejected", strict, len(llhttpStricter), lenient)
}

// compareLLHTTP returns "" when our outcome o for in is llhttp's.
func compareLLHTTP(v llhttpVector, in []byte, o outcome) string {
	s := v.Summary
	if len(o.Reqs) != s.Messages {
		return "message count differs"
	}
	switch {
	case s.Error != nil:
		if o.Err == nil {
			return "llhttp rejects (" + s.Error.Name + "), we do not"
		}
	case s.Paused != nil:
		if !o.Upgraded {
			return "llhttp hands over at Upgrade, we do not"
		}
		if consumed := len(in) - o.Pending; consumed != s.Paused.Offset {
			return "handed over at a different offset"
		}
	default:
		if o.Err != nil || o.Upgraded {
			return "llhttp accepts, we reject or hand over"
		}
		if s.Incomplete && o.Pending == 0 {
			return "llhttp needs more bytes, we do not"
		}
	}
	// llhttp's summary holds bytes as Latin-1 code points.
	s.Method, s.URL, s.Body = latin1(s.Method), latin1(s.URL), latin1(s.Body)
	// llhttp's summary concatenates the spans of every message it began,
	// including an unfinished last one; ours must be a prefix of it.
	var method, url, version, body strings.Builder
	var headers [][2]string
	for _, r := range o.Reqs {
		method.WriteString(r.Method)
		url.WriteString(r.Target)
		version.WriteString("1." + string(rune('0'+r.Minor)))
		body.WriteString(r.Body)
		headers = append(headers, r.Headers...)
		headers = append(headers, r.Trailers...)
	}
	if !strings.HasPrefix(s.Method, method.String()) || !strings.HasPrefix(s.URL, url.String()) ||
		!strings.HasPrefix(s.Version, version.String()) || !strings.HasPrefix(s.Body, body.String()) {
		return "method, target, version or body differs"
	}
	if len(headers) > len(s.Headers) {
		return "more headers than llhttp"
	}
	for k, h := range headers {
		// llhttp reports values with trailing OWS; we trim it (RFC 9110
		// section 5.5).
		want := [2]string{latin1(s.Headers[k][0]), strings.TrimRight(latin1(s.Headers[k][1]), " \t")}
		// One corpus artefact: "255 ASCII in header value" has the raw
		// byte 0xFF in its input but UTF-8 "\u00ff" in llhttp's summary.
		if h != want && !(v.Name == "Sample requests / 255 ASCII in header value" && want[1] == asUTF8(h[1])) {
			return "header " + h[0] + " differs"
		}
	}
	return ""
}

// latin1 turns a string of code points U+0000..U+00FF back into bytes.
func latin1(s string) string {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		b = append(b, byte(r))
	}
	return string(b)
}

// asUTF8 encodes each byte of s as the code point of the same value.
func asUTF8(s string) string {
	r := make([]rune, len(s))
	for i := 0; i < len(s); i++ {
		r[i] = rune(s[i])
	}
	return string(r)
}
