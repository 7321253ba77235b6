// Command vajra serves the OpenAI and Anthropic APIs in front of an LLM
// engine (`vajra serve`) and measures servers (`vajra bench`).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/vajra-go/vajra/bench"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `Vajra: a fast, dependable front door for LLM inference engines.

Usage:
  vajra serve [flags]   serve the OpenAI and Anthropic APIs (see vajra serve --help)
  vajra frontend ...    vLLM's front end, started by vllm serve with
                        VLLM_USE_RUST_FRONTEND=1 VLLM_RUST_FRONTEND_PATH=vajra
                        (see vajra frontend -h)
  vajra bench [flags]   load-test a server on loopback (see vajra bench -h)
  vajra tiny-model -o FILE [flags]
                        write a tiny random-weight llama model for tests (see vajra tiny-model -h)
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "frontend":
		return frontend(ctx, args[1:], stdout, stderr)
	case "bench":
		return bench.Main(ctx, args[1:], stdout, stderr)
	case "tiny-model":
		return tinyModel(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "vajra: unknown command %q\n\n%s", args[0], usage)
	return 2
}
