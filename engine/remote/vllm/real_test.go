package vllm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/engine/remote/internal/testworker"
)

// The tests against a real `vllm serve MODEL --grpc` (a CPU build of vLLM
// in the venv that `make vllm` installs into .vllm) on a tiny random-weight
// Llama with the real Llama 3 tokenizer, written by tinymodel.py. They
// skip when the venv is missing, and fail instead with VAJRA_REQUIRE_VLLM
// set.

// moduleRoot is the nearest directory above the working one with go.mod.
func moduleRoot(tb testing.TB) string {
	d, _ := os.Getwd()
	for ; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if d == filepath.Dir(d) {
			tb.Fatal("no go.mod above the working directory")
		}
	}
}

// needVLLM returns the venv's bin directory, or skips.
func needVLLM(tb testing.TB) string {
	tb.Helper()
	bin := os.Getenv("VAJRA_VLLM_BIN")
	if bin == "" {
		bin = filepath.Join(moduleRoot(tb), ".vllm", "bin")
	}
	if _, err := os.Stat(filepath.Join(bin, "vllm")); err != nil {
		msg := "vLLM is not installed: run `make vllm` (a CPU build into .vllm), or set VAJRA_VLLM_BIN"
		if os.Getenv("VAJRA_REQUIRE_VLLM") != "" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	return bin
}

// vllmServer is one `vllm serve --grpc` process.
type vllmServer struct {
	Addr string
	cmd  *exec.Cmd
	log  *bytes.Buffer
	mu   sync.Mutex
	once sync.Once
	done chan struct{}
}

func (s *vllmServer) Kill() {
	s.once.Do(func() {
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) // vLLM's engine core is a child of its own
		<-s.done
	})
}

// startVLLM writes the tiny model (once, into .vllm/models) and starts
// `vllm serve --grpc` on it on a free loopback port.
func startVLLM(t *testing.T, bin string) (*vllmServer, string) {
	t.Helper()
	root := moduleRoot(t)
	tok := filepath.Join(root, ".tokenizers", "llama3", "package", "models")
	if _, err := os.Stat(filepath.Join(tok, "tokenizer.json")); err != nil {
		t.Fatal("the Llama 3 tokenizer is missing: run `make tokenizers`")
	}
	model := filepath.Join(root, ".vllm", "models", "tiny-llama3")
	if _, err := os.Stat(filepath.Join(model, "model.safetensors")); err != nil {
		out, err := exec.Command(filepath.Join(bin, "python"), filepath.Join(root, "engine", "remote", "vllm", "tinymodel.py"), tok, model).CombinedOutput()
		if err != nil {
			t.Fatalf("tinymodel.py: %v\n%s", err, out)
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	lis.Close()
	cmd := exec.Command(filepath.Join(bin, "vllm"), "serve", model, "--grpc", "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--served-model-name", "tiny", "--max-model-len", "2048", "--dtype", "float32", "--enforce-eager", "--max-num-seqs", "16")
	cmd.Env = append(os.Environ(), "VLLM_CPU_KVCACHE_SPACE=1", "VLLM_CPU_OMP_THREADS_BIND=nobind", "HF_HUB_OFFLINE=1", "VLLM_NO_USAGE_STATS=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s := &vllmServer{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd, log: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = lockedWriter{s}, lockedWriter{s}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			s.mu.Lock()
			t.Logf("vllm serve's log:\n%s", s.log.String())
			s.mu.Unlock()
		}
	})
	return s, string(must(os.ReadFile(filepath.Join(tok, "tokenizer.json"))))
}

type lockedWriter struct{ s *vllmServer }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.log.Write(p)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestRealVLLM runs against a `vllm serve --grpc` it starts, or with
// VAJRA_VLLM_ADDR=HOST:PORT against one already serving the tiny model
// (its tokenizer then is not compared, nor is it killed).
// runReal is run with a wait for a loaded machine: the tiny model's steps
// take milliseconds, but two cores shared with builds make them seconds.
func runReal(t *testing.T, c *Client, g *remote.Generate) (*testworker.Recorder, *remote.End) {
	t.Helper()
	rx := testworker.NewRecorder()
	if _, err := c.Generate(context.Background(), g, rx); err != nil {
		t.Fatal(err)
	}
	return rx, rx.Wait(t, 2*time.Minute)
}

func TestRealVLLM(t *testing.T) {
	var srv *vllmServer
	var tokJSON string
	if addr := os.Getenv("VAJRA_VLLM_ADDR"); addr != "" {
		srv = &vllmServer{Addr: addr, done: make(chan struct{})}
	} else {
		srv, tokJSON = startVLLM(t, needVLLM(t))
	}
	c := dial(t, srv.Addr)
	ctx := context.Background()
	// Start-up on two shared cores takes minutes.
	deadline := time.Now().Add(15 * time.Minute)
	for c.Health(ctx) != nil {
		select {
		case <-srv.done:
			t.Fatal("vllm serve exited")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("vllm serve not healthy within 15 minutes")
		}
		time.Sleep(500 * time.Millisecond)
	}

	t.Run("Info", func(t *testing.T) {
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.ServedModelName != "tiny" || info.MaxContextLength != 2048 || info.VocabSize != 128256 || len(info.EOSTokenIDs) == 0 {
			t.Errorf("info %+v", info)
		}
	})
	t.Run("TokenizerFiles", func(t *testing.T) {
		files, err := c.TokenizerFiles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tokJSON == "" {
			tokJSON = string(files["tokenizer.json"])
		}
		if string(files["tokenizer.json"]) != tokJSON || len(files["tokenizer.json"]) < 1<<20 || len(files["tokenizer_config.json"]) == 0 {
			t.Errorf("files: %d names; tokenizer.json %d bytes, want %d", len(files), len(files["tokenizer.json"]), len(tokJSON))
		}
	})
	prompt := []int32{128000, 9906, 11, 1917, 0} // <|begin_of_text|>Hello, world!
	t.Run("N2Logprobs", func(t *testing.T) {
		g := &remote.Generate{ID: "real-n2", Prompt: prompt, MaxTokens: 8, CachePrompt: true,
			Sampling: &engine.Sampling{N: 2, Temperature: 1, Seed: 7, HasSeed: true, IgnoreEOS: true, Logprobs: true, TopLogprobs: 2}}
		rx, end := runReal(t, c, g)
		if end.Err != nil {
			t.Fatal(end.Err)
		}
		for ch := 0; ch < 2; ch++ {
			if len(rx.IDs[ch]) != 8 || end.Choices[ch].FinishReason != "length" || end.Choices[ch].CompletionTokens != 8 {
				t.Errorf("choice %d: %d tokens, end %+v", ch, len(rx.IDs[ch]), end.Choices[ch])
			}
			if len(rx.Logprobs[ch]) != 8 || len(rx.Top[ch]) != 8 || len(rx.Top[ch][0]) < 2 {
				t.Errorf("choice %d: %d logprobs %d top rows", ch, len(rx.Logprobs[ch]), len(rx.Top[ch]))
			}
			for k, lp := range rx.Logprobs[ch] {
				if lp > 0 {
					t.Errorf("choice %d token %d: logprob %v > 0", ch, k, lp)
				}
			}
		}
		if end.PromptTokens != len(prompt) {
			t.Errorf("prompt tokens %d, want %d", end.PromptTokens, len(prompt))
		}
	})
	t.Run("GreedyDeterministic", func(t *testing.T) {
		// Temperature 0 reaches vLLM as a present 0: greedy, the same
		// tokens twice. (vLLM refuses n > 1 with greedy sampling, 400.)
		var got [2][]int32
		for i := range got {
			g := &remote.Generate{ID: fmt.Sprint("real-greedy-", i), Prompt: prompt, MaxTokens: 8, Sampling: &engine.Sampling{IgnoreEOS: true}}
			rx, end := runReal(t, c, g)
			if end.Err != nil {
				t.Fatal(end.Err)
			}
			got[i] = rx.IDs[0]
		}
		if len(got[0]) != 8 || fmt.Sprint(got[0]) != fmt.Sprint(got[1]) {
			t.Errorf("greedy runs differ: %v %v", got[0], got[1])
		}
		g := &remote.Generate{ID: "real-greedy-n2", Prompt: prompt, MaxTokens: 8, Sampling: &engine.Sampling{N: 2}}
		_, end := runReal(t, c, g)
		var we *remote.WorkerError
		if !errors.As(end.Err, &we) || we.Status != 400 || we.Retryable {
			t.Errorf("greedy n=2: %v, want vLLM's 400", end.Err)
		}
	})
	t.Run("StopToken", func(t *testing.T) {
		g := &remote.Generate{ID: "real-first", Prompt: prompt, MaxTokens: 4, Sampling: &engine.Sampling{IgnoreEOS: true}}
		rx, end := runReal(t, c, g)
		if end.Err != nil || len(rx.IDs[0]) != 4 {
			t.Fatalf("%v %v", rx.IDs[0], end.Err)
		}
		stop := rx.IDs[0][2]
		g = &remote.Generate{ID: "real-stop", Prompt: prompt, MaxTokens: 4, Sampling: &engine.Sampling{IgnoreEOS: true, StopTokenIDs: []int{int(stop)}}}
		rx, end = runReal(t, c, g)
		// The stop token may come earlier than position 2 too.
		if end.Err != nil || end.Choices[0].FinishReason != "stop" || end.Choices[0].MatchedTokenID != stop || len(rx.IDs[0]) > 3 {
			t.Errorf("tokens %v end %+v", rx.IDs[0], end.Choices[0])
		}
	})
	t.Run("Abort", func(t *testing.T) {
		rx := testworker.NewRecorder()
		g := &remote.Generate{ID: "real-abort", Prompt: prompt, MaxTokens: 2000, Sampling: &engine.Sampling{IgnoreEOS: true, Temperature: 1}}
		call, err := c.Generate(ctx, g, rx)
		if err != nil {
			t.Fatal(err)
		}
		testworker.WaitFor(t, time.Minute, "3 tokens", func() bool { return rx.Count(0) >= 3 })
		call.Abort()
		end := rx.Wait(t, 2*time.Second)
		if end.Err != nil || end.Choices[0].FinishReason != "abort" {
			t.Errorf("end %+v", end)
		}
		testworker.WaitFor(t, 10*time.Second, "vLLM's running count back to 0", func() bool {
			l, err := c.Load(ctx)
			return err == nil && l.Running == 0
		})
	})
	t.Run("KilledMidStream", func(t *testing.T) {
		if srv.cmd == nil {
			t.Skip("not ours to kill")
		}
		rx := testworker.NewRecorder()
		g := &remote.Generate{ID: "real-kill", Prompt: prompt, MaxTokens: 2000, Sampling: &engine.Sampling{IgnoreEOS: true, Temperature: 1}}
		if _, err := c.Generate(ctx, g, rx); err != nil {
			t.Fatal(err)
		}
		testworker.WaitFor(t, time.Minute, "3 tokens", func() bool { return rx.Count(0) >= 3 })
		srv.Kill()
		end := rx.Wait(t, 2*time.Second)
		var we *remote.WorkerError
		if !errors.As(end.Err, &we) || we.Retryable {
			t.Errorf("End.Err %v", end.Err)
		}
	})
}
