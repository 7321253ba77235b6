package llama

import (
	"slices"
	"testing"

	"github.com/vajra-go/vajra/engine/llama/capi"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
)

// TestDecoderThread: llama_decode run on the Decoder's thread gives the
// logits a decode on the caller's thread gives, and reports its return
// code and the CPU time it took. (What it is for, sysmon no longer waking
// every 20 µs through a step, is measured in bench/RESULTS.md, not here.)
func TestDecoderThread(t *testing.T) {
	if err := capi.Load(needLib(t)); err != nil {
		t.Fatal(err)
	}
	path, err := tinymodel.TempFile(t.TempDir(), tinymodel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := capi.LoadModel(path, capi.ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	ctxs := make([]*capi.Context, 2)
	for i := range ctxs {
		if ctxs[i], err = capi.NewContext(m, capi.ContextParams{Ctx: 512, Batch: 64, UBatch: 64, SeqMax: 1, Threads: 1,
			FlashAttn: -1, TypeK: capi.GGMLTypeF16, TypeV: capi.GGMLTypeF16, OffloadKQV: true}); err != nil {
			t.Fatal(err)
		}
		defer ctxs[i].Free()
	}
	d, err := capi.NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	batch := capi.NewBatch(64)
	defer batch.Free()
	fill := func(pos, n int) {
		batch.Reset()
		for i := 0; i < n; i++ {
			batch.Add(capi.Token(40+(pos+i)%50), pos+i, 0, i == n-1)
		}
	}
	for step, n := range []int{48, 1, 1, 7} {
		pos := []int{0, 48, 49, 50}[step]
		fill(pos, n)
		if rc := ctxs[0].Decode(batch); rc != 0 {
			t.Fatalf("step %d: direct decode returned %d", step, rc)
		}
		want := slices.Clone(ctxs[0].Logits(n - 1))
		fill(pos, n)
		rc, cpu := d.Decode(ctxs[1], batch)
		if rc != 0 || cpu <= 0 {
			t.Fatalf("step %d: decoder returned %d after %v of CPU", step, rc, cpu)
		}
		if got := ctxs[1].Logits(n - 1); !slices.Equal(got, want) {
			t.Fatalf("step %d: logits through the decoder differ from a direct decode", step)
		}
	}
	// A batch the context cannot take fails on the decoder's thread with
	// llama_decode's own code, as it does directly.
	fill(600, 2)
	rc0 := ctxs[0].Decode(batch)
	fill(600, 2)
	if rc, _ := d.Decode(ctxs[1], batch); rc != rc0 || rc == 0 {
		t.Fatalf("an out-of-context batch: decoder %d, direct %d", rc, rc0)
	}
}
