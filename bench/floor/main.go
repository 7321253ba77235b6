// Command floor is the floor reference server of the Vajra benchmark: see
// floor.go. Usage:
//
//	GOMAXPROCS=1 taskset -c 0 floor -port 8001 -itl 20ms
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	var o Options
	flag.StringVar(&o.Host, "host", "127.0.0.1", "listen host")
	flag.IntVar(&o.Port, "port", 8001, "listen port (0 picks a free one)")
	flag.DurationVar(&o.ITL, "itl", 20_000_000, "inter-token latency (0: steps back to back, one token per stream per step)")
	flag.IntVar(&o.Tokens, "tokens", 0, "tokens per response (0: the request's max_tokens, else 128)")
	flag.IntVar(&o.Loops, "loops", 0, "event loops (0: GOMAXPROCS)")
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	addr, stop, err := Serve(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "floor: listening on %s (itl %v, pid %d)\n", addr, o.ITL, os.Getpid())
	<-ctx.Done()
	stop()
}
