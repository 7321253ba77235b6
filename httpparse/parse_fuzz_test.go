package httpparse

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite testdata/fuzz seed corpora from fuzzSeeds")

// fuzzSeeds are the starting points of every fuzz target: the shapes of
// request the tables above test, written again here so the committed
// corpus does not depend on the llhttp corpus (which stays outside the
// repository).
var fuzzSeeds = []string{
	minimalGET,
	pipelinedGET + pipelinedGET,
	chunkedRequest,
	sdkRequest[:600],
	"GET / HTTP/1.0\r\n\r\n",
	"\r\nGET /a?b=c HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
	"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET http://a.example:80/p?q HTTP/1.1\r\nHost: b\r\n\r\n",
	"GET /v1/realtime HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n\x81\x05hello",
	"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;a=\"b\\\"c\";d\r\nhello\r\n0\r\nT: 1\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\nContent-Length: 1\r\n\r\nx",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\nX: 1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\rX: 1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: [::1]:8080\r\nX: \xc3\xbc\r\n\r\n",
	"GET /%41%zz HTTP/1.1\r\nHost: a\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFF\r\n",
	"POST / HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhiGET / HTTP/1.0\r\n\r\n",
}

// TestUpdateSeeds writes fuzzSeeds as the committed seed corpus of each
// target when run with -update-seeds (the golden-file habit); plain
// `go test` runs the committed seeds through the fuzz targets.
func TestUpdateSeeds(t *testing.T) {
	if !*updateSeeds {
		t.Skip("run with -update-seeds to rewrite testdata/fuzz")
	}
	write := func(target string, args ...string) {
		var b strings.Builder
		b.WriteString("go test fuzz v1\n")
		for _, a := range args {
			b.WriteString(a + "\n")
		}
		sum := sha256.Sum256([]byte(b.String()))
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(dir, fmt.Sprintf("seed-%x", sum[:8]))
		if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range fuzzSeeds {
		q := "[]byte(" + strconv.Quote(s) + ")"
		write("FuzzParse", q)
		write("FuzzDifferential", q)
		write("FuzzSplit", q, "uint16("+strconv.Itoa(len(s)/2)+")")
	}
}

// checkInvariants checks what must hold for any request Parse accepts.
func checkInvariants(t *testing.T, in []byte, o outcome) {
	t.Helper()
	for _, r := range o.Reqs {
		if r.N <= 0 || r.N > len(in) {
			t.Fatalf("n=%d for %d bytes", r.N, len(in))
		}
		if !isTokenString([]byte(r.Method)) || !knownMethod([]byte(r.Method)) {
			t.Fatalf("method %q", r.Method)
		}
		if r.Minor != 0 && r.Minor != 1 {
			t.Fatalf("minor %d", r.Minor)
		}
		hosts := 0
		for _, h := range append(append([][2]string(nil), r.Headers...), r.Trailers...) {
			if !isTokenString([]byte(h[0])) {
				t.Fatalf("header name %q", h[0])
			}
			for _, c := range []byte(h[1]) {
				if !isValue[c] {
					t.Fatalf("header value %q", h[1])
				}
			}
			if v := h[1]; len(v) > 0 && (v[0] == ' ' || v[0] == '\t' || v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
				t.Fatalf("untrimmed value %q", v)
			}
			if equalFold([]byte(h[0]), "host") {
				hosts++
			}
		}
		if hosts > 1 || (r.Minor == 1 && hosts != 1) {
			t.Fatalf("%d Host headers in HTTP/1.%d", hosts, r.Minor)
		}
		if r.Chunked && r.ContentLength != -1 {
			t.Fatalf("chunked with Content-Length %d", r.ContentLength)
		}
		if !r.Chunked && int64(len(r.Body)) != max(r.ContentLength, 0) {
			t.Fatalf("body %d bytes, Content-Length %d", len(r.Body), r.ContentLength)
		}
		if int64(len(r.Body)) > DefaultMaxBody {
			t.Fatalf("body over limit")
		}
	}
	if o.Err != nil {
		if _, ok := errTable[o.Err]; !ok || o.Status == 0 {
			t.Fatalf("error %v without table entry", o.Err)
		}
	}
}

// FuzzParse parses arbitrary input as a connection would and checks the
// invariants of everything it accepts.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		checkInvariants(t, in, run(defaultParser(), in))
	})
}

// FuzzSplit parses input whole and split in two at an arbitrary offset
// (and at two offsets); the outcomes must be identical (nats-server's
// two-halves fuzz habit).
func FuzzSplit(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), uint16(len(s)/2))
	}
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		if len(in) == 0 {
			return
		}
		k := int(cut) % len(in)
		want := run(defaultParser(), in)
		if got := run(defaultParser(), in, k); !reflect.DeepEqual(got, want) {
			t.Fatalf("split at %d of %q:\n got %v\nwant %v", k, in, got, want)
		}
		k2 := k + (len(in)-k)/2
		if got := run(defaultParser(), in, k, k2); !reflect.DeepEqual(got, want) {
			t.Fatalf("split at %d,%d of %q:\n got %v\nwant %v", k, k2, in, got, want)
		}
	})
}

// netHTTPRejects lists, with the reason, inputs we accept and net/http's
// ReadRequest rejects. Each is matched by a predicate on our request.
var netHTTPRejects = []struct {
	why   string
	match func(r *Request, netErr error) bool
}{
	{
		// net/http validates the Trailer header's declared names
		// (fixTrailer); we report a Trailer header as an ordinary field
		// and never merge trailers (RFC 9110 section 6.5.1), so the
		// names it declares cannot change framing here.
		"Trailer header declaring a framing field",
		func(r *Request, err error) bool {
			return r.Header("Trailer") != nil && strings.Contains(err.Error(), "bad trailer key")
		},
	},
}

// FuzzDifferential compares us with net/http's ReadRequest: when we accept
// a request, net/http must accept the same bytes (unless listed in
// netHTTPRejects) and agree on method, target, headers and body. We may
// reject what net/http accepts: we are stricter on purpose.
func FuzzDifferential(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// net/http limits a chunk-size line to 4096 bytes; keep our
		// extension budget below that so limits do not differ.
		p := NewParser(Limits{MaxChunkExt: 1024})
		var req Request
		n, err := p.Parse(in, &req)
		if err != nil || n == 0 {
			return
		}
		// We skip empty lines before a request (RFC 9112 section 2.2: a
		// server SHOULD ignore at least one); ReadRequest does not.
		k := 0
		for k+1 < n && in[k] == '\r' && in[k+1] == '\n' {
			k += 2
		}
		hr, herr := http.ReadRequest(bufio.NewReader(bytes.NewReader(in[k:n])))
		var body []byte
		if herr == nil {
			body, herr = io.ReadAll(hr.Body)
		}
		if herr != nil {
			for _, k := range netHTTPRejects {
				if k.match(&req, herr) {
					return
				}
			}
			t.Fatalf("we accept, net/http rejects (%v): %q", herr, in[k:n])
		}
		if hr.Method != string(req.Method) || hr.RequestURI != string(req.Target) || hr.ProtoMinor != req.Minor {
			t.Fatalf("request line differs: %q %q 1.%d vs %q %q 1.%d", hr.Method, hr.RequestURI, hr.ProtoMinor, req.Method, req.Target, req.Minor)
		}
		if hr.Host != string(req.Host) {
			t.Fatalf("host %q vs %q", hr.Host, req.Host)
		}
		if !bytes.Equal(body, req.Body) {
			t.Fatalf("body %q vs %q", body, req.Body)
		}
		// net/http moves Host into req.Host, Transfer-Encoding into
		// req.TransferEncoding, and may add Cache-Control for Pragma.
		ours := http.Header{}
		for _, h := range req.Headers {
			ours.Add(string(h.Name), string(h.Value))
		}
		for _, name := range []string{"Host", "Transfer-Encoding", "Cache-Control"} {
			ours.Del(name)
			hr.Header.Del(name)
		}
		if !reflect.DeepEqual(ours, hr.Header) {
			t.Fatalf("headers differ:\n ours %v\n net/http %v", ours, hr.Header)
		}
		if req.Chunked != (len(hr.TransferEncoding) == 1) {
			t.Fatalf("chunked %v vs %v", req.Chunked, hr.TransferEncoding)
		}
		if errors.Is(err, ErrBodyTooLarge) {
			t.Fatal("unreachable")
		}
	})
}
