package vajra

import (
	"context"
	"io"

	"github.com/vajra-go/vajra/bench"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
)

// The binary's other commands, here so that cmd/vajra needs nothing but
// this package.

// TinyModelConfig is the shape of a tiny random-weight llama model for
// tests and benchmarks (`vajra tiny-model`); a zero field takes its
// default (see DefaultTinyModelConfig).
type TinyModelConfig = tinymodel.Config

// DefaultTinyModelConfig returns the shape `vajra tiny-model` writes by
// default: 2 blocks, width 64, 4 heads, 2 key/value heads, feed-forward
// width 176, context 2048, F32.
func DefaultTinyModelConfig() TinyModelConfig {
	return TinyModelConfig{
		Layers: tinymodel.DefaultLayers, Dim: tinymodel.DefaultDim, Heads: tinymodel.DefaultHeads,
		KVHeads: tinymodel.DefaultKVHeads, FF: tinymodel.DefaultFF, Context: tinymodel.DefaultContext,
		Name: tinymodel.DefaultName,
	}
}

// ErrTinyModelConfig is wrapped by WriteTinyModel's error when the shape
// is invalid (as opposed to a failure to write the file).
var ErrTinyModelConfig = tinymodel.ErrConfig

// WriteTinyModel writes a tiny random-weight llama model as a GGUF file
// at path: a real byte-level BPE tokenizer and a ChatML template that
// llama.cpp loads, weights drawn from cfg.Seed (the same cfg gives the
// same bytes). Serve it with Config.Llama.ModelPath.
func WriteTinyModel(path string, cfg TinyModelConfig) error {
	return tinymodel.WriteFile(path, cfg)
}

// Bench runs the load generator, `vajra bench`, with its command-line
// arguments (see bench -h); it writes its report to stdout and returns the
// exit code. ctx ends the run early.
func Bench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return bench.Main(ctx, args, stdout, stderr)
}
