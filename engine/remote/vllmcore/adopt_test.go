package vllmcore

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine/remote/vllmcore/v032"
	"github.com/vajra-go/vajra/engine/remote/vllmcore/zmtp"
	"github.com/vajra-go/vajra/internal/eventually"
)

// launcherListeners binds the request and output addresses as vLLM's
// launcher does before it starts the engines (bind_engine_zmq_listeners:
// plain listening sockets, ipc:// paths for engines on this host).
func launcherListeners(t *testing.T) (in, out net.Listener, inAddr, outAddr string) {
	t.Helper()
	dir := t.TempDir()
	inAddr = "ipc://" + filepath.Join(dir, "in.sock")
	outAddr = "ipc://" + filepath.Join(dir, "out.sock")
	in, err := zmtp.Listen(inAddr)
	if err != nil {
		t.Fatal(err)
	}
	out, err = zmtp.Listen(outAddr)
	if err != nil {
		t.Fatal(err)
	}
	return in, out, inAddr, outAddr
}

type adopted struct {
	f   *Frontend
	err error
}

func adoptAsync(in, out net.Listener, start, count int, timeout time.Duration) chan adopted {
	ch := make(chan adopted, 1)
	go func() {
		f, err := Adopt(context.Background(), in, out, start, count, timeout, Options{})
		ch <- adopted{f, err}
	}()
	return ch
}

func waitAdopted(t *testing.T, ch chan adopted) adopted {
	t.Helper()
	select {
	case a := <-ch:
		if a.f != nil {
			t.Cleanup(func() { a.f.Close() })
		}
		return a
	case <-time.After(stall):
		t.Fatal("Adopt never returned")
		return adopted{}
	}
}

func TestAdoptServesTheLaunchersEngine(t *testing.T) {
	in, out, inAddr, outAddr := launcherListeners(t)
	ch := adoptAsync(in, out, 3, 1, stall)
	fe := &fakeEngine{t: t, rank: 3}
	fe.connect(inAddr, outAddr, fakeOpts{version: "0.32.0", rank: 3})
	t.Cleanup(fe.kill)
	a := waitAdopted(t, ch)
	if a.err != nil {
		t.Fatal(a.err)
	}
	es := a.f.Engines()
	if len(es) != 1 || es[0].Rank() != 3 || es[0].Ready().MaxModelLen != 2048 {
		t.Fatalf("engines %v", es)
	}
	e := es[0]
	rec := newRecorder(1)
	if _, err := e.Generate(context.Background(), greedy("req-a", 1), rec); err != nil {
		t.Fatal(err)
	}
	typ, v := fe.request()
	req := v.([]any)
	if typ != v032.TypeAdd || req[0] != "req-a" || toInt(field(t, req, 8)) != 3 {
		t.Fatalf("request %d %v", typ, req)
	}
	fe.send(&v032.OutputsMsg{Outputs: []v032.OutputMsg{{RequestID: "req-a", TokenIDs: []int32{21, 22}, FinishReason: v032.NoFinish, StopToken: -1, HasPrefill: true, PromptTokens: 3}}})
	fe.send(&v032.OutputsMsg{Outputs: []v032.OutputMsg{{RequestID: "req-a", TokenIDs: []int32{7}, FinishReason: v032.FinishStop, StopToken: 7}}})
	end := rec.wait(t)
	if end.Err != nil || end.Choices[0].FinishReason != "stop" || !slices.Equal(rec.tokens[0], []int32{21, 22, 7}) {
		t.Fatalf("tokens %v end %+v", rec.tokens[0], end)
	}
	// The listeners are closed: no engine attaches later.
	if nc, err := net.DialTimeout("unix", strings.TrimPrefix(inAddr, "ipc://"), time.Second); err == nil {
		nc.Close()
		t.Fatal("the request listener still accepts")
	}
	// A killed engine is gone, as with engines that attach themselves.
	fe.kill()
	select {
	case <-e.Done():
	case <-time.After(stall):
		t.Fatal("the killed engine was not noticed")
	}
	if !errors.Is(e.Err(), ErrEngineDead) {
		t.Fatalf("err %v", e.Err())
	}
	eventually.Within(t, stall, "the killed engine unlisted", func() bool { return len(a.f.Engines()) == 0 })
}

func TestAdoptRefusesAnotherVersion(t *testing.T) {
	in, out, inAddr, outAddr := launcherListeners(t)
	ch := adoptAsync(in, out, 0, 1, stall)
	fe := &fakeEngine{t: t}
	fe.connect(inAddr, outAddr, fakeOpts{version: "0.34.0"})
	t.Cleanup(fe.kill)
	a := waitAdopted(t, ch)
	if !errors.Is(a.err, ErrVersion) || !strings.Contains(a.err.Error(), "0.34.0") || !strings.Contains(a.err.Error(), "0.32") {
		t.Fatalf("err %v", a.err)
	}
}

func TestAdoptTimesOut(t *testing.T) {
	in, out, _, outAddr := launcherListeners(t)
	ch := adoptAsync(in, out, 0, 1, 300*time.Millisecond)
	// Only the output connection comes; the engine never registers.
	c := dialZMTP(t, outAddr, "PUSH", nil)
	defer c.Close()
	a := waitAdopted(t, ch)
	if !errors.Is(a.err, ErrHandshake) || !strings.Contains(a.err.Error(), "0 of 1 engines registered and 1 of their output") {
		t.Fatalf("err %v", a.err)
	}
}

func TestAdoptRefusesAForeignRank(t *testing.T) {
	in, out, inAddr, outAddr := launcherListeners(t)
	ch := adoptAsync(in, out, 0, 1, 500*time.Millisecond)
	// An engine of rank 5 (its identity): refused before its
	// registration, which may then fail to be written.
	c := dialZMTP(t, inAddr, "DEALER", []byte{5, 0})
	defer c.Close()
	_ = c.WriteMsg(mapMsg("vllm_version", "0.32.0"))
	o := dialZMTP(t, outAddr, "PUSH", nil)
	defer o.Close()
	if a := waitAdopted(t, ch); !errors.Is(a.err, ErrHandshake) {
		t.Fatalf("err %v", a.err)
	}
}

func TestPairOutputsByPeer(t *testing.T) {
	c := func() *zmtp.Conn { return new(zmtp.Conn) }
	a, b := c(), c()
	regs := map[int]string{0: "pid 10", 1: "pid 11"}
	type pl struct {
		peer string
		c    *zmtp.Conn
	}
	peer := func(s string) string { return s }
	pull := func(p pl) (string, *zmtp.Conn) { return p.peer, p.c }
	got, err := pairOutputs(regs, []pl{{"pid 11", b}, {"pid 10", a}}, peer, pull)
	if err != nil || got[0] != a || got[1] != b {
		t.Fatalf("pairs %v, %v", got, err)
	}
	if _, err := pairOutputs(map[int]string{0: "host 10.0.0.1", 1: "host 10.0.0.1"}, []pl{{"host 10.0.0.1", a}, {"host 10.0.0.1", b}}, peer, pull); !errors.Is(err, ErrHandshake) {
		t.Fatalf("two engines from one host: %v", err)
	}
	if _, err := pairOutputs(regs, []pl{{"pid 10", a}, {"pid 12", b}}, peer, pull); !errors.Is(err, ErrHandshake) {
		t.Fatalf("an output from a stranger: %v", err)
	}
	// One engine: its output connection, whatever the peer.
	got, err = pairOutputs(map[int]string{4: ""}, []pl{{"", a}}, peer, pull)
	if err != nil || got[4] != a {
		t.Fatalf("one engine: %v, %v", got, err)
	}
}

func TestAdoptCancelled(t *testing.T) {
	in, out, _, _ := launcherListeners(t)
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() {
		_, err := Adopt(ctx, in, out, 0, 1, time.Hour, Options{})
		ch <- err
	}()
	cancel()
	select {
	case err := <-ch:
		if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrHandshake) {
			t.Fatalf("err %v", err)
		}
	case <-time.After(stall):
		t.Fatal("Adopt did not end when cancelled")
	}
}
