// Package llamaserver runs a real llama-server (llama.cpp's own HTTP server,
// built by `make llama-server` from the same release whose libraries
// engine/llama loads) for tests and benchmarks: on a loopback port, with
// the model and flags the caller gives, killed when the test ends.
//
// Tests that need it skip when the binary is missing, unless
// VAJRA_REQUIRE_LLAMA_SERVER is set (CI sets it, and .ci/run builds the
// binary), so CI runs them.
package llamaserver

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/vajra-go/vajra/internal/fixture"
)

// rel is where `make llama-server` puts the binary, under the module root.
var rel = filepath.Join(".llama", "server", "bin", "llama-server")

// Find returns the llama-server binary: $VAJRA_LLAMA_SERVER, else
// .llama/server/bin/llama-server in the working directory or any directory
// above it (tests run in their package's directory).
func Find() (string, error) {
	return fixture.Find("VAJRA_LLAMA_SERVER", rel,
		"llama-server was not found: run `make llama-server` (builds it into .llama/server/bin), or set VAJRA_LLAMA_SERVER")
}

// Need returns the binary, or skips tb when it is missing (fails instead
// with VAJRA_REQUIRE_LLAMA_SERVER set).
func Need(tb testing.TB) string {
	tb.Helper()
	p, err := Find()
	return fixture.Need(tb, "VAJRA_REQUIRE_LLAMA_SERVER", p, err)
}

// Server is one llama-server process.
type Server struct {
	bin  string
	args []string
	port int
	log  *lockedBuffer

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts llama-server on model with the extra flags args (for
// example "-np", "4", "-c", "8192") on a free loopback port, waits until
// /health answers 200 (at most 60 s), and kills it when tb ends. It skips
// tb when the binary is missing (see Need).
func Start(tb testing.TB, model string, args ...string) *Server {
	tb.Helper()
	s := &Server{bin: Need(tb), port: freePort(tb), log: &lockedBuffer{}}
	s.args = append([]string{"-m", model, "--host", "127.0.0.1", "--port", strconv.Itoa(s.port),
		"--no-webui", "--metrics", "--slots"}, args...)
	if err := s.start(); err != nil {
		tb.Fatalf("llama-server: %v\n%s", err, s.log.tail())
	}
	tb.Cleanup(s.Kill)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL is the server's http:// base URL.
func (s *Server) URL() string { return "http://" + s.Addr() }

// Log is the tail of what the process printed (for a failing test's message).
func (s *Server) Log() string { return s.log.tail() }

// Kill kills the process (SIGKILL, as a crash would end it) and waits for
// it to exit. Idempotent.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Restart starts the process again on the same port with the same flags,
// after Kill, and waits until it is healthy.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.start()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("llama-server did not restart on port %d: %v\n%s", s.port, err, s.log.tail())
		}
		time.Sleep(100 * time.Millisecond) // retrying a bind, not synchronising
	}
}

func (s *Server) start() error {
	cmd := exec.Command(s.bin, s.args...)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+filepath.Dir(s.bin))
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if s.healthy() {
			s.mu.Lock()
			s.cmd, s.done = cmd, done
			s.mu.Unlock()
			return nil
		}
		select {
		case <-done:
			return errors.New("llama-server exited before it was healthy")
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return errors.New("llama-server was not healthy within 60s")
		}
		time.Sleep(20 * time.Millisecond) // polling a process's readiness
	}
}

func (s *Server) healthy() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/health", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func freePort(tb testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// lockedBuffer keeps the last 64 KiB the process printed.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	if l.b.Len() > 128<<10 {
		tail := append([]byte(nil), l.b.Bytes()[l.b.Len()-64<<10:]...)
		l.b.Reset()
		l.b.Write(tail)
	}
	return len(p), nil
}

func (l *lockedBuffer) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.b.Bytes()
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return string(b)
}
