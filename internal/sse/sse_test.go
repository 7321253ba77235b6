package sse

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// collect records the events a Reader dispatches, copying them.
type collect struct {
	names, datas []string
}

func (c *collect) OnEvent(name, data []byte) {
	c.names = append(c.names, string(name))
	c.datas = append(c.datas, string(data))
}

func TestSSEFieldsAndFraming(t *testing.T) {
	f := func(in string, wantNames, wantDatas []string) {
		t.Helper()
		for _, variant := range []string{in, crlf(in)} {
			for split := 0; split <= len(variant); split++ {
				var r Reader
				var c collect
				if err := r.Feed([]byte(variant[:split]), &c); err != nil {
					t.Fatalf("split %d: %v", split, err)
				}
				if err := r.Feed([]byte(variant[split:]), &c); err != nil {
					t.Fatalf("split %d: %v", split, err)
				}
				if strings.Join(c.names, "|") != strings.Join(wantNames, "|") || strings.Join(c.datas, "|") != strings.Join(wantDatas, "|") {
					t.Fatalf("input %q split at %d:\n got names %q datas %q\nwant names %q datas %q", variant, split, c.names, c.datas, wantNames, wantDatas)
				}
			}
		}
	}
	f("data: a\n\n", []string{""}, []string{"a"})
	f("data:a\n\n", []string{""}, []string{"a"})
	f("data:  a\n\n", []string{""}, []string{" a"}) // only one space is stripped
	f("event: x\ndata: 1\n\nevent: y\ndata: 2\n\n", []string{"x", "y"}, []string{"1", "2"})
	f("data: a\ndata: b\n\n", []string{""}, []string{"a\nb"})
	f(": comment\ndata: a\n\n", []string{""}, []string{"a"})
	f("id: 7\nretry: 10\ndata: a\n\n", []string{""}, []string{"a"})
	f("event: lonely\n\ndata: b\n\n", []string{""}, []string{"b"}) // no data: not dispatched, name reset
	f("data\n\n", []string{""}, []string{""})
	f("data: unterminated", nil, nil)
	f("\n\n\ndata: a\n\n\n", []string{""}, []string{"a"})
}

func TestSSEPending(t *testing.T) {
	var r Reader
	var c collect
	_ = r.Feed([]byte("data: a\n\ndata: b\n"), &c)
	if !r.Pending() {
		t.Fatal("an event without its blank line must be pending")
	}
	_ = r.Feed([]byte("\n"), &c)
	if r.Pending() || len(c.datas) != 2 {
		t.Fatalf("pending=%v events=%q", r.Pending(), c.datas)
	}
}

func TestSSEEventTooLarge(t *testing.T) {
	var r Reader
	big := bytes.Repeat([]byte("x"), MaxEventBytes+1)
	err := r.Feed(append([]byte("data: "), big...), &collect{})
	if !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("err = %v, want ErrEventTooLarge", err)
	}
}

func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

// TestFeedAllocs: an event whose line spans two reads costs no allocation
// once the scratch buffers have grown.
func TestFeedAllocs(t *testing.T) {
	ev := []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" fox\"}}]}\n\n")
	var r Reader
	h := nopHandler{}
	_ = r.Feed(ev[:10], h) // warm the scratch buffers
	_ = r.Feed(ev[10:], h)
	if n := testing.AllocsPerRun(100, func() { _ = r.Feed(ev[:10], h); _ = r.Feed(ev[10:], h) }); n != 0 {
		t.Fatalf("%v allocations per event, want 0", n)
	}
}

type nopHandler struct{}

func (nopHandler) OnEvent(name, data []byte) {}
