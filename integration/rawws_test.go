package integration_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
)

// rawWS is a hand-written WebSocket client (RFC 6455) over a raw
// connection, for the hot-path tests: unlike a library client it
// allocates nothing per frame, so the allocations measured are the
// server's.
type rawWS struct {
	tb   testing.TB
	conn net.Conn
	r    *bufio.Reader
	buf  []byte
}

// upgradeRaw sends the upgrade request for path on conn and reads the 101
// head (the RFC's example key: the tests check no Accept value here).
func upgradeRaw(tb testing.TB, conn net.Conn, path string) *rawWS {
	tb.Helper()
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", path)
	w := &rawWS{tb: tb, conn: conn, r: bufio.NewReaderSize(conn, 64<<10), buf: make([]byte, 64<<10)}
	status, err := w.r.ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 101 ") {
		tb.Fatalf("upgrade of %s: %q %v", path, status, err)
	}
	for {
		line, err := w.r.ReadString('\n')
		if err != nil {
			tb.Fatal(err)
		}
		if line == "\r\n" {
			return w
		}
	}
}

// read reads one server frame, which must be a whole unmasked text frame,
// and returns its payload (valid until the next read).
func (w *rawWS) read() []byte {
	tb, r := w.tb, w.r
	if _, err := io.ReadFull(r, w.buf[:2]); err != nil {
		tb.Fatal(err)
	}
	if w.buf[0] != 0x81 || w.buf[1]&0x80 != 0 {
		tb.Fatalf("frame header %x: want a final unmasked text frame", w.buf[:2])
	}
	n, h := int(w.buf[1]&0x7f), 2
	switch n {
	case 126:
		if _, err := io.ReadFull(r, w.buf[2:4]); err != nil {
			tb.Fatal(err)
		}
		n, h = int(binary.BigEndian.Uint16(w.buf[2:4])), 4
	case 127:
		if _, err := io.ReadFull(r, w.buf[2:10]); err != nil {
			tb.Fatal(err)
		}
		n, h = int(binary.BigEndian.Uint64(w.buf[2:10])), 10
	}
	if h+n > len(w.buf) {
		tb.Fatalf("a frame of %d bytes, more than the test reads", n)
	}
	if _, err := io.ReadFull(r, w.buf[h:h+n]); err != nil {
		tb.Fatal(err)
	}
	return w.buf[h : h+n]
}

// write sends msg as one masked text frame (RFC 6455 §5.3) with a zero
// masking key, so the payload goes as it is.
func (w *rawWS) write(msg string) { writeClientFrame(w.tb, w.conn, msg) }

// countFrames counts the whole server frames in b (what the engine wrote,
// which the client reads as many of).
func countFrames(b []byte) int {
	k := 0
	for len(b) >= 2 {
		n, h := int(b[1]&0x7f), 2
		switch n {
		case 126:
			n, h = int(binary.BigEndian.Uint16(b[2:4])), 4
		case 127:
			n, h = int(binary.BigEndian.Uint64(b[2:10])), 10
		}
		b = b[h+n:]
		k++
	}
	return k
}
