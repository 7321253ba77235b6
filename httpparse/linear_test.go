package httpparse

import (
	"strings"
	"testing"
)

// TestLinearWork feeds a large request one byte at a time, each call with a
// fresh copy of everything received so far (as if the buffer moved), and
// checks through the scanned counter that the parser examined each byte a
// constant number of times: a parser that rescanned from the start on every
// call would examine about n²/2 bytes here.
func TestLinearWork(t *testing.T) {
	var b strings.Builder
	b.WriteString("POST /v1/chat/completions?stream=true HTTP/1.1\r\nHost: api.example\r\nTransfer-Encoding: chunked\r\n")
	for i := 0; i < 90; i++ {
		b.WriteString("X-Header-" + strings.Repeat("n", i%20) + ": " + strings.Repeat("v", 100) + " \t \r\n")
	}
	b.WriteString("\r\n")
	for i := 0; i < 200; i++ {
		b.WriteString("20;ext=\"quoted value\"\r\n" + strings.Repeat("d", 32) + "\r\n")
	}
	b.WriteString("0\r\nTrailer-1: x\r\n\r\n")
	in := []byte(b.String())

	p := NewParser(Limits{MaxChunkExt: 1 << 20})
	var req Request
	calls := 0
	for k := 1; k <= len(in); k++ {
		buf := append([]byte(nil), in[:k]...)
		n, err := p.Parse(buf, &req)
		calls++
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			if n != len(in) || k != len(in) || len(req.Body) != 200*32 {
				t.Fatalf("n=%d k=%d len=%d body=%d", n, k, len(in), len(req.Body))
			}
			break
		}
	}
	// Each byte is examined by the scan once, plus at most once more by
	// a second pass (trailing OWS, framing header values, the target).
	if p.scanned > 2*len(in) {
		t.Fatalf("examined %d bytes for a %d-byte request fed in %d calls: not linear", p.scanned, len(in), calls)
	}
	t.Logf("%d bytes, %d calls, %d bytes examined", len(in), calls, p.scanned)

	// The same request in one piece examines the same bytes.
	p2 := NewParser(Limits{MaxChunkExt: 1 << 20})
	if n, err := p2.Parse(in, &req); n != len(in) || err != nil {
		t.Fatal(n, err)
	}
	if p2.scanned != p.scanned {
		t.Fatalf("one piece examined %d bytes, byte by byte %d", p2.scanned, p.scanned)
	}
}

// TestZeroAllocs: no allocation per request once the parser is warm, for
// Content-Length and chunked bodies and pipelined requests.
func TestZeroAllocs(t *testing.T) {
	in := []byte(sdkRequest + minimalGET + chunkedRequest)
	p := defaultParser()
	var req Request
	parseAll := func() {
		for off := 0; off < len(in); {
			n, err := p.Parse(in[off:], &req)
			if err != nil || n == 0 {
				t.Fatal(n, err)
			}
			off += n
		}
	}
	parseAll()
	if a := testing.AllocsPerRun(100, parseAll); a != 0 {
		t.Fatalf("%v allocs per run", a)
	}
}
