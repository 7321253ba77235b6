package netio_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/internal/eventually"
	"github.com/vajra-go/vajra/netio"
)

// TestSlowConsumerAborted: a client that stops reading is disconnected once
// it is MaxOutboundBytes behind, and its engine session is aborted: the
// server's memory per connection stays bounded and the slot is freed.
func TestSlowConsumerAborted(t *testing.T) {
	srv := startServer(t, 0, func(o *netio.Options) { // ITL 0: as fast as the engine can go
		o.MaxOutboundBytes = 64 << 10
	})
	obs, addr := srv.eng, srv.addr
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A small receive window, so the kernel's buffers fill quickly; then
	// never read.
	_ = conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	// A stream that never ends by itself (2^30 tokens, at full speed,
	// would take hours): its only way to end is the cut. With 60,000
	// tokens a loaded machine could let it run to its end first.
	body := `{"model":"vajra-sim","messages":[{"role":"user","content":"hi"}],"max_tokens":1073741824,"ignore_eos":true,"stream":true}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	select {
	case res := <-obs.finals:
		if res.Err == nil || res.Err.Kind != engine.KindAborted {
			t.Fatalf("final result of the slow consumer: %+v, want aborted", res.Err)
		}
		if n := res.Usage.CompletionTokens; n >= 1<<30 {
			t.Fatalf("the stream ran to its end (%d tokens) instead of being cut", n)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a client that does not read was never disconnected")
	}
	if got := obs.Stats().Running; got != 0 {
		t.Fatalf("running sequences after the abort = %d, want 0", got)
	}
	// The abort is counted when the loop cut the connection, which may be
	// reported a moment after the engine's final: poll the counter, bounded.
	eventually.True(t, "vajra_slow_consumer_aborts_total is 1", func() bool {
		v := value(scrape(t, addr), "vajra_slow_consumer_aborts_total")
		if v > 1 {
			t.Fatalf("vajra_slow_consumer_aborts_total = %v, want 1", v)
		}
		return v == 1
	})
}
