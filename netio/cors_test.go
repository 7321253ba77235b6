package netio_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra/netio"
)

func TestCORS(t *testing.T) {
	addr := startServer(t, time.Millisecond, func(o *netio.Options) {
		o.APIKeys = []string{"k"}
		o.AllowedOrigins = []string{"https://app.example"}
	}).addr
	// A preflight is answered without a key, for an allowed origin only.
	pre := "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: x\r\nOrigin: %s\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization, content-type, x-stainless-os\r\n\r\n"
	status, head, _ := rawExchange(t, addr, strings.Replace(pre, "%s", "https://app.example", 1))
	for _, want := range []string{"Access-Control-Allow-Origin: https://app.example\r\n", "Access-Control-Allow-Methods: ", "Access-Control-Allow-Headers: authorization, content-type, x-stainless-os\r\n", "Vary: Origin\r\n"} {
		if status != 204 || !strings.Contains(head, want) {
			t.Fatalf("preflight: %d %q, want %q", status, head, want)
		}
	}
	status, head, _ = rawExchange(t, addr, strings.Replace(pre, "%s", "https://evil.example", 1))
	if status != 403 || strings.Contains(head, "Access-Control") {
		t.Fatalf("preflight from another origin: %d %q", status, head)
	}
	// Actual responses carry the header for an allowed origin: inline,
	// error, session (plain and streamed).
	chat := `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`
	for _, c := range []struct {
		name, req string
		status    int
	}{
		{"inline", "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nOrigin: https://app.example\r\n\r\n", 200},
		{"401", "GET /v1/models HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example\r\n\r\n", 401},
		{"session", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nOrigin: https://app.example\r\nContent-Type: application/json\r\nContent-Length: " + itoa(len(chat)) + "\r\n\r\n" + chat, 200},
	} {
		status, head, _ := rawExchange(t, addr, c.req)
		if status != c.status || !strings.Contains(head, "Access-Control-Allow-Origin: https://app.example\r\n") {
			t.Errorf("%s: %d %q", c.name, status, head)
		}
		other := strings.Replace(c.req, "https://app.example", "https://evil.example", 1)
		if _, head, _ := rawExchange(t, addr, other); strings.Contains(head, "Access-Control") {
			t.Errorf("%s from another origin: %q", c.name, head)
		}
	}
	stream := `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true}`
	_, r, head := rawStream(t, addr, stream, "Authorization: Bearer k\r\n", "Origin: https://app.example\r\n")
	if !strings.Contains(head, "Access-Control-Allow-Origin: https://app.example\r\n") {
		t.Fatalf("stream head %q", head)
	}
	if _, done, _ := readEvents(t, r, nil); !done {
		t.Fatal("stream did not end")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
