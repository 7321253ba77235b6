package integration_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func asError[T error](err error, target *T) bool { return errors.As(err, target) }

// rawExchange sends raw request bytes on a new connection and returns the
// status line's code, the head and the body (Content-Length framed).
func rawExchange(t *testing.T, addr, req string) (int, string, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("%q: %v", req, err)
	}
	var status int
	fmt.Sscanf(line[9:], "%d", &status)
	var head strings.Builder
	n := 0
	for {
		h, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if h == "\r\n" {
			break
		}
		head.WriteString(h)
		if v, ok := strings.CutPrefix(strings.ToLower(h), "content-length: "); ok {
			fmt.Sscanf(v, "%d", &n)
		}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatal(err)
	}
	return status, head.String(), string(body)
}

const blockerBody = `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":4000,"ignore_eos":true,"stream":true}`

// startBlocker opens a long stream and reads until it produces tokens, so
// it holds its admission permit.
func startBlocker(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, r, head := rawStream(t, addr, blockerBody)
	if !strings.HasPrefix(head, "HTTP/1.1 200") {
		t.Fatalf("blocker: %q", head)
	}
	for n := 0; n < 2; {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"content":"`) {
			n++
		}
	}
	return conn
}
