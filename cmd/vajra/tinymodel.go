package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/vajra-go/vajra/engine/llama/tinymodel"
)

// tinyModel runs `vajra tiny-model`: it writes a tiny random-weight
// llama model (tinymodel.WriteFile) to the file -o names.
func tinyModel(args []string, stdout, stderr io.Writer) int {
	def := tinymodel.Config{Layers: tinymodel.DefaultLayers, Dim: tinymodel.DefaultDim, Heads: tinymodel.DefaultHeads,
		KVHeads: tinymodel.DefaultKVHeads, FF: tinymodel.DefaultFF, Context: tinymodel.DefaultContext, Name: tinymodel.DefaultName}
	var cfg tinymodel.Config
	fs := flag.NewFlagSet("vajra tiny-model", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "GGUF file to write (required)")
	fs.IntVar(&cfg.Layers, "layers", def.Layers, "transformer blocks")
	fs.IntVar(&cfg.Dim, "dim", def.Dim, "embedding width")
	fs.IntVar(&cfg.Heads, "heads", def.Heads, "attention heads (dim/heads must be even)")
	fs.IntVar(&cfg.KVHeads, "kv-heads", def.KVHeads, "key/value heads (must divide heads)")
	fs.IntVar(&cfg.FF, "ff", def.FF, "feed-forward width")
	fs.IntVar(&cfg.Context, "ctx", def.Context, "context length the model declares")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "seed of the random weights (same seed, same file)")
	fs.BoolVar(&cfg.F16, "f16", false, "store matrices as F16 (half the size)")
	fs.StringVar(&cfg.Name, "name", def.Name, "general.name")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: vajra tiny-model -o FILE [flags]\n\nWrites a tiny random-weight llama model, with a real BPE tokenizer and a\nChatML template, that llama.cpp loads and runs: for tests and benchmarks.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *out == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if err := tinymodel.WriteFile(*out, cfg); err != nil {
		fmt.Fprintln(stderr, "vajra tiny-model:", err)
		if errors.Is(err, tinymodel.ErrConfig) {
			return 2
		}
		return 1
	}
	if st, err := os.Stat(*out); err == nil {
		fmt.Fprintf(stdout, "wrote %s (%d bytes)\n", *out, st.Size())
	}
	return 0
}
