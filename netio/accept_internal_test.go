package netio

import (
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"
)

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(ents)
}

// TestAcceptBackoffKeepsOneSpare: accept errors other than EMFILE back the
// acceptor off; each back-off used to open another spare descriptor
// (max(spare, openSpare()) keeps one and leaks the other). Five in a row
// must leave the descriptor count as it was once the loop ended.
func TestAcceptBackoffKeepsOneSpare(t *testing.T) {
	s := &Server{log: zap.NewNop(), enrolls: make(chan (<-chan gnet.RegisteredResult), 1), stopped: make(chan struct{})}
	n := 0
	s.acceptHook = func() (*net.TCPConn, error) {
		if n++; n <= 5 {
			return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.ENOBUFS)}
		}
		return nil, net.ErrClosed
	}
	before := openFDs(t)
	done := make(chan struct{})
	go func() { s.acceptLoop(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the accept loop did not end")
	}
	if after := openFDs(t); after != before {
		t.Fatalf("%d descriptors open before the back-offs, %d after", before, after)
	}
}
