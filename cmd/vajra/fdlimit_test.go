package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperEnv runs this test binary as `vajra serve` under a small
// open-file limit (see TestMain).
const helperEnv = "VAJRA_TEST_SERVE_ARGS"

// fdLimit is the open-file limit of the helper server.
const fdLimit = 128

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(helperEnv); ok {
		rl := unix.Rlimit{Cur: fdLimit, Max: fdLimit}
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
			fmt.Fprintln(os.Stderr, "setrlimit:", err)
			os.Exit(3)
		}
		os.Exit(run(append([]string{"serve"}, strings.Fields(args)...), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// startHelper starts the helper server and returns its address.
func startHelper(t *testing.T, args string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+args)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper did not start: %v", err)
	}
	return cmd, strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(line, "vajra serving on ")), "http://")
}

// ping opens a connection and does GET /ping on it; it returns the
// connection (left open) and the status, 0 when the server did not answer.
func ping(addr string) (net.Conn, int) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, 0
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprint(c, "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || len(line) < 12 {
		return c, 0
	}
	var status int
	fmt.Sscanf(line[9:], "%d", &status)
	return c, status
}

// TestDescriptorLimit: under an open-file limit of 128, more connections
// than descriptors never stop the server. With the default
// --max-connections (the limit minus a reserve), the excess gets a canned
// 503 and is closed. With --max-connections above the limit, accept(2)
// runs out of descriptors: the acceptor refuses the excess (503, or a
// close when gnet cannot take the connection over) and counts it as
// vajra_rejected_requests_total{reason="descriptors"}; once the clients
// leave, a normal request succeeds, and the server still exits cleanly on
// SIGTERM. (gnet's own accept path stopped the whole engine on EMFILE and
// vajra serve exited 1.)
func TestDescriptorLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	for _, tc := range []struct {
		name, args string
		reason     string // the refusals' reason in /metrics
	}{
		{"default", "--port 0", "max_connections"},
		{"past the limit", "--port 0 --max-connections 100000", "descriptors"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, addr := startHelper(t, tc.args)
			var open []net.Conn
			defer func() {
				for _, c := range open {
					c.Close()
				}
			}()
			ok, refused, dropped := 0, 0, 0
			for i := 0; i < 2*fdLimit; i++ {
				c, status := ping(addr)
				if c != nil {
					open = append(open, c)
				}
				switch status {
				case 200:
					ok++
				case 503:
					refused++
				default:
					dropped++ // closed without an answer
				}
			}
			t.Logf("ok %d, refused %d, closed without an answer %d", ok, refused, dropped)
			if ok == 0 || refused == 0 || ok >= fdLimit {
				t.Fatalf("ok %d, refused %d, dropped %d", ok, refused, dropped)
			}
			for _, c := range open {
				c.Close()
			}
			open = nil
			// Still serving once descriptors are free again (closes are
			// processed asynchronously: retry, bounded).
			for i := 0; ; i++ {
				c, status := ping(addr)
				if c != nil {
					c.Close()
				}
				if status == 200 {
					break
				}
				if i == 1000 {
					t.Fatalf("not serving after the clients left: %d", status)
				}
			}
			if n := rejected(t, addr, tc.reason); n < refused {
				t.Errorf("rejected{reason=%q} = %d, want at least %d", tc.reason, n, refused)
			}
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("exit after SIGTERM: %v", err)
				}
			case <-ctx.Done():
				t.Fatal("no exit after SIGTERM")
			}
		})
	}
}

// rejected reads vajra_rejected_requests_total{reason} from /metrics.
func rejected(t *testing.T, addr, reason string) int {
	t.Helper()
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	prefix := `vajra_rejected_requests_total{reason="` + reason + `"} `
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}
