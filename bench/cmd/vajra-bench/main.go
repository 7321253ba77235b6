// Command vajra-bench runs the benchmark instrument on its own, the same as
// `vajra bench`: useful while cmd/vajra is being built, and for running the
// client without the server's code.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/vajra-go/vajra/bench"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := bench.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	cancel()
	os.Exit(code)
}
