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

// push connects a PUSH (our ZMTP) to endpoint and sends n messages.
func push(b *testing.B, endpoint string, n int) { go push1(endpoint, n) }

func push1(endpoint string, n int) {
	network, addr, _ := zmtp.Split(endpoint)
	var nc net.Conn
	var err error
	for i := 0; i < 100; i++ {
		if nc, err = net.Dial(network, addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		panic(err)
	}
	c, err := zmtp.Client(nc, "PUSH", nil, 5*time.Second)
	if err != nil {
		panic(err)
	}
	for i := 0; i < n; i++ {
		if err := c.WriteMsg(payload); err != nil {
			panic(err)
		}
	}
}

func BenchmarkOwnZMTP(b *testing.B) {
	ep := "ipc://" + b.TempDir() + "/own"
	ln, _ := zmtp.Listen(ep)
	defer ln.Close()
	push(b, ep, b.N+1)
	nc, _ := ln.Accept()
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
	s, _ := pz.NewSocket(pz.PULL)
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
