package netio_test

import (
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/vajra-go/vajra/netio/wsproto"
)

// wsRoundTrip is one masked text message to the echo session and its echo
// back, over a raw connection whose buffers are made once, so that every
// allocation counted is the server's.
type wsRoundTrip struct {
	c     *rawWS
	frame []byte
	echo  []byte
}

func newWSRoundTrip(t testing.TB, s *wsServer, size int) *wsRoundTrip {
	c := dialRawWS(t, s.addr, "/v1/realtime", nil)
	s.session(t)
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = 'a' + byte(i%26)
	}
	rt := &wsRoundTrip{c: c, frame: clientFrame(true, wsproto.OpText, msg)}
	rt.echo = make([]byte, len(wsproto.AppendFrame(nil, wsproto.OpText, msg)))
	// A benchmark may run longer than dialRawWS's bound; still bounded.
	_ = c.conn.SetDeadline(time.Now().Add(5 * time.Minute))
	rt.run(t) // warm the buffers on both sides
	return rt
}

func (rt *wsRoundTrip) run(t testing.TB) {
	if _, err := rt.c.conn.Write(rt.frame); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rt.c.r, rt.echo); err != nil {
		t.Fatal(err)
	}
}

// TestWSEchoAllocs: a message through the whole transport (gnet's read,
// the frame reader, the session's Message, WSConn.Send, the doorbell, the
// loop's write) and its echo allocate nothing in steady state.
func TestWSEchoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	s := startWSServer(t, nil)
	rt := newWSRoundTrip(t, s, 200)
	for i := 0; i < 100; i++ {
		rt.run(t)
	}
	if a := testing.AllocsPerRun(500, func() { rt.run(t) }); a > 0.05 {
		t.Fatalf("%.2f allocations per WebSocket round trip, want 0", a)
	}
}

// BenchmarkWSEcho measures a round trip of one text message through the
// transport, by message size.
func BenchmarkWSEcho(b *testing.B) {
	for _, size := range []int{200, 4 << 10, 64 << 10} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			s := startWSServer(b, nil)
			rt := newWSRoundTrip(b, s, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				rt.run(b)
			}
		})
	}
}
