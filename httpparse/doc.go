// Package httpparse is Vajra's HTTP/1.1 request parser and response writer:
// strict, incremental, zero-copy. Every byte from the internet meets it
// first (gnet has no HTTP), so it accepts what RFC 9112 and RFC 9110 allow
// and rejects anything whose framing two parsers could read differently.
//
// # Parsing
//
// A Parser belongs to one connection (Loop-only). The caller passes the
// bytes buffered for the connection, starting at the current request;
// Parse returns a complete request (n > 0), "need more" (0, nil), or an
// *Error. Progress is kept as offsets, so the buffer may move between
// calls, and resuming never rescans accepted bytes: a client sending one
// byte at a time costs O(n) (TestLinearWork counts the bytes examined).
// Method, target, header names and values are slices of the input; a
// chunked body is decoded (by ChunkedDecoder, which a client may use on
// its own for chunked responses, as vajra bench does) into the Parser's
// reusable scratch buffer. Once
// warm, Parse allocates nothing (TestZeroAllocs). Pipelined requests are
// parsed by calling Parse again on the rest of the buffer.
//
// Every error is sticky and means "answer with (*Error).Response and close":
// the parser never reads a request from a connection whose framing is in
// doubt, nor after a request that closes the connection.
//
// # Rules (each has a named test in request_test.go)
//
//   - Line endings are CRLF; a bare CR or bare LF anywhere is 400 (RFC 9112
//     section 2.2). Empty lines before a request are skipped.
//   - The method is a token registered with IANA; others get 501, CONNECT
//     and PRI included (RFC 9110 section 9.1).
//   - The target is origin-form, "*" for OPTIONS, or absolute-form with an
//     http or https scheme and no userinfo; every byte must be valid for its
//     URI component and '%' must start a pct-encoding (RFC 9112 section 3.2,
//     RFC 3986). The version is HTTP/1.0 or HTTP/1.1; other well-formed
//     versions get 505.
//   - No whitespace before the colon, no obs-fold, no whitespace before the
//     first field line; names are tokens; values are field-vchar, SP, HTAB
//     and obs-text, with OWS trimmed (RFC 9112 section 5, RFC 9110 section 5).
//   - Exactly one Host in HTTP/1.1 (at most one in 1.0), with a valid
//     uri-host[:port] (RFC 9112 section 3.2).
//   - Content-Length is 1*DIGIT within int64; duplicates (even identical),
//     and Content-Length with Transfer-Encoding, are 400. Transfer-Encoding
//     must be exactly "chunked": another coding is 501, chunked not last or
//     twice or an empty list element is 400, and any Transfer-Encoding in
//     HTTP/1.0 is 400 (RFC 9112 section 6).
//   - Chunk sizes are 1 to 16 hex digits; extensions follow the RFC 9112
//     section 7.1.1 grammar (quoted strings included) and are bounded;
//     chunk data ends with CRLF; trailers are parsed like headers.
//   - Expect: 100-continue sets Expect100 (other expectations 417); Connection
//     tokens decide KeepAlive for 1.0 and 1.1; Upgrade with Connection:
//     upgrade sets Upgrade so a WebSocket handshake can take over.
//
// Limits (limits.go) answer 414 (request line), 431 (header bytes, field
// count), 413 (body, chunk extensions, chunked framing overhead) as soon as
// the bytes that exceed them arrive.
//
// # Conformance and fuzzing
//
// TestLLHTTPConformance runs every request vector of
// testdata/llhttp/vectors.jsonl (llhttp v9.4.2, MIT, with its license; a
// missing corpus fails the test): strict vectors must
// get llhttp's outcome except the ones listed in llhttpStricter with the RFC
// clause that makes us stricter (missing Host in HTTP/1.1, unregistered
// methods and CONNECT, non-HTTP protocols, HTTP/0.9, fragments and '"', '\',
// '|' in targets, userinfo); every request-lenient-* vector is rejected.
// FuzzParse checks invariants, FuzzSplit compares a parse split in pieces
// with the whole, and FuzzDifferential compares with net/http's ReadRequest.
//
// # Responses
//
// response.go appends status lines, headers (CR/LF-safe), Content-Length,
// Date and chunked framing into a caller's buffer, and holds the canned
// error responses (Connection: close, OpenAI-shaped JSON body) for every
// parse error.
//
// # Performance
//
// go test -run XXX -bench BenchmarkParse -benchtime 1s -count 3 ./httpparse/
// on a 2-core VM (cpu: "Oxide Virtual Turin-like Processor", shared with
// other builds, so absolute numbers are noisy; the Ours/NetHTTP pairs run
// in the same process and the ratio is what counts). NetHTTP is
// http.ReadRequest on the same bytes plus reading the body. Medians of 3:
//
//	benchmark            ours ns/op  allocs   net/http ns/op  allocs   ratio
//	SDKChat (2.3 KB)         1275       0          11709         34      9.2x
//	MinimalGET                155       0           4588          6     29.6x
//	Pipelined16 (16 GET)     7259       0          85835        176     11.8x
//
// Under heavier load from other jobs (one run, -count 1) the worst ratios
// seen were 7.6x, 14x and 10.6x.
package httpparse
