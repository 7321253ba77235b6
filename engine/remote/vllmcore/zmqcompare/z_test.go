// Package zmqcompare measures receiving one small message on a PULL socket
// with Vajra's own ZMTP (engine/remote/vllmcore/zmtp), the pure-Go
// go-zeromq/zmq4 and pebbe/zmq4 over libzmq (cgo; Debian's libzmq3-dev),
// the sender being the same ZMTP PUSH each time. It is a module of its own
// so that its dependencies stay out of Vajra's go.mod:
//
//	cd engine/remote/vllmcore/zmqcompare && go test -bench . -benchtime 100000x -count 3
package zmqcompare

import (
	"context"
	"net"
	"testing"
	"time"

	gz "github.com/go-zeromq/zmq4"
	pz "github.com/pebbe/zmq4"

	"github.com/vajra-go/vajra/engine/remote/vllmcore/zmtp"
)

var payload = make([]byte, 120)

// push connects a PUSH (our ZMTP) to endpoint, which is bound already, and
// sends n messages, on a goroutine of its own.
func push(b *testing.B, endpoint string, n int) {
	go func() {
		network, addr, _ := zmtp.Split(endpoint)
		nc, err := net.Dial(network, addr)
		if err != nil {
			b.Error(err)
			return
		}
		c, err := zmtp.Client(nc, "PUSH", nil, 5*time.Second)
		if err != nil {
			b.Error(err)
			return
		}
		for i := 0; i < n; i++ {
			if err := c.WriteMsg(payload); err != nil {
				b.Error(err)
				return
			}
		}
	}()
}

func BenchmarkOwnZMTP(b *testing.B) {
	ep := "ipc://" + b.TempDir() + "/own"
	ln, err := zmtp.Listen(ep)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	push(b, ep, b.N+1)
	nc, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	c, err := zmtp.Server(nc, "PULL", 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	c.ReadMsg()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := c.ReadMsg(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGoZeromq(b *testing.B) {
	ep := "ipc://" + b.TempDir() + "/gz"
	s := gz.NewPull(context.Background())
	defer s.Close()
	if err := s.Listen(ep); err != nil {
		b.Fatal(err)
	}
	push(b, ep, b.N+1)
	s.Recv()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := s.Recv(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPebbeLibzmq(b *testing.B) {
	ep := "ipc://" + b.TempDir() + "/pz"
	s, err := pz.NewSocket(pz.PULL)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Bind(ep); err != nil {
		b.Fatal(err)
	}
	push(b, ep, b.N+1)
	s.RecvMessageBytes(0)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := s.RecvMessageBytes(0); err != nil {
			b.Fatal(err)
		}
	}
}
