package httpparse

import (
	"errors"
	"strings"
	"testing"
)

const host = "Host: a.example\r\n"

// TestReject is the table of requests that must be rejected, each named by
// the rule (and RFC clause) that rejects it. Every input is also fed split at
// every offset and one byte at a time, with the same outcome.
func TestReject(t *testing.T) {
	f := func(name, in string, want error) {
		t.Helper()
		t.Run(name, func(t *testing.T) {
			o := runSplits(t, defaultParser, []byte(in))
			if !errors.Is(o.Err, want) {
				t.Fatalf("%q:\n got %v\nwant %v", in, o, want)
			}
			if o.Status != errTable[want].status {
				t.Fatalf("status %d, want %d", o.Status, errTable[want].status)
			}
		})
	}
	post := "POST / HTTP/1.1\r\n" + host

	// Smuggling: framing headers (RFC 9112 section 6).
	f("CL+TE rfc9112-6.1", post+"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", ErrLengthWithEncoding)
	f("TE+CL rfc9112-6.1", post+"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", ErrLengthWithEncoding)
	f("TE identity+CL rfc9112-6.1", post+"Transfer-Encoding: identity\r\nContent-Length: 5\r\n\r\n", ErrEncodingNotImpl)
	f("TE identity rfc9112-6.1 501", post+"Transfer-Encoding: identity\r\n\r\n", ErrEncodingNotImpl)
	f("TE gzip,chunked rfc9112-6.1 501", post+"Transfer-Encoding: gzip, chunked\r\n\r\n", ErrEncodingNotImpl)
	f("TE chunked,gzip rfc9112-6.3", post+"Transfer-Encoding: chunked, gzip\r\n\r\n", ErrTransferEncoding)
	f("TE chunked twice rfc9112-7", post+"Transfer-Encoding: chunked, chunked\r\n\r\n", ErrTransferEncoding)
	f("TE chunked in two fields rfc9112-7", post+"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", ErrTransferEncoding)
	f("TE empty rfc9112-6.1", post+"Transfer-Encoding: \r\n\r\n", ErrTransferEncoding)
	f("TE only commas rfc9112-6.1", post+"Transfer-Encoding: , ,\r\n\r\n", ErrTransferEncoding)
	f("TE empty element rfc9112-6.1", post+"Transfer-Encoding: , chunked\r\n\r\n", ErrTransferEncoding)
	f("TE trailing comma rfc9112-6.1", post+"Transfer-Encoding: chunked,\r\n\r\n", ErrTransferEncoding)
	f("TE chunked with parameter rfc9112-7", post+"Transfer-Encoding: chunked;q=1\r\n\r\n", ErrTransferEncoding)
	f("TE xchunked", post+"Transfer-Encoding: xchunked\r\n\r\n", ErrEncodingNotImpl)
	f("TE chunked with vertical tab", post+"Transfer-Encoding: \vchunked\r\n\r\n", ErrFieldValue)
	f("TE in HTTP/1.0 rfc9112-6.1", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", ErrEncodingHTTP10)
	f("space before colon rfc9112-5.1", post+"Transfer-Encoding : chunked\r\n\r\n", ErrSpaceBeforeColon)
	f("tab before colon rfc9112-5.1", post+"Content-Length\t: 1\r\n\r\nx", ErrSpaceBeforeColon)
	f("duplicate CL rfc9112-6.3", post+"Content-Length: 1\r\nContent-Length: 2\r\n\r\n", ErrDuplicateLength)
	f("duplicate identical CL rfc9112-6.3", post+"Content-Length: 1\r\nContent-Length: 1\r\n\r\nx", ErrDuplicateLength)
	f("CL list rfc9110-8.6", post+"Content-Length: 1, 1\r\n\r\nx", ErrContentLength)
	f("CL plus sign rfc9110-8.6", post+"Content-Length: +1\r\n\r\nx", ErrContentLength)
	f("CL minus sign rfc9110-8.6", post+"Content-Length: -1\r\n\r\n", ErrContentLength)
	f("CL inner space rfc9110-8.6", post+"Content-Length: 1 2\r\n\r\n", ErrContentLength)
	f("CL hex rfc9110-8.6", post+"Content-Length: 0x1\r\n\r\n", ErrContentLength)
	f("CL empty rfc9110-8.6", post+"Content-Length:\r\n\r\n", ErrContentLength)
	f("CL overflow rfc9110-8.6", post+"Content-Length: 9223372036854775808\r\n\r\n", ErrContentLength)
	f("CL huge overflow rfc9110-8.6", post+"Content-Length: 1000000000000000000000\r\n", ErrContentLength)
	f("CL max int64 over MaxBody 413", post+"Content-Length: 9223372036854775807\r\n\r\n", ErrBodyTooLarge)
	f("obs-fold rfc9112-5.2", post+"X: a\r\n b\r\n\r\n", ErrObsFold)
	f("obs-fold tab rfc9112-5.2", post+"X: a\r\n\tb\r\n\r\n", ErrObsFold)
	f("obs-fold of TE rfc9112-5.2", post+"Transfer-Encoding: chunked\r\n  abc\r\n\r\n", ErrObsFold)
	f("whitespace after start line rfc9112-2.2", "GET / HTTP/1.1\r\n Host: a\r\n\r\n", ErrLeadingWhitespace)

	// Line endings (RFC 9112 section 2.2).
	f("bare LF in request line rfc9112-2.2", "GET / HTTP/1.1\n"+host+"\r\n", ErrBareLF)
	f("bare CR in request line rfc9112-2.2", "GET / HTTP/1.1\rHost: a\r\n\r\n", ErrBareCR)
	f("bare LF after field rfc9112-2.2", "GET / HTTP/1.1\r\nHost: a\nX: 1\r\n\r\n", ErrBareLF)
	f("bare CR in field value rfc9112-2.2", "GET / HTTP/1.1\r\nHost: a\rX: 1\r\n\r\n", ErrBareCR)
	f("bare CR ends head rfc9112-2.2", "GET / HTTP/1.1\r\n"+host+"\rX", ErrBareCR)
	f("bare LF ends head rfc9112-2.2", "GET / HTTP/1.1\r\n"+host+"\n", ErrBareLF)
	f("bare LF before request rfc9112-2.2", "\nGET / HTTP/1.1\r\n"+host+"\r\n", ErrBareLF)
	f("bare CR before request rfc9112-2.2", "\rGET / HTTP/1.1\r\n"+host+"\r\n", ErrBareCR)

	// Field values and names (RFC 9110 section 5).
	f("NUL in value rfc9110-5.5", "GET / HTTP/1.1\r\n"+host+"X: a\x00b\r\n\r\n", ErrFieldValue)
	f("DEL in value rfc9110-5.5", "GET / HTTP/1.1\r\n"+host+"X: a\x7fb\r\n\r\n", ErrFieldValue)
	f("form feed in value rfc9110-5.5", "GET / HTTP/1.1\r\n"+host+"X: \x0c\r\n\r\n", ErrFieldValue)
	f("name not a token rfc9110-5.1", "GET / HTTP/1.1\r\n"+host+"X@: 1\r\n\r\n", ErrFieldName)
	f("empty name rfc9110-5.1", "GET / HTTP/1.1\r\n"+host+": 1\r\n\r\n", ErrFieldName)
	f("name without colon rfc9110-5.1", "GET / HTTP/1.1\r\n"+host+"X\r\n\r\n", ErrFieldName)
	f("non-ASCII name rfc9110-5.1", "GET / HTTP/1.1\r\n"+host+"X\xff: 1\r\n\r\n", ErrFieldName)

	// Host (RFC 9112 section 3.2).
	f("missing Host in 1.1 rfc9112-3.2", "GET / HTTP/1.1\r\n\r\n", ErrMissingHost)
	f("missing Host absolute-form rfc9112-3.2", "GET http://a/ HTTP/1.1\r\n\r\n", ErrMissingHost)
	f("two Hosts rfc9112-3.2", "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", ErrDuplicateHost)
	f("two Hosts in 1.0 rfc9112-3.2", "GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", ErrDuplicateHost)
	f("Host with path rfc9110-7.2", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", ErrInvalidHost)
	f("Host with userinfo rfc9110-7.2", "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", ErrInvalidHost)
	f("Host with space rfc9110-7.2", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", ErrInvalidHost)
	f("Host bad port rfc9110-7.2", "GET / HTTP/1.1\r\nHost: a:8x\r\n\r\n", ErrInvalidHost)
	f("Host unclosed IP literal rfc9110-7.2", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", ErrInvalidHost)
	f("Host bad pct rfc3986-2.1", "GET / HTTP/1.1\r\nHost: a%2\r\n\r\n", ErrInvalidHost)

	// Method (RFC 9110 section 9.1).
	f("method not a token rfc9110-9.1", "G@T / HTTP/1.1\r\n"+host+"\r\n", ErrMethod)
	f("empty method rfc9112-3", " / HTTP/1.1\r\n"+host+"\r\n", ErrMethod)
	f("lower-case method rfc9110-9.1 501", "get / HTTP/1.1\r\n"+host+"\r\n", ErrMethodNotImplemented)
	f("unknown method rfc9110-9.1 501", "BREW / HTTP/1.1\r\n"+host+"\r\n", ErrMethodNotImplemented)
	f("overlong method rfc9110-9.1 501", strings.Repeat("A", 40), ErrMethodNotImplemented)
	f("CONNECT not implemented rfc9110-9.3.6", "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", ErrMethodNotImplemented)
	f("PRI preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", ErrMethodNotImplemented)
	f("two spaces after method rfc9112-3", "GET  / HTTP/1.1\r\n"+host+"\r\n", ErrTarget)

	// Request target (RFC 9112 section 3.2).
	f("asterisk for GET rfc9112-3.2.4", "GET * HTTP/1.1\r\n"+host+"\r\n", ErrTarget)
	f("asterisk with path rfc9112-3.2.4", "OPTIONS */a HTTP/1.1\r\n"+host+"\r\n", ErrTarget)
	f("fragment rfc9112-3.2.1", "GET /a#b HTTP/1.1\r\n"+host+"\r\n", ErrTarget)
	f("quote in path rfc3986-3.3", "GET /a\"b HTTP/1.1\r\n"+host+"\r\n", ErrTarget)
	f("backslash in path rfc3986-3.3", "GET /a\\b HTTP/1.1\r\n"+host+"\r\n", ErrTarget)
	f("non-ASCII path rfc3986-3.3", "GET /\xc3\xa9 HTTP/1.1\r\n"+host+"\r\n", ErrTarget)
	f("bad pct rfc3986-2.1", "GET /%zz HTTP/1.1\r\n"+host+"\r\n", ErrTarget)
	f("short pct rfc3986-2.1", "GET /%4 HTTP/1.1\r\n"+host+"\r\n", ErrTarget)
	f("bracket in path rfc3986-3.3", "GET /[a] HTTP/1.1\r\n"+host+"\r\n", ErrTarget)
	f("relative target rfc9112-3.2", "GET a HTTP/1.1\r\n"+host+"\r\n", ErrTarget)
	f("authority-form for GET rfc9112-3.2.3", "GET a:80 HTTP/1.1\r\n"+host+"\r\n", ErrTarget)
	f("absolute-form userinfo rfc9110-4.2.4", "GET http://u:p@a/ HTTP/1.1\r\n"+host+"\r\n", ErrTarget)
	f("absolute-form empty host rfc9110-4.2.1", "GET http:///a HTTP/1.1\r\n"+host+"\r\n", ErrTarget)
	f("absolute-form ftp rfc9112-3.2.2", "GET ftp://a/ HTTP/1.1\r\n"+host+"\r\n", ErrTarget)
	f("space in target rfc9112-3", "GET /a b HTTP/1.1\r\n"+host+"\r\n", ErrVersion)
	f("tab in target rfc9112-3", "GET /a\tb HTTP/1.1\r\n"+host+"\r\n", ErrTarget)

	// Version (RFC 9112 section 2.3).
	f("HTTP/0.9 request line rfc9112-3", "GET /\r\n\r\n", ErrVersion)
	f("HTTP/1.2 505", "GET / HTTP/1.2\r\n"+host+"\r\n", ErrVersionNotSupported)
	f("HTTP/2.0 505", "GET / HTTP/2.0\r\n"+host+"\r\n", ErrVersionNotSupported)
	f("HTTP/5.6 no CRLF 505", "GET / HTTP/5.6", ErrVersionNotSupported)
	f("HTTP/1.10 505", "GET / HTTP/1.10\r\n"+host+"\r\n", ErrVersionNotSupported)
	f("lower-case http rfc9112-2.3", "GET / http/1.1\r\n"+host+"\r\n", ErrVersion)
	f("ICE protocol rfc9112-2.3", "SOURCE / ICE/1.0\r\n\r\n", ErrMethodNotImplemented)
	f("RTSP protocol rfc9112-2.3", "OPTIONS / RTSP/1.0\r\n\r\n", ErrVersion)
	f("space after version rfc9112-3", "GET / HTTP/1.1 \r\n"+host+"\r\n", ErrVersion)

	// Expect, Connection, Upgrade.
	f("unknown expectation rfc9110-10.1.1 417", "POST / HTTP/1.1\r\n"+host+"Expect: 200-ok\r\n\r\n", ErrExpectation)
	f("Connection not tokens rfc9110-7.6.1", "GET / HTTP/1.1\r\n"+host+"Connection: a b\r\n\r\n", ErrConnection)
	f("Upgrade empty version rfc9110-7.8", "GET / HTTP/1.1\r\n"+host+"Connection: upgrade\r\nUpgrade: websocket/\r\n\r\n", ErrUpgrade)
	f("Upgrade empty rfc9110-7.8", "GET / HTTP/1.1\r\n"+host+"Upgrade: \r\n\r\n", ErrUpgrade)

	// Chunked framing (RFC 9112 section 7.1).
	te := post + "Transfer-Encoding: chunked\r\n\r\n"
	f("empty chunk size rfc9112-7.1", te+"\r\n", ErrChunkSize)
	f("missing last-chunk rfc9112-7.1", te+"3\r\nfoo\r\n\r\n", ErrChunkSize)
	f("17 hex digits rfc9112-7.1", te+"00000000000000001\r\n", ErrChunkSize)
	f("16 hex digits over MaxBody 413", te+"FFFFFFFFFFFFFFFF\r\n", ErrBodyTooLarge)
	f("chunk size with sign", te+"+1\r\nA\r\n0\r\n\r\n", ErrChunkSize)
	f("chunk size 0x prefix", te+"0x1\r\nA\r\n0\r\n\r\n", ErrChunkSize)
	f("space after chunk size rfc9112-7.1.1", te+"a \r\n0123456789\r\n0\r\n\r\n", ErrChunkExtension)
	f("no semicolon before extension rfc9112-7.1.1", te+"2 erf\r\naa\r\n0\r\n\r\n", ErrChunkExtension)
	f("no extension after semicolon rfc9112-7.1.1", te+"2;\r\naa\r\n0\r\n\r\n", ErrChunkExtension)
	f("extension value missing rfc9112-7.1.1", te+"2;a=\r\naa\r\n0\r\n\r\n", ErrChunkExtension)
	f("CR in quoted extension rfc9112-7.1.1", te+"2;a=\"b\rc\"\r\naa\r\n0\r\n\r\n", ErrChunkExtension)
	f("LF in quoted extension rfc9112-7.1.1", te+"2;a=\"b\nc\"\r\naa\r\n0\r\n\r\n", ErrChunkExtension)
	f("unterminated quoted extension rfc9112-7.1.1", te+"2;a=\"b\r\naa\r\n0\r\n\r\n", ErrChunkExtension)
	f("token after quoted extension rfc9112-7.1.1", te+"2;a=\"b\"c\r\naa\r\n0\r\n\r\n", ErrChunkExtension)
	f("NUL in extension rfc9112-7.1.1", te+"2;a\x00\r\naa\r\n0\r\n\r\n", ErrChunkExtension)
	f("bare LF after chunk size rfc9112-7.1", te+"1\nA\r\n0\r\n\r\n", ErrBareLF)
	f("bare CR after chunk size rfc9112-7.1", te+"1\rA\r\n0\r\n\r\n", ErrBareCR)
	f("bare LF after chunk data rfc9112-7.1", te+"1\r\nA\n0\r\n\r\n", ErrBareLF)
	f("bare CR after chunk data rfc9112-7.1", te+"1\r\nA\r0\r\n\r\n", ErrBareCR)
	f("chunk data too long rfc9112-7.1", te+"1\r\nAB\r\n0\r\n\r\n", ErrChunkData)
	f("bare LF in trailer rfc9112-7.1.2", te+"0\r\nX: 1\n\r\n", ErrBareLF)
	f("obs-fold in trailer rfc9112-5.2", te+"0\r\nX: 1\r\n 2\r\n\r\n", ErrObsFold)
	f("space before colon in trailer rfc9112-5.1", te+"0\r\nX : 1\r\n\r\n", ErrSpaceBeforeColon)
	f("bare LF ends trailers rfc9112-7.1", te+"0\r\n\n", ErrBareLF)
	f("missing CRLF-CRLF before body rfc9112-2.2", post+"Content-Length: 3\r\n\rabc", ErrBareCR)
}

// TestAccept checks what a good request parses to; each input is fed split
// at every offset too.
func TestAccept(t *testing.T) {
	f := func(name, in string, check func(t *testing.T, rs []reqCopy)) {
		t.Helper()
		t.Run(name, func(t *testing.T) {
			o := runSplits(t, defaultParser, []byte(in))
			if o.Err != nil || o.Pending != 0 {
				t.Fatalf("%q: %v", in, o)
			}
			check(t, o.Reqs)
		})
	}
	eq := func(t *testing.T, what string, got, want any) {
		t.Helper()
		if got != want {
			t.Fatalf("%s = %#v, want %#v", what, got, want)
		}
	}

	f("minimal GET", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", func(t *testing.T, rs []reqCopy) {
		r := rs[0]
		eq(t, "Method", r.Method, "GET")
		eq(t, "Path", r.Path, "/")
		eq(t, "HasQuery", r.HasQuery, false)
		eq(t, "ContentLength", r.ContentLength, int64(-1))
		eq(t, "Body", r.Body, "")
		eq(t, "KeepAlive", r.KeepAlive, true)
		eq(t, "Host", r.Host, "a")
	})
	f("query", "GET /p/q?x=1&y=/?z HTTP/1.1\r\nHost: a\r\n\r\n", func(t *testing.T, rs []reqCopy) {
		eq(t, "Path", rs[0].Path, "/p/q")
		eq(t, "Query", rs[0].Query, "x=1&y=/?z")
	})
	f("empty query", "GET /p? HTTP/1.1\r\nHost: a\r\n\r\n", func(t *testing.T, rs []reqCopy) {
		eq(t, "HasQuery", rs[0].HasQuery, true)
		eq(t, "Query", rs[0].Query, "")
	})
	f("pct-encoded and sub-delims", "GET /a%2Fb;c=d@e:f!$&'()*+,~ HTTP/1.1\r\nHost: a\r\n\r\n", func(t *testing.T, rs []reqCopy) {
		eq(t, "Path", rs[0].Path, "/a%2Fb;c=d@e:f!$&'()*+,~")
	})
	f("OWS trimmed rfc9110-5.5", "GET / HTTP/1.1\r\nHost:a\r\nX: \t v 1 \t \r\nY:\r\nZ:   \r\n\r\n", func(t *testing.T, rs []reqCopy) {
		want := [][2]string{{"Host", "a"}, {"X", "v 1"}, {"Y", ""}, {"Z", ""}}
		for k, h := range want {
			eq(t, "header", rs[0].Headers[k], h)
		}
	})
	f("obs-text value rfc9110-5.5", "GET / HTTP/1.1\r\nHost: a\r\nX: D\xc3\xbcsseldorf\xff\r\n\r\n", func(t *testing.T, rs []reqCopy) {
		eq(t, "X", rs[0].Headers[1][1], "D\xc3\xbcsseldorf\xff")
	})
	f("CL body", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 003\r\n\r\nabc", func(t *testing.T, rs []reqCopy) {
		eq(t, "ContentLength", rs[0].ContentLength, int64(3))
		eq(t, "Body", rs[0].Body, "abc")
	})
	f("CL zero", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", func(t *testing.T, rs []reqCopy) {
		eq(t, "ContentLength", rs[0].ContentLength, int64(0))
		eq(t, "Body", rs[0].Body, "")
	})
	f("chunked with extensions and trailers rfc9112-7.1", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked \r\n\r\n"+
		"5;a;b=c ; d = \"e \\\"f\\\\\"\r\nhello\r\n6\t;x\r\n world\r\n000;end\r\nVary: *\r\nX-T: 1\r\n\r\n", func(t *testing.T, rs []reqCopy) {
		r := rs[0]
		eq(t, "Chunked", r.Chunked, true)
		eq(t, "ContentLength", r.ContentLength, int64(-1))
		eq(t, "Body", r.Body, "hello world")
		eq(t, "trailers", len(r.Trailers), 2)
		eq(t, "trailer", r.Trailers[1], [2]string{"X-T", "1"})
	})
	f("chunked hex sizes", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\nA\r\n0123456789\r\n0\r\n\r\n", func(t *testing.T, rs []reqCopy) {
		eq(t, "Body", rs[0].Body, strings.Repeat("0123456789", 2))
	})
	f("pipelined", "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nPOST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhiGET /3 HTTP/1.1\r\nHost: a\r\n\r\n", func(t *testing.T, rs []reqCopy) {
		eq(t, "count", len(rs), 3)
		eq(t, "2nd body", rs[1].Body, "hi")
		eq(t, "3rd path", rs[2].Path, "/3")
	})
	f("empty lines before request rfc9112-2.2", "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", func(t *testing.T, rs []reqCopy) {
		eq(t, "N", rs[0].N, 4+27)
	})
	f("HTTP/1.0 without Host", "GET / HTTP/1.0\r\n\r\n", func(t *testing.T, rs []reqCopy) {
		eq(t, "Minor", rs[0].Minor, 0)
		eq(t, "KeepAlive", rs[0].KeepAlive, false)
		eq(t, "HasHost", rs[0].HasHost, false)
	})
	f("HTTP/1.0 keep-alive rfc9112-9.3", "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\nGET / HTTP/1.0\r\n\r\n", func(t *testing.T, rs []reqCopy) {
		eq(t, "KeepAlive", rs[0].KeepAlive, true)
		eq(t, "count", len(rs), 2)
	})
	f("Connection close wins rfc9112-9.6", "GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\nConnection: x, CLOSE\t\r\n\r\n", func(t *testing.T, rs []reqCopy) {
		eq(t, "KeepAlive", rs[0].KeepAlive, false)
	})
	f("Expect 100-continue rfc9110-10.1.1", "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\nx", func(t *testing.T, rs []reqCopy) {
		eq(t, "Expect100", rs[0].Expect100, true)
	})
	f("Expect ignored in 1.0 rfc9110-10.1.1", "POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx", func(t *testing.T, rs []reqCopy) {
		eq(t, "Expect100", rs[0].Expect100, false)
	})
	f("Upgrade without Connection upgrade rfc9110-7.8", "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n", func(t *testing.T, rs []reqCopy) {
		eq(t, "Upgrade", rs[0].Upgrade, "")
	})
	f("Upgrade ignored in 1.0 rfc9110-7.8", "GET / HTTP/1.0\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n", func(t *testing.T, rs []reqCopy) {
		eq(t, "Upgrade", rs[0].Upgrade, "")
	})
	f("OPTIONS asterisk rfc9112-3.2.4", "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", func(t *testing.T, rs []reqCopy) {
		eq(t, "Path", rs[0].Path, "*")
	})
	f("absolute-form rfc9112-3.2.2", "GET HTTPS://api.example:8443/v1/models?x=1 HTTP/1.1\r\nHost: other\r\n\r\n", func(t *testing.T, rs []reqCopy) {
		eq(t, "Authority", rs[0].Authority, "api.example:8443")
		eq(t, "Host", rs[0].Host, "api.example:8443")
		eq(t, "Path", rs[0].Path, "/v1/models")
		eq(t, "Query", rs[0].Query, "x=1")
	})
	f("absolute-form no path", "GET http://[::1]:80?q HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", func(t *testing.T, rs []reqCopy) {
		eq(t, "Path", rs[0].Path, "")
		eq(t, "Authority", rs[0].Authority, "[::1]:80")
	})
	f("empty Host rfc9110-7.2", "GET / HTTP/1.1\r\nHost:\r\n\r\n", func(t *testing.T, rs []reqCopy) {
		eq(t, "HasHost", rs[0].HasHost, true)
		eq(t, "Host", rs[0].Host, "")
	})
	f("Content-Type and Header lookup", "POST / HTTP/1.1\r\nhost: a\r\ncontent-TYPE: application/json\r\nContent-Length: 2\r\n\r\n{}", func(t *testing.T, rs []reqCopy) {
		eq(t, "ContentType", rs[0].ContentType, "application/json")
		eq(t, "Host", rs[0].Host, "a")
	})
}

// TestUpgrade: a WebSocket handshake is handed over after its head; the
// bytes after it are not parsed as HTTP.
func TestUpgrade(t *testing.T) {
	in := "GET /v1/realtime HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\r\n\x81\x85garbage"
	o := runSplits(t, defaultParser, []byte(in))
	if !o.Upgraded || len(o.Reqs) != 1 || o.Reqs[0].Upgrade != "websocket" || o.Pending != 9 {
		t.Fatalf("%v", o)
	}
}

// TestDataAfterClose: after a request that closes the connection the
// parser never reads another (llhttp HPE_CLOSED_CONNECTION; RFC 9112
// section 9.6).
func TestDataAfterClose(t *testing.T) {
	for _, in := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n\r\n",
	} {
		o := runSplits(t, defaultParser, []byte(in))
		if len(o.Reqs) != 1 || !errors.Is(o.Err, ErrDataAfterClose) {
			t.Fatalf("%q: %v", in, o)
		}
	}
	// With nothing after it, the parser just waits.
	p := defaultParser()
	var req Request
	if n, err := p.Parse([]byte("GET / HTTP/1.0\r\n\r\n"), &req); n == 0 || err != nil {
		t.Fatal(n, err)
	}
	if n, err := p.Parse(nil, &req); n != 0 || err != nil {
		t.Fatal(n, err)
	}
	p.Reset()
	if n, err := p.Parse([]byte("GET / HTTP/1.0\r\n\r\n"), &req); n == 0 || err != nil {
		t.Fatal("after Reset:", n, err)
	}
}

// TestIncomplete: prefixes of valid requests need more, they never fail.
func TestIncomplete(t *testing.T) {
	in := "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;a=\"q\"\r\nhello\r\n0\r\nT: 1\r\n\r\n"
	for k := 0; k < len(in); k++ {
		o := run(defaultParser(), []byte(in[:k]))
		if o.Err != nil || len(o.Reqs) != 0 || o.Pending != k {
			t.Fatalf("prefix %d: %v", k, o)
		}
	}
}

func TestStickyError(t *testing.T) {
	p := defaultParser()
	var req Request
	_, err1 := p.Parse([]byte("GET / HTTP/1.1\r\nX : 1\r\n\r\n"), &req)
	_, err2 := p.Parse([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), &req)
	if err1 == nil || err1 != err2 {
		t.Fatal(err1, err2)
	}
	var e *Error
	if !errors.As(err1, &e) || e.Status != 400 || e.Code != "whitespace_before_colon" || e.Offset != 17 {
		t.Fatalf("%#v", e)
	}
}

func TestErrorTextEscapesClientBytes(t *testing.T) {
	p := defaultParser()
	var req Request
	_, err := p.Parse([]byte("GET / HTTP/1.1\r\nX: \x1b[31mred\x00\r\n\r\n"), &req)
	s := err.Error()
	for _, c := range []byte(s) {
		if c < 0x20 || c >= 0x7f {
			t.Fatalf("unescaped byte %#x in %q", c, s)
		}
	}
}

// TestHeadersDone: with Expect: 100-continue the head is reported before
// the body arrives, with the head fields valid.
func TestHeadersDone(t *testing.T) {
	p := defaultParser()
	var req Request
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"
	n, err := p.Parse([]byte(head), &req)
	if n != 0 || err != nil || !p.HeadersDone() || !req.Expect100 || string(req.Path) != "/v1/chat/completions" || req.ContentLength != 4 {
		t.Fatalf("n=%d err=%v done=%v req=%+v", n, err, p.HeadersDone(), req)
	}
	// The buffer moves: head fields must follow it.
	buf := []byte(head + "ab")
	if n, err = p.Parse(buf, &req); n != 0 || err != nil || &req.Path[0] != &buf[5] {
		t.Fatal("head not refreshed for the moved buffer", n, err)
	}
	n, err = p.Parse([]byte(head+"abcdGET"), &req)
	if n != len(head)+4 || err != nil || string(req.Body) != "abcd" || p.HeadersDone() {
		t.Fatal(n, err, string(req.Body), p.HeadersDone())
	}
}

func TestLimits(t *testing.T) {
	small := func() *Parser {
		return NewParser(Limits{MaxRequestLine: 64, MaxHeaderBytes: 128, MaxHeaders: 4, MaxBody: 16, MaxChunkExt: 8})
	}
	f := func(name, in string, want error) {
		t.Helper()
		t.Run(name, func(t *testing.T) {
			o := runSplits(t, small, []byte(in))
			if !errors.Is(o.Err, want) {
				t.Fatalf("%q: %v, want %v", in, o, want)
			}
		})
	}
	ok := func(name, in string) {
		t.Helper()
		t.Run(name, func(t *testing.T) {
			o := runSplits(t, small, []byte(in))
			if o.Err != nil || len(o.Reqs) != 1 {
				t.Fatalf("%q: %v", in, o)
			}
		})
	}
	line := func(n int) string { // a request line of exactly n bytes
		return "GET /" + strings.Repeat("a", n-len("GET / HTTP/1.1\r\n")) + " HTTP/1.1\r\n"
	}
	ok("request line at limit", line(64)+host+"\r\n")
	f("request line over limit 414", line(65)+host+"\r\n", ErrRequestLineTooLong)
	f("request line endless 414", "GET /"+strings.Repeat("a", 100), ErrRequestLineTooLong)
	f("request line endless pct 414", "GET /"+strings.Repeat("%41", 30), ErrRequestLineTooLong)
	f("empty lines count toward request line 414", strings.Repeat("\r\n", 40)+"GET / HTTP/1.1\r\n", ErrRequestLineTooLong)
	hdrs := func(n int) string { // a header section of exactly n bytes
		return "X: " + strings.Repeat("v", n-len("X: \r\n\r\n")) + "\r\n\r\n"
	}
	ok("headers at limit", "GET / HTTP/1.0\r\n"+hdrs(128))
	f("headers over limit 431", "GET / HTTP/1.0\r\n"+hdrs(129), ErrHeadersTooLarge)
	f("endless header value 431", "GET / HTTP/1.0\r\nX: "+strings.Repeat("v", 200), ErrHeadersTooLarge)
	ok("4 headers", "GET / HTTP/1.1\r\nHost: a\r\nB: 1\r\nC: 1\r\nD: 1\r\n\r\n")
	f("5 headers 431", "GET / HTTP/1.1\r\nHost: a\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\n\r\n", ErrTooManyHeaders)
	f("headers plus trailers 431", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nA: 1\r\nB: 1\r\nC: 1\r\n\r\n", ErrTooManyHeaders)
	f("trailers over limit 431", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: "+strings.Repeat("v", 200), ErrHeadersTooLarge)
	ok("body at limit", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 16\r\n\r\n"+strings.Repeat("b", 16))
	f("body over limit 413", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 17\r\n\r\n", ErrBodyTooLarge)
	te := "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
	ok("chunked body at limit", te+"8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n")
	f("chunked body over limit 413", te+"8\r\n12345678\r\n9\r\n", ErrBodyTooLarge)
	ok("chunk extensions at limit", te+"1;aaaaaaa\r\nx\r\n0\r\n\r\n")
	f("chunk extensions over limit 413", te+"1;aaaaaaaa\r\nx\r\n0\r\n\r\n", ErrChunkExtensionTooLong)
	f("chunk extensions over limit in total 413", te+"1;aaaa\r\nx\r\n1;bbbb\r\nx\r\n0\r\n\r\n", ErrChunkExtensionTooLong)
	f("endless chunk extension 413", te+"1;a="+strings.Repeat("b", 100), ErrChunkExtensionTooLong)
}

func TestChunkOverhead(t *testing.T) {
	// 1-byte chunks with 16-digit sizes: 21 framing bytes per data byte.
	var b strings.Builder
	b.WriteString("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
	for b.Len() < 2*chunkOverheadAllowance {
		b.WriteString("0000000000000001\r\nx\r\n")
	}
	o := run(defaultParser(), []byte(b.String()))
	if !errors.Is(o.Err, ErrChunkOverhead) || o.Status != 413 {
		t.Fatal(o)
	}
}
