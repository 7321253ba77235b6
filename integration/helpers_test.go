package integration_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/internal/wiretest"
)

func asError[T error](err error, target *T) bool { return errors.As(err, target) }

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

// The raw-HTTP helpers, shared with netio's tests (internal/wiretest).
var (
	rawExchange  = wiretest.RawExchange
	rawStream    = wiretest.RawStream
	readEvents   = wiretest.ReadEvents
	readResponse = wiretest.ReadResponse
	get          = wiretest.Get
	scrape       = wiretest.Scrape
	value        = wiretest.Value
)
