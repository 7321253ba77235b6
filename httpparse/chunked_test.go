package httpparse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http/httputil"
	"strings"
	"testing"
)

// decodeAll runs a ChunkedDecoder over parts (the body split where the
// network split it) through SkipTrailers, and returns the data, the bytes
// after the body and the first error.
func decodeAll(parts ...[]byte) (data, rest []byte, err error) {
	var d ChunkedDecoder
	d.Reset(Limits{})
	for _, p := range parts {
		for len(p) > 0 && !d.Done() {
			var n int
			if d.Last() {
				n, err = d.SkipTrailers(p)
			} else {
				var seg []byte
				seg, n, err = d.Decode(p)
				if len(seg) > 0 && &seg[0] != &p[n-len(seg)] {
					return nil, nil, errors.New("data was copied, not a slice of the input")
				}
				data = append(data, seg...)
			}
			if err != nil {
				return data, nil, err
			}
			p = p[n:]
		}
		rest = append(rest, p...)
	}
	if !d.Done() {
		return data, rest, io.ErrUnexpectedEOF
	}
	return data, rest, nil
}

func TestChunkedDecoder(t *testing.T) {
	f := func(wire, data, rest string, want error) {
		t.Helper()
		in := []byte(wire)
		// Whole, split in two at every offset, and one byte at a time: the
		// same outcome.
		splits := [][][]byte{{in}}
		for k := 1; k < len(in); k++ {
			splits = append(splits, [][]byte{in[:k:k], in[k:]})
		}
		bytewise := make([][]byte, len(in))
		for k := range in {
			bytewise[k] = in[k : k+1 : k+1]
		}
		splits = append(splits, bytewise)
		for _, parts := range splits {
			got, gotRest, err := decodeAll(parts...)
			if !errors.Is(err, want) || (want == nil && (string(got) != data || string(gotRest) != rest)) {
				t.Fatalf("%q in %d parts: data %q rest %q err %v; want %q %q %v", wire, len(parts), got, gotRest, err, data, rest, want)
			}
		}
	}
	f("5;ext=1\r\nhello\r\n2\r\n, \r\nD\r\nchunked world\r\n0\r\nTrailer: x\r\n\r\nNEXT", "hello, chunked world", "NEXT", nil)
	f("0\r\n\r\n", "", "", nil)
	f("000\r\n\r\nHTTP/1.1", "", "HTTP/1.1", nil)
	f("a\r\n0123456789\r\n0\r\n\r\n", "0123456789", "", nil)
	f("3 ; a = \"q\\\"d\" ; b\r\nabc\r\n0\r\nA: 1\r\nB: 2\r\n\r\n", "abc", "", nil)
	f("5\nhello\r\n0\r\n\r\n", "", "", ErrBareLF)
	f("5\r\nhello\n0\r\n\r\n", "", "", ErrBareLF)
	f("5\r\nhelloX\r\n0\r\n\r\n", "", "", ErrChunkData)
	f("5\rhello", "", "", ErrBareCR)
	f("\r\n", "", "", ErrChunkSize)
	f("g\r\n", "", "", ErrChunkSize)
	f("00000000000000000\r\n", "", "", ErrChunkSize)
	f("10000000000000000\r\n", "", "", ErrBodyTooLarge)
	f("5;=\r\nhello\r\n0\r\n\r\n", "", "", ErrChunkExtension)
	f("0\r\nT: 1\n\r\n", "", "", ErrBareLF)
	f("0\r\n\r\r\n", "", "", ErrBareCR)

	// The limits: the data, the extensions, the framing.
	var d ChunkedDecoder
	d.Reset(Limits{MaxBody: 4})
	if _, _, err := d.Decode([]byte("5\r\nhello\r\n")); !errors.Is(err, ErrBodyTooLarge) {
		t.Fatalf("5 bytes over MaxBody 4: %v", err)
	}
	d.Reset(Limits{MaxChunkExt: 4})
	if _, _, err := d.Decode([]byte("1;abcd\r\n")); !errors.Is(err, ErrChunkExtensionTooLong) {
		t.Fatalf("5 extension bytes over MaxChunkExt 4: %v", err)
	}
	d.Reset(Limits{MaxChunkExt: 5})
	if _, _, err := d.Decode([]byte("1;abcd\r\n")); err != nil {
		t.Fatalf("5 extension bytes within MaxChunkExt 5: %v", err)
	}
	d.Reset(Limits{})
	ones := []byte(strings.Repeat("1\r\nx\r\n", chunkOverheadAllowance))
	var err error
	for p := ones; len(p) > 0 && err == nil; {
		var n int
		_, n, err = d.Decode(p)
		p = p[n:]
	}
	if !errors.Is(err, ErrChunkOverhead) {
		t.Fatalf("%d one-byte chunks: %v", chunkOverheadAllowance, err)
	}
}

// TestChunkedDecoderZeroAllocs: decoding does not allocate.
func TestChunkedDecoderZeroAllocs(t *testing.T) {
	wire := []byte("1d;x=y\r\ndata: {\"choices\":[{\"i\":0}]}\n\n\r\n0\r\nT: 1\r\n\r\n")
	var d ChunkedDecoder
	var err error
	allocs := testing.AllocsPerRun(100, func() {
		d.Reset(Limits{})
		for p := wire; len(p) > 0 && !d.Done() && err == nil; {
			var n int
			if d.Last() {
				n, err = d.SkipTrailers(p)
			} else {
				_, n, err = d.Decode(p)
			}
			p = p[n:]
		}
	})
	if allocs != 0 || !d.Done() || err != nil {
		t.Fatalf("%v allocations per body, done %v, %v", allocs, d.Done(), err)
	}
}

// FuzzChunkedDecoder: what the decoder and net/http's chunked reader both
// accept decodes to the same data (net/http refuses some extensions that
// RFC 9112 allows, such as whitespace before ';'); and the outcome does not
// depend on how the bytes were split.
func FuzzChunkedDecoder(f *testing.F) {
	for _, s := range []string{
		"5;ext=1\r\nhello\r\n2\r\n, \r\n0\r\nTrailer: x\r\n\r\n",
		"0\r\n\r\n",
		"3 ; a = \"q\\\"d\"\r\nabc\r\n0\r\n\r\n",
		"5\nhello\r\n",
		"FFFFFFFFFFFFFFFF\r\n",
	} {
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, in []byte, cut uint8) {
		data, rest, err := decodeAll(in)
		k := int(cut) % (len(in) + 1)
		data2, rest2, err2 := decodeAll(in[:k:k], in[k:])
		if (err == nil) != (err2 == nil) || !bytes.Equal(data, data2) || !bytes.Equal(rest, rest2) {
			t.Fatalf("split at %d: %q %q %v; whole: %q %q %v", k, data2, rest2, err2, data, rest, err)
		}
		if err != nil {
			return
		}
		body := in[:len(in)-len(rest)]
		got, herr := io.ReadAll(httputil.NewChunkedReader(bufio.NewReader(bytes.NewReader(body))))
		if herr == nil && !bytes.Equal(got, data) {
			t.Fatalf("net/http: %q %v; ours: %q", got, herr, data)
		}
	})
}
