package wsproto

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestAcceptRFCExample: the handshake example of RFC 6455 §1.3.
func TestAcceptRFCExample(t *testing.T) {
	key := []byte("dGhlIHNhbXBsZSBub25jZQ==")
	if !ValidKey(key) {
		t.Fatal("the RFC's key refused")
	}
	if got := string(AppendAccept(nil, key)); got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("accept %q", got)
	}
}

func TestValidKey(t *testing.T) {
	f := func(key string, want bool) {
		t.Helper()
		if ValidKey([]byte(key)) != want {
			t.Fatalf("ValidKey(%q) = %v", key, !want)
		}
	}
	f("dGhlIHNhbXBsZSBub25jZQ==", true)
	f("AAAAAAAAAAAAAAAAAAAAAA==", true)
	f("", false)
	f("dGhlIHNhbXBsZSBub25jZQ", false)    // unpadded
	f("dGhlIHNhbXBsZSBub25jZQ=", false)   // short
	f("dGhlIHNhbXBsZSBub25jZQ===", false) // long
	f("dGhlIHNhbXBsZSBub25jZR==", false)  // non-canonical trailing bits
	f("dGhlIHNhbXBsZSBub25j!Q==", false)  // not base64
	f("dGhlIHNhbXBsZSBub25jZWVl", false)  // 18 bytes
}

func TestValidCloseCode(t *testing.T) {
	for code, want := range map[int]bool{0: false, 999: false, 1000: true, 1001: true, 1003: true, 1004: false,
		1005: false, 1006: false, 1007: true, 1011: true, 1014: true, 1015: false, 1016: false, 2999: false,
		3000: true, 4999: true, 5000: false} {
		if ValidCloseCode(code) != want {
			t.Errorf("ValidCloseCode(%d) = %v", code, !want)
		}
	}
}

// TestAppendFrame: server frames are unmasked, with the minimal length form.
func TestAppendFrame(t *testing.T) {
	f := func(n int, wantHeader []byte) {
		t.Helper()
		p := bytes.Repeat([]byte("a"), n)
		got := AppendFrame(nil, OpText, p)
		if !bytes.Equal(got[:len(wantHeader)], wantHeader) || !bytes.Equal(got[len(wantHeader):], p) {
			t.Fatalf("n=%d: header %x", n, got[:min(len(got), 10)])
		}
	}
	f(0, []byte{0x81, 0})
	f(125, []byte{0x81, 125})
	f(126, []byte{0x81, 126, 0, 126})
	f(65535, []byte{0x81, 126, 0xff, 0xff})
	f(65536, []byte{0x81, 127, 0, 0, 0, 0, 0, 1, 0, 0})
	if got := AppendFrame(nil, OpPong, []byte("x")); !bytes.Equal(got, []byte{0x8a, 1, 'x'}) {
		t.Fatalf("pong %x", got)
	}
}

// TestAppendClose: the code, a reason cut at a rune boundary to fit a
// control frame, an invalid code replaced by 1011.
func TestAppendClose(t *testing.T) {
	got := AppendClose(nil, 1008, "policy")
	if !bytes.Equal(got, append([]byte{0x88, 8, 0x03, 0xf0}, "policy"...)) {
		t.Fatalf("%x", got)
	}
	long := strings.Repeat("é", 100) // 200 bytes
	got = AppendClose(nil, 1000, long)
	if len(got) > 2+MaxControlPayload || !utf8.Valid(got[4:]) || int(got[1]) != len(got)-2 {
		t.Fatalf("long reason: %d bytes, valid %v", len(got), utf8.Valid(got[4:]))
	}
	if got = AppendClose(nil, 1000, "bad \xff"); len(got) != 4 {
		t.Fatalf("invalid UTF-8 reason sent: %q", got)
	}
	got = AppendClose(nil, 1005, "")
	if CloseCode(got[2:]) != CloseInternalError {
		t.Fatalf("invalid code sent as %d", CloseCode(got[2:]))
	}
}
