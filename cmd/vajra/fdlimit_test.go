package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
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

// TestDescriptorLimit: under an open-file limit of 128, the default
// --max-connections keeps accept(2) from ever failing with EMFILE: more
// connections than descriptors get 503 and are closed, and the server
// goes on serving. With --max-connections set above the limit, accept
// does hit EMFILE; gnet then stops its whole engine, and `vajra serve`
// exits 1 instead of hanging with a dead listener.
func TestDescriptorLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	t.Run("default", func(t *testing.T) {
		cmd, addr := startHelper(t, "--port 0")
		var open []net.Conn
		defer func() {
			for _, c := range open {
				c.Close()
			}
		}()
		ok, refused := 0, 0
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
				t.Fatalf("connection %d: no answer (ok %d, refused %d)", i, ok, refused)
			}
		}
		if ok == 0 || refused == 0 || ok >= fdLimit {
			t.Fatalf("ok %d, refused %d", ok, refused)
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
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	})
	t.Run("over the limit", func(t *testing.T) {
		cmd, addr := startHelper(t, "--port 0 --max-connections 100000")
		var open []net.Conn
		defer func() {
			for _, c := range open {
				c.Close()
			}
		}()
		for i := 0; i < 2*fdLimit; i++ {
			c, status := ping(addr)
			if c != nil {
				open = append(open, c)
			}
			if status != 200 {
				break
			}
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		select {
		case err := <-done:
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 1 {
				t.Fatalf("exit: %v, want code 1", err)
			}
		case <-ctx.Done():
			t.Fatal("server kept running after gnet stopped on EMFILE")
		}
	})
}
