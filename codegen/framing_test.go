package codegen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http/httputil"
	"strings"
	"testing"
)

func TestChunkFramingDecodesWithNetHTTP(t *testing.T) {
	for _, size := range []int{0, 1, 15, 16, 255, 256, 4095, 70000} {
		payload := strings.Repeat("x", size)
		var dst []byte
		dst, mark := BeginFrame(dst, FramingChunked)
		dst = append(dst, payload...)
		dst = EndFrame(dst, FramingChunked, mark)
		dst = AppendLastChunk(dst, FramingChunked)
		got, err := io.ReadAll(httputil.NewChunkedReader(bufio.NewReader(bytes.NewReader(dst))))
		if err != nil || string(got) != payload {
			t.Fatalf("size %d: err %v, got %d bytes", size, err, len(got))
		}
	}
}

func TestWebSocketFraming(t *testing.T) {
	f := func(size int, wantHdr []byte) {
		t.Helper()
		dst, mark := BeginFrame([]byte("prefix"), FramingWebSocket)
		dst = append(dst, strings.Repeat("y", size)...)
		dst = EndFrame(dst, FramingWebSocket, mark)
		if !bytes.HasPrefix(dst[6:], wantHdr) || len(dst) != 6+len(wantHdr)+size {
			t.Fatalf("size %d: header % x, len %d", size, dst[6:6+len(wantHdr)], len(dst))
		}
	}
	f(5, []byte{0x81, 5})
	f(125, []byte{0x81, 125})
	f(126, []byte{0x81, 126, 0, 126})
	f(65535, []byte{0x81, 126, 0xff, 0xff})
	f(65536, []byte{0x81, 127, 0, 0, 0, 0, 0, 1, 0, 0})
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "hello", "a\"b\\c", "line\nbreak\ttab\r", "\x00\x01\x1f", "<tag>&", "héllo 世界", "\u2028\u2029", "bad\xffutf8", "\x7f"} {
		got := AppendJSONStringS(nil, s)
		want, _ := json.Marshal(s)
		if !bytes.Equal(got, want) {
			t.Errorf("%q: got %s want %s", s, got, want)
		}
	}
}

func TestAppendJSONEscapedPieces(t *testing.T) {
	f := func(a, b, want string) {
		t.Helper()
		dst := []byte{'"'}
		dst = AppendJSONEscapedS(dst, a)
		dst = AppendJSONEscaped(dst, []byte(b))
		if dst = append(dst, '"'); string(dst) != want {
			t.Errorf("%q + %q: got %s want %s", a, b, dst, want)
		}
	}
	f("", "", `""`)
	f("The cé", " Paris", `"The cé Paris"`)
	f("a\"b<", "\n", `"a\"b\u003c\n"`)
	// A rune split between pieces is not joined: each half is invalid.
	f("\xc3", "\xa9", `"\ufffd\ufffd"`)
}

func BenchmarkChunkedEvent(b *testing.B) {
	b.ReportAllocs()
	buf := make([]byte, 0, 4096)
	tok := []byte(" hello")
	for i := 0; i < b.N; i++ {
		dst, mark := BeginFrame(buf[:0], FramingChunked)
		dst = append(dst, "data: "...)
		dst = AppendJSONString(dst, tok)
		dst = append(dst, "\n\n"...)
		buf = EndFrame(dst, FramingChunked, mark)
	}
}
