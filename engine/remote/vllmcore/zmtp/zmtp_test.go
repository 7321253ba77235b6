package zmtp

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"
)

const stall = 10 * time.Second

// sockPair is a connected pair of unix sockets (buffered, as the real
// transports are; net.Pipe is not).
func sockPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("unix", t.TempDir()+"/p")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

func pair(t *testing.T) (*Conn, *Conn) {
	t.Helper()
	a, b := sockPair(t)
	t.Cleanup(func() { a.Close(); b.Close() })
	type res struct {
		c   *Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := Server(a, "PULL", stall)
		ch <- res{c, err}
	}()
	cl, err := Client(b, "PUSH", []byte{1, 0}, stall)
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.c, cl
}

func TestMessagesShortAndLong(t *testing.T) {
	srv, cl := pair(t)
	if srv.PeerType != "PUSH" || !bytes.Equal(srv.Identity, []byte{1, 0}) || cl.PeerType != "PULL" {
		t.Fatalf("peer %q %x / %q", srv.PeerType, srv.Identity, cl.PeerType)
	}
	long := bytes.Repeat([]byte("x"), 70000)
	go func() {
		cl.WriteMsg([]byte("a"), long, nil)
		cl.WriteMsg([]byte("b"))
	}()
	frames, err := srv.ReadMsg()
	if err != nil || len(frames) != 3 || string(frames[0]) != "a" || !bytes.Equal(frames[1], long) || len(frames[2]) != 0 {
		t.Fatalf("message %d frames, %v", len(frames), err)
	}
	frames, err = srv.ReadMsg()
	if err != nil || len(frames) != 1 || string(frames[0]) != "b" {
		t.Fatalf("second message %q, %v", frames, err)
	}
}

func TestBadPeersAreErrors(t *testing.T) {
	for name, greeting := range map[string][]byte{
		"not zmtp":  []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + string(make([]byte, 64))),
		"zmtp 2":    append([]byte{0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 1, 0}, make([]byte, 52)...),
		"curve":     append(append([]byte{0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 3, 0}, "CURVE"...), make([]byte, 47)...),
		"truncated": {0xff, 0, 0},
	} {
		t.Run(name, func(t *testing.T) {
			a, b := sockPair(t)
			defer a.Close()
			go func() {
				var g [64]byte
				b.Write(greeting)
				b.Read(g[:])
				b.Close()
			}()
			if _, err := Server(a, "PULL", stall); err == nil {
				t.Fatal("accepted")
			} else if name != "truncated" && !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v", err)
			}
		})
	}
}

func TestOversizedFrameRefused(t *testing.T) {
	srv, cl := pair(t)
	go cl.nc.Write([]byte{0x02, 0xff, 0, 0, 0, 0, 0, 0, 0})
	if _, err := srv.ReadMsg(); !errors.Is(err, ErrProtocol) {
		t.Fatalf("error %v", err)
	}
}

func TestEndpoints(t *testing.T) {
	if _, _, err := Split("udp://x:1"); !errors.Is(err, ErrEndpoint) {
		t.Fatal(err)
	}
	ln, err := Listen("ipc://" + t.TempDir() + "/s")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if e := Endpoint(ln.Addr()); e[:6] != "ipc://" {
		t.Fatal(e)
	}
}
