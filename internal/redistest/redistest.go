// Package redistest runs a real redis-server for tests: on a loopback port,
// with a temporary directory, persistence off, stopped when the test ends.
// Tests that need it skip when the binary is missing, unless
// VAJRA_REQUIRE_REDIS is set (CI sets it, and .ci/run installs Debian's
// redis-server when it is absent), so CI runs them.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server is one redis-server process. It listens on a loopback TCP port
// (plain, or TLS for StartTLS) and on a Unix socket in its directory.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	tls  bool // the port speaks TLS (StartTLS); CAFile verifies it
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts redis-server on a free loopback port, or skips the test when
// the binary is not installed (fails instead under VAJRA_REQUIRE_REDIS).
// The server is stopped at the test's end.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, false)
}

// StartTLS is Start with the port speaking TLS only, under a certificate
// for 127.0.0.1 signed by a CA made for the test (CAFile).
func StartTLS(t testing.TB) *Server {
	t.Helper()
	return start(t, true)
}

func start(t testing.TB, tls bool) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("VAJRA_REQUIRE_REDIS") != "" {
			t.Fatalf("redis-server not found and VAJRA_REQUIRE_REDIS is set: %v", err)
		}
		t.Skip("redis-server not installed (apt-get install redis-server); .ci/run installs it")
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir(), tls: tls}
	if tls {
		writeCerts(t, s.dir)
	}
	for attempt := 0; ; attempt++ {
		s.port = freePort(t)
		if err := s.start(); err == nil {
			break
		} else if attempt == 4 {
			t.Fatalf("redis-server did not start: %v", err)
		}
	}
	t.Cleanup(s.Stop)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the server's redis:// URL (database 0), rediss:// for StartTLS.
func (s *Server) URL() string {
	if s.tls {
		return "rediss://" + s.Addr() + "/0"
	}
	return "redis://" + s.Addr() + "/0"
}

// SocketURL is the server's unix:// URL.
func (s *Server) SocketURL() string { return "unix://" + s.socket() }

// CAFile is the PEM file of the CA that signed a StartTLS server's
// certificate.
func (s *Server) CAFile() string { return filepath.Join(s.dir, "ca.pem") }

func (s *Server) socket() string { return filepath.Join(s.dir, "redis.sock") }

// Stop stops the server and waits for it to exit. Idempotent.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart starts the server again on the same port (after Stop), with the
// same (empty: nothing is persisted) data directory.
func (s *Server) Restart() {
	s.t.Helper()
	if s.cmd != nil {
		s.t.Fatal("redistest: Restart of a running server")
	}
	// The port was ours a moment ago; give the kernel a bounded while to
	// let a rebind through.
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := s.start()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server did not restart on port %d: %v", s.port, err)
		}
		time.Sleep(50 * time.Millisecond) // retrying a bind, not synchronising
	}
}

func (s *Server) start() error {
	args := []string{"--bind", "127.0.0.1",
		"--unixsocket", s.socket(), "--unixsocketperm", "700",
		"--dir", s.dir, "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--loglevel", "warning",
		"--logfile", filepath.Join(s.dir, "redis.log")}
	if s.tls {
		args = append(args, "--port", "0", "--tls-port", strconv.Itoa(s.port),
			"--tls-cert-file", filepath.Join(s.dir, "server.pem"), "--tls-key-file", filepath.Join(s.dir, "server.key"),
			"--tls-ca-cert-file", s.CAFile(), "--tls-auth-clients", "no")
	} else {
		args = append(args, "--port", strconv.Itoa(s.port))
	}
	cmd := exec.Command(s.bin, args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	// Ready when it answers PING; bounded.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ping("unix", s.socket()) == nil {
			s.cmd, s.done = cmd, done
			return nil
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redis-server exited: %s", strings.TrimSpace(string(log)))
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("no PONG on %s within 10s", s.socket())
		}
		time.Sleep(10 * time.Millisecond) // polling a process's readiness
	}
}

// ping sends PING in RESP and expects +PONG.
func ping(network, addr string) error {
	c, err := net.DialTimeout(network, addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("unexpected reply %q", line)
	}
	return nil
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
