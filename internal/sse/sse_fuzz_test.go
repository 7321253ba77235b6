package sse

import (
	"slices"
	"testing"
)

// FuzzReader parses its input whole and in two halves (at the fuzzed
// offset) and requires the same events: the reader must not depend on how
// bytes arrive.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\"}\n\n: keep-alive\n\n",
		"event: response.output_text.delta\ndata: {\"delta\":\" fox\"}\n\nid: 3\nretry: 10\n\n",
	} {
		f.Add([]byte(s), uint16(len(s)/2))
		f.Add([]byte(crlf(s)), uint16(7))
	}
	f.Add([]byte("data: a\r\ndata: b\r\n\r\nevent: x\n"), uint16(3))
	f.Fuzz(func(t *testing.T, in []byte, at uint16) {
		split := int(at) % (len(in) + 1)
		var whole, halves collect
		var r1, r2 Reader
		err1 := r1.Feed(in, &whole)
		a := append([]byte(nil), in[:split]...)
		b := append([]byte(nil), in[split:]...)
		err2 := r2.Feed(a, &halves)
		clear(a) // the reader must not keep references to fed bytes
		if err2 == nil {
			err2 = r2.Feed(b, &halves)
		}
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("errors differ: %v vs %v", err1, err2)
		}
		if err1 == nil && (!slices.Equal(whole.names, halves.names) || !slices.Equal(whole.datas, halves.datas)) {
			t.Fatalf("split %d: whole %q/%q, halves %q/%q", split, whole.names, whole.datas, halves.names, halves.datas)
		}
	})
}
