package llama

import (
	"testing"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
)

// TestComputeThreads: ComputeThreads (vajra_llama_compute_threads) is
// --threads when given, and the thread tuner's choice otherwise, which
// starts at one thread.
func TestComputeThreads(t *testing.T) {
	if e := newTestEngine(t, Config{Config: engine.Config{MaxModelLen: 256}, Threads: 2}, tinymodel.Config{}); e.ComputeThreads() != 2 {
		t.Errorf("--threads 2: ComputeThreads %d", e.ComputeThreads())
	}
	path, err := tinymodel.TempFile(t.TempDir(), tinymodel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Config: engine.Config{MaxModelLen: 256}, LibDir: needLib(t), ModelPath: path})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if !e.cfg.autoThreads || e.ComputeThreads() != 1 {
		t.Errorf("no --threads: tuner %v, ComputeThreads %d, want the tuner at 1", e.cfg.autoThreads, e.ComputeThreads())
	}
}
