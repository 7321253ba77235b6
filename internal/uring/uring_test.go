//go:build linux

package uring

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// newRing returns a ring, or skips where io_uring is unavailable (the
// fallback is tested by netio); with VAJRA_REQUIRE_IO_URING set (.ci/run
// sets it on a kernel that has io_uring) it fails instead.
func newRing(t testing.TB, entries uint32) *Ring {
	t.Helper()
	if err := Probe(); err != nil {
		if os.Getenv("VAJRA_REQUIRE_IO_URING") != "" {
			t.Fatalf("io_uring unavailable and VAJRA_REQUIRE_IO_URING is set: %v", err)
		}
		t.Skipf("io_uring unavailable here: %v", err)
	}
	r, err := New(entries)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// pair returns a connected non-blocking stream socket pair.
func pair(t testing.TB) (w, r int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(fds[0]); _ = unix.Close(fds[1]) })
	return fds[0], fds[1]
}

func readAll(t *testing.T, fd int, n int) []byte {
	t.Helper()
	got := make([]byte, 0, n)
	buf := make([]byte, 64<<10)
	for len(got) < n {
		k, err := unix.Read(fd, buf)
		if err != nil {
			t.Fatalf("read after %d of %d bytes: %v", len(got), n, err)
		}
		got = append(got, buf[:k]...)
	}
	return got
}

func TestBatchOfSends(t *testing.T) {
	r := newRing(t, 8)
	const n = 20 // more than one batch: 8 entries each
	type sock struct{ w, r int }
	socks := make([]sock, n)
	msgs := make([][]byte, n)
	for i := range socks {
		socks[i].w, socks[i].r = pair(t)
		msgs[i] = bytes.Repeat([]byte{byte('a' + i)}, 100+i)
	}
	var res []Completion
	for i := 0; i < n; {
		start := i
		for ; i < n; i++ {
			if err := r.Send(socks[i].w, msgs[i], uint64(i)); errors.Is(err, ErrFull) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if r.Queued() != i-start || r.Queued() > r.Entries() {
			t.Fatalf("queued %d, want %d (at most %d)", r.Queued(), i-start, r.Entries())
		}
		var err error
		if res, err = r.Submit(res); err != nil {
			t.Fatal(err)
		}
		if r.Queued() != 0 {
			t.Fatalf("queued %d after Submit", r.Queued())
		}
	}
	if len(res) != n {
		t.Fatalf("%d completions, want %d", len(res), n)
	}
	seen := make(map[uint64]bool)
	for _, c := range res {
		if seen[c.Tag] || c.Tag >= n {
			t.Fatalf("completion tag %d repeated or unknown", c.Tag)
		}
		seen[c.Tag] = true
		if want := int32(len(msgs[c.Tag])); c.Res != want {
			t.Fatalf("send %d: res %d, want %d", c.Tag, c.Res, want)
		}
	}
	for i, s := range socks {
		if got := readAll(t, s.r, len(msgs[i])); !bytes.Equal(got, msgs[i]) {
			t.Fatalf("socket %d got %q", i, got)
		}
	}
}

// A send larger than the socket buffer completes at once with a short count,
// and a send into a full buffer with -EAGAIN: MSG_DONTWAIT keeps the kernel
// from parking them, so the caller can hand the rest to its own path.
func TestShortSendAndEAGAIN(t *testing.T) {
	r := newRing(t, 4)
	w, rd := pair(t)
	if err := unix.SetsockoptInt(w, unix.SOL_SOCKET, unix.SO_SNDBUF, 4096); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 4<<20)
	if err := r.Send(w, big, 1); err != nil {
		t.Fatal(err)
	}
	res, err := r.Submit(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Res <= 0 || int(res[0].Res) >= len(big) {
		t.Fatalf("want one short send, got %+v", res)
	}
	sent := int(res[0].Res)
	if err := r.Send(w, big[sent:], 2); err != nil {
		t.Fatal(err)
	}
	if res, err = r.Submit(res[:0]); err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Res != -int32(unix.EAGAIN) {
		t.Fatalf("want -EAGAIN on a full socket, got %+v", res)
	}
	if got := readAll(t, rd, sent); !bytes.Equal(got, big[:sent]) {
		t.Fatal("the short send's bytes differ")
	}
}

// A send to a closed peer fails with -EPIPE and raises no signal; the other
// sends of the batch are unaffected.
func TestSendErrorIsPerSocket(t *testing.T) {
	r := newRing(t, 4)
	w1, r1 := pair(t)
	w2, closedPeer := pair(t)
	if err := unix.Close(closedPeer); err != nil {
		t.Fatal(err)
	}
	msg := []byte("token")
	if err := r.Send(w2, msg, 2); err != nil {
		t.Fatal(err)
	}
	if err := r.Send(w1, msg, 1); err != nil {
		t.Fatal(err)
	}
	res, err := r.Submit(nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]int32{}
	for _, c := range res {
		got[c.Tag] = c.Res
	}
	if got[1] != int32(len(msg)) || got[2] != -int32(unix.EPIPE) {
		t.Fatalf("results %v: want 1:%d 2:%d", got, len(msg), -int32(unix.EPIPE))
	}
	if b := readAll(t, r1, len(msg)); !bytes.Equal(b, msg) {
		t.Fatalf("got %q", b)
	}
}

func TestSubmitNothing(t *testing.T) {
	r := newRing(t, 2)
	res, err := r.Submit(nil)
	if err != nil || len(res) != 0 {
		t.Fatalf("empty Submit: %v %v", res, err)
	}
}

// TestSubmitAllocs: a batch costs no allocation when dst has room.
func TestSubmitAllocs(t *testing.T) {
	r := newRing(t, 16)
	w, rd := pair(t)
	msg := []byte("data: {}\n\n")
	res := make([]Completion, 0, 16)
	buf := make([]byte, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		for i := 0; i < 8; i++ {
			_ = r.Send(w, msg, uint64(i))
		}
		res, _ = r.Submit(res[:0])
		for n := 0; n < 8*len(msg); {
			k, _ := unix.Read(rd, buf)
			n += k
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per batch, want 0", allocs)
	}
}

// BenchmarkSendBatch compares one io_uring_enter for 64 sends with 64
// write(2) calls, on socket pairs.
func BenchmarkSendBatch(b *testing.B) {
	const conns = 64
	ws := make([]int, conns)
	rs := make([]int, conns)
	for i := range ws {
		ws[i], rs[i] = pair(b)
	}
	msg := []byte("data: {\"choices\":[{\"delta\":{\"content\":\" token\"}}]}\n\n")
	buf := make([]byte, 64<<10)
	drain := func() {
		for _, fd := range rs {
			_, _ = unix.Read(fd, buf)
		}
	}
	b.Run("uring", func(b *testing.B) {
		r := newRing(b, conns)
		res := make([]Completion, 0, conns)
		b.ReportAllocs()
		for b.Loop() {
			for i, fd := range ws {
				_ = r.Send(fd, msg, uint64(i))
			}
			res, _ = r.Submit(res[:0])
			drain()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*conns), "ns/send")
	})
	b.Run("write", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, fd := range ws {
				_, _ = unix.Write(fd, msg)
			}
			drain()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*conns), "ns/send")
	})
}
