package testworker

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/vajra-go/vajra/engine/remote/sglang/sglangpb"
	"github.com/vajra-go/vajra/engine/remote/vllm/vllmpb"
)

// Server is a worker serving both protocols on one loopback port.
type Server struct {
	*Worker
	Addr string // HOST:PORT
	srv  *grpc.Server
}

func newServer(cfg Config, lis net.Listener) *Server {
	w := newWorker(cfg)
	// As vLLM's and SGLang's servers: a client may ping every 10 s.
	srv := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
		MinTime: 10 * time.Second, PermitWithoutStream: true,
	}))
	vllmpb.RegisterVllmEngineServer(srv, &vllmService{w: w})
	sglangpb.RegisterSglangSchedulerServer(srv, &sglangService{w: w})
	s := &Server{Worker: w, Addr: lis.Addr().String(), srv: srv}
	go srv.Serve(lis)
	return s
}

// Start serves cfg on a loopback port in this process until the test ends.
func Start(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := newServer(cfg, lis)
	tb.Cleanup(s.Stop)
	return s
}

// Stop closes every connection at once (the streams on them fail).
func (s *Server) Stop() { s.srv.Stop() }

// childEnv carries a child worker's Config (JSON) and address.
const childEnv, childAddrEnv = "VAJRA_TESTWORKER_CONFIG", "VAJRA_TESTWORKER_ADDR"

// Child runs a child worker and never returns when this process was
// started as one (by StartChild); otherwise it returns at once. Call it
// first in the test binary's TestMain.
func Child() {
	cfgJSON := os.Getenv(childEnv)
	if cfgJSON == "" {
		return
	}
	var cfg Config
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "testworker:", err)
		os.Exit(2)
	}
	addr := os.Getenv(childAddrEnv)
	var lis net.Listener
	var err error
	for range 100 { // a restart on the port the killed one had
		if lis, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testworker:", err)
		os.Exit(2)
	}
	s := newServer(cfg, lis)
	fmt.Printf("LISTEN %s\n", s.Addr)
	select {}
}

// Proc is a child worker process.
type Proc struct {
	Addr string
	cmd  *exec.Cmd
	once sync.Once
	done chan struct{}
}

// StartChild starts a child worker (this test binary again, whose TestMain
// calls Child) on addr ("127.0.0.1:0" for any port) and waits until it
// listens. It is killed when the test ends.
func StartChild(tb testing.TB, cfg Config, addr string) *Proc {
	tb.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(b), childAddrEnv+"="+addr)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &Proc{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	tb.Cleanup(p.Kill)
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		for sc.Scan() {
		}
	}()
	select {
	case l, ok := <-line:
		a, found := strings.CutPrefix(l, "LISTEN ")
		if !ok || !found {
			p.Kill()
			tb.Fatalf("child worker: %q", l)
		}
		p.Addr = a
	case <-time.After(20 * time.Second):
		p.Kill()
		tb.Fatal("child worker did not start within 20 s")
	}
	return p
}

// Kill kills the process (SIGKILL) and waits for it. Idempotent.
func (p *Proc) Kill() {
	p.once.Do(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
}
