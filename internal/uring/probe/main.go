// Command probe exits 0 when this kernel lets the process use io_uring
// (uring.Probe), 1 with the reason otherwise. .ci/run uses it to decide
// whether the io_uring tests must run (VAJRA_REQUIRE_IO_URING) or may
// skip.
package main

import (
	"fmt"
	"os"

	"github.com/vajra-go/vajra/internal/uring"
)

func main() {
	if err := uring.Probe(); err != nil {
		fmt.Fprintln(os.Stderr, "io_uring unavailable:", err)
		os.Exit(1)
	}
	fmt.Println("io_uring available")
}
