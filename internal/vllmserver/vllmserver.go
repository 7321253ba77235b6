// Package vllmserver runs a real vLLM (the CPU build `make vllm` installs
// into .vllm) for tests and benchmarks: `vllm serve` on a tiny
// random-weight Llama in Hugging Face format with the real Llama 3
// tokenizer (engine/remote/vllm/tinymodel.py, written once into
// .vllm/models), on a loopback port, killed (its whole process group)
// when the test ends.
//
// Tests that need it skip when the venv is missing, unless
// VAJRA_REQUIRE_VLLM is set.
package vllmserver

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vajra-go/vajra/internal/fixture"
)

// ServedName is the model name the server is started with.
const ServedName = "tiny"

// Root is the module root: the nearest directory above the working one
// with a go.mod.
func Root() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for ; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", errors.New("no go.mod above the working directory")
		}
	}
}

// Find returns the venv's bin directory: $VAJRA_VLLM_BIN, else .vllm/bin
// under the module root.
func Find() (string, error) {
	bin := os.Getenv("VAJRA_VLLM_BIN")
	if bin == "" {
		root, err := Root()
		if err != nil {
			return "", err
		}
		bin = filepath.Join(root, ".vllm", "bin")
	}
	if _, err := os.Stat(filepath.Join(bin, "vllm")); err != nil {
		return "", errors.New("vLLM is not installed: run `make vllm` (a CPU build into .vllm), or set VAJRA_VLLM_BIN")
	}
	return bin, nil
}

// Need returns the venv's bin directory, or skips tb (fails it with
// VAJRA_REQUIRE_VLLM set).
func Need(tb testing.TB) string {
	tb.Helper()
	bin, err := Find()
	return fixture.Need(tb, "VAJRA_REQUIRE_VLLM", bin, err)
}

// Model writes the tiny model once (into .vllm/models/tiny-llama3) and
// returns its folder.
func Model(tb testing.TB, bin string) string {
	tb.Helper()
	root, err := Root()
	if err != nil {
		tb.Fatal(err)
	}
	tok := TokenizerDir(tb)
	model := filepath.Join(root, ".vllm", "models", "tiny-llama3")
	if _, err := os.Stat(filepath.Join(model, "model.safetensors")); err != nil {
		out, err := exec.Command(filepath.Join(bin, "python"), filepath.Join(root, "engine", "remote", "vllm", "tinymodel.py"), tok, model).CombinedOutput()
		if err != nil {
			tb.Fatalf("tinymodel.py: %v\n%s", err, out)
		}
	}
	return model
}

// TokenizerDir is the folder of the real Llama 3 tokenizer (`make
// tokenizers`).
func TokenizerDir(tb testing.TB) string {
	tb.Helper()
	root, err := Root()
	if err != nil {
		tb.Fatal(err)
	}
	tok := filepath.Join(root, ".tokenizers", "llama3", "package", "models")
	if _, err := os.Stat(filepath.Join(tok, "tokenizer.json")); err != nil {
		tb.Fatal("the Llama 3 tokenizer is missing: run `make tokenizers`")
	}
	return tok
}

// Server is one `vllm serve` process group.
type Server struct {
	Addr string // HOST:PORT
	bin  string
	args []string
	env  []string
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  bytes.Buffer
	once *sync.Once
	done chan struct{}
}

// Start starts `vllm serve` on the tiny model, with --grpc when grpc is
// set (vLLM's OpenAI server otherwise), on a free loopback port. It does
// not wait for it to be up (see Wait).
func Start(tb testing.TB, grpc bool, extra ...string) *Server {
	tb.Helper()
	if grpc {
		extra = append([]string{"--grpc"}, extra...)
	}
	return startServe(tb, nil, extra)
}

// StartFrontend starts `vllm serve` on the tiny model as Start does, with
// the front end at path in the place of vLLM's own OpenAI server
// (VLLM_USE_RUST_FRONTEND=1 VLLM_RUST_FRONTEND_PATH=path: vLLM's launcher
// for its Rust front end, which `vajra frontend` also answers).
func StartFrontend(tb testing.TB, path string, extra ...string) *Server {
	tb.Helper()
	return startServe(tb, []string{"VLLM_USE_RUST_FRONTEND=1", "VLLM_RUST_FRONTEND_PATH=" + path}, extra)
}

func startServe(tb testing.TB, env, extra []string) *Server {
	tb.Helper()
	bin := Need(tb)
	model := Model(tb, bin)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	lis.Close()
	args := []string{"serve", model, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--served-model-name", ServedName,
		"--max-model-len", "2048", "--dtype", "float32", "--enforce-eager", "--max-num-seqs", "16"}
	args = append(args, extra...)
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), bin: filepath.Join(bin, "vllm"), args: args,
		env: append(append(os.Environ(), "VLLM_CPU_KVCACHE_SPACE=1", "VLLM_CPU_OMP_THREADS_BIND=nobind", "HF_HUB_OFFLINE=1", "VLLM_NO_USAGE_STATS=1"), env...)}
	s.start(tb)
	tb.Cleanup(func() {
		s.Kill()
		if tb.Failed() {
			tb.Logf("vllm serve's log:\n%s", s.Log())
		}
	})
	return s
}

// StartHeadless starts `vllm serve --headless` on the tiny model: one
// engine core (data-parallel rank 0 of 1) that connects to the front end
// bound at handshake (HOST:PORT, vllm-core://), with no HTTP server of
// its own. It does not wait for the engine to attach.
func StartHeadless(tb testing.TB, handshake string, extra ...string) *Server {
	tb.Helper()
	bin := Need(tb)
	model := Model(tb, bin)
	host, port, err := net.SplitHostPort(handshake)
	if err != nil {
		tb.Fatal(err)
	}
	args := []string{"serve", model, "--headless", "--data-parallel-address", host, "--data-parallel-rpc-port", port,
		"--data-parallel-size", "1", "--data-parallel-size-local", "1",
		"--max-model-len", "2048", "--dtype", "float32", "--enforce-eager", "--max-num-seqs", "16"}
	args = append(args, extra...)
	s := &Server{Addr: handshake, bin: filepath.Join(bin, "vllm"), args: args,
		env: append(os.Environ(), "VLLM_CPU_KVCACHE_SPACE=1", "VLLM_CPU_OMP_THREADS_BIND=nobind", "HF_HUB_OFFLINE=1", "VLLM_NO_USAGE_STATS=1")}
	s.start(tb)
	tb.Cleanup(func() {
		s.Kill()
		if tb.Failed() {
			tb.Logf("vllm serve --headless's log:\n%s", tail(s.Log(), 8000))
		}
	})
	return s
}

func (s *Server) start(tb testing.TB) {
	tb.Helper()
	cmd := exec.Command(s.bin, s.args...)
	cmd.Env = s.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout, cmd.Stderr = (*logWriter)(s), (*logWriter)(s)
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done, s.once = cmd, done, new(sync.Once)
	s.mu.Unlock()
}

// Restart starts the server again, on the same address, after Kill. It
// does not wait for it to be up (see Wait).
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.Kill()
	s.start(tb)
}

// EnginePID is the process id of the server's engine core (vLLM names
// it VLLM::EngineCore), a process of the group of its own.
func (s *Server) EnginePID() (int, error) {
	pgid := s.process().Pid
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == pgid {
			continue
		}
		if g, err := syscall.Getpgid(pid); err != nil || g != pgid {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(cmdline, []byte("EngineCore")) {
			return pid, nil
		}
	}
	return 0, errors.New("no VLLM::EngineCore process in the server's group")
}

func (s *Server) process() *os.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process
}

type logWriter Server

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.log.Write(p)
}

// Log returns what the server printed.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// Done is closed when the process has exited.
func (s *Server) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// Wait polls up until it holds, failing tb when the server exits first or
// d passes (start-up takes minutes on two shared cores).
func (s *Server) Wait(tb testing.TB, d time.Duration, up func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !up() {
		select {
		case <-s.Done():
			tb.Fatalf("vllm serve exited:\n%s", tail(s.Log(), 4000))
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("vllm serve not up within %v", d)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Terminate sends SIGTERM to `vllm serve` itself (not its group), as a
// user's Ctrl-C or a service manager's stop does.
func (s *Server) Terminate() {
	s.process().Signal(syscall.SIGTERM)
}

// Kill kills the process group (SIGKILL: vLLM's engine core and worker
// are processes of their own) and waits. Idempotent.
func (s *Server) Kill() {
	s.mu.Lock()
	once, pid, done := s.once, s.cmd.Process.Pid, s.done
	s.mu.Unlock()
	once.Do(func() {
		syscall.Kill(-pid, syscall.SIGKILL)
		<-done
	})
}

// CPU is the CPU time (user and system) of every live process in the
// group so far.
func (s *Server) CPU() time.Duration {
	pgid := s.process().Pid
	ents, _ := os.ReadDir("/proc")
	var ticks int64
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err != nil || g != pgid {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		u, _ := strconv.ParseInt(f[11], 10, 64)  // utime, field 14
		st, _ := strconv.ParseInt(f[12], 10, 64) // stime, field 15
		ticks += u + st
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ
}
