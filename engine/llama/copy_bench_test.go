package llama

import (
	"testing"

	"github.com/vajra-go/vajra/engine/llama/capi"
	"github.com/vajra-go/vajra/internal/realmodel"
)

// BenchmarkStreamCopy: a 60-token prompt in one stream of SmolLM2's
// default short streams (64 of 1,024 tokens) copied into 56 others, as a
// round of 64 requests sharing a prompt starts, and the next Decode
// (which performs llama.cpp's deferred whole-stream copies). "cells"
// copies what the source holds through the sequence state (CopyPrefix);
// "whole" is llama.cpp's own cross-stream copy. Needs the real model
// (`make real-model`).
//
//	go test ./engine/llama/ -run '^$' -bench StreamCopy -benchtime 5x
func BenchmarkStreamCopy(b *testing.B) {
	if err := capi.Load(needLib(b)); err != nil {
		b.Fatal(err)
	}
	m, err := capi.LoadModel(realmodel.Need(b), capi.ModelParams{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Free()
	c, err := capi.NewContext(m, capi.ContextParams{Ctx: 64 * 1024, Batch: 512, UBatch: 512, SeqMax: 64,
		Threads: 2, FlashAttn: -1, TypeK: capi.GGMLTypeF16, TypeV: capi.GGMLTypeF16, OffloadKQV: true})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Free()
	batch := capi.NewBatch(512)
	defer batch.Free()
	const n, copies = 60, 56
	decode := func(pos, count int) {
		batch.Reset()
		for i := 0; i < count; i++ {
			batch.Add(capi.Token(100+pos+i), pos+i, 0, i == count-1)
		}
		if c.Decode(batch) != 0 {
			b.Fatal("decode failed")
		}
	}
	for _, whole := range []bool{false, true} {
		name := "cells"
		if whole {
			name = "whole"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				c.Clear()
				decode(0, n)
				b.StartTimer()
				for d := 1; d <= copies; d++ {
					if whole {
						c.SeqCopy(0, d, -1, -1)
						c.SeqRemove(d, n, -1)
					} else if !c.CopyPrefix(0, d, n) {
						b.Fatal("llama.cpp refused the state")
					}
				}
				decode(n, 1)
			}
		})
	}
}
