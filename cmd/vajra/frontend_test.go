package main

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// launcherArgs is the command line vllm serve 0.32.0 gave its front end
// for `vllm serve MODEL --host 127.0.0.1 --port 18431 --served-model-name
// tiny --max-model-len 2048 --dtype float32 --enforce-eager --max-num-seqs
// 16` (recorded from a run with VLLM_USE_RUST_FRONTEND=1).
var launcherArgs = []string{"--listen-fd", "3", "--input-listener-fd", "4", "--output-listener-fd", "5",
	"--engine-start-index", "0", "--engine-count", "1", "--data-parallel-size", "1", "--args-json",
	`{"dtype": "float32", "enforce_eager": true, "engine_ready_timeout_secs": 600, "host": "127.0.0.1", "http_timeout_keep_alive": 5, "max_model_len": 2048, "max_num_seqs": 16, "model": "/m/tiny-llama3", "model_tag": "/m/tiny-llama3", "port": 18431, "profiler_config": {"active_iterations": 5, "profiler": null, "torch_profiler_dir": ""}, "served_model_name": ["tiny"]}`}

func TestParseFrontendLauncherArgs(t *testing.T) {
	a, err := parseFrontend(launcherArgs, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if a.listenFD != 3 || a.inputFD != 4 || a.outputFD != 5 || a.grpcListenFD != -1 || a.engineStart != 0 || a.engineCount != 1 || a.dpSize != 1 {
		t.Fatalf("fds and engines %+v", a)
	}
	s := a.serve
	if s.ModelTag != "/m/tiny-llama3" || !slices.Equal(s.servedNames(), []string{"tiny"}) || s.Host != "127.0.0.1" || s.Port != 18431 ||
		s.MaxModelLen != 2048 || s.EngineReadyTimeoutSecs != 600 || s.HTTPTimeoutKeepAlive != 5 {
		t.Fatalf("serve args %+v", s)
	}
}

func TestParseFrontendDefaultsAndForms(t *testing.T) {
	args := func(js string, extra ...string) []string {
		return append([]string{"--listen-fd", "3", "--input-listener-fd", "4", "--output-listener-fd", "5", "--args-json", js}, extra...)
	}
	// Only model_tag: served under the model's name; the engine count 1,
	// the data-parallel size the engine count; the ready timeout vLLM's.
	a, err := parseFrontend(args(`{"model_tag": "org/model"}`, "--engine-start-index", "2", "--engine-count", "2"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.serve.servedNames(), []string{"org/model"}) || a.dpSize != 2 || a.engineStart != 2 || a.serve.EngineReadyTimeoutSecs != 600 {
		t.Fatalf("%+v", a)
	}
	// A single string where vLLM takes a list; api_key and tokenizer.
	a, err = parseFrontend(args(`{"model_tag": "m", "served_model_name": "one", "api_key": ["k1", "k2"], "tokenizer": "/tok"}`), io.Discard)
	if err != nil || !slices.Equal(a.serve.servedNames(), []string{"one"}) || !slices.Equal(a.serve.APIKey, []string{"k1", "k2"}) || a.serve.Tokenizer != "/tok" {
		t.Fatalf("%+v %v", a, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--input-listener-fd", "4", "--output-listener-fd", "5", "--args-json", `{"model_tag": "m"}`}, "--listen-fd is required"},
		{args(`{"model_tag": "m"}`, "--grpc-listen-fd", "7"), "serves no gRPC"},
		{args(`{"model_tag": "m"}`, "--engine-count", "0"), "--engine-count 0"},
		{args(`{"model_tag": "m", "uds": "/tmp/s"}`), "uds"},
		{args(`{"model_tag": "m", "ssl_certfile": "c.pem"}`), "TLS"},
		{args(`{"model_tag": "m", "lora_modules": [{"name": "a", "path": "/a"}]}`), "lora_modules"},
		{args(`{"dtype": "float32"}`), "no model_tag"},
		{args(`{"model_tag": "m", "served_model_name": 3}`), "served_model_name"},
		{args(`not json`), "--args-json"},
		{[]string{"--listen-fd", "3", "--input-listener-fd", "4", "--output-listener-fd", "5"}, "--args-json is required"},
	} {
		if _, err := parseFrontend(c.args, io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one saying %q", c.args, err, c.want)
		}
	}
}

func TestTokenizerDirFromHFCache(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	snap := filepath.Join(cache, "models--org--model", "snapshots", "abc123")
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(cache, "models--org--model", "refs"), 0o755)
	os.WriteFile(filepath.Join(cache, "models--org--model", "refs", "main"), []byte("abc123\n"), 0o644)
	os.WriteFile(filepath.Join(snap, "tokenizer.json"), []byte("{}"), 0o644)
	s := vllmServeArgs{ModelTag: "org/model"}
	if dir, err := s.tokenizerDir(); err != nil || dir != snap {
		t.Fatalf("dir %q, %v", dir, err)
	}
	local := t.TempDir()
	s = vllmServeArgs{ModelTag: "org/model", Tokenizer: local}
	if dir, err := s.tokenizerDir(); err != nil || dir != local {
		t.Fatalf("tokenizer folder: %q, %v", dir, err)
	}
	s = vllmServeArgs{ModelTag: "org/other"}
	if _, err := s.tokenizerDir(); err == nil {
		t.Fatal("a model that is nowhere was found")
	}
}

// listenerFD returns a descriptor of a listening socket of ln, as a
// launcher would leave it open for its child.
func listenerFD(t *testing.T, ln interface{ File() (*os.File, error) }) int {
	t.Helper()
	f, err := ln.File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A descriptor of its own, which inheritedListener takes over (f's
	// would be closed again by f).
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

func TestInheritedListener(t *testing.T) {
	orig, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	fd := listenerFD(t, orig.(*net.TCPListener))
	ln, err := inheritedListener(fd, "listen-fd")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, ok := ln.(*net.TCPListener); !ok || ln.Addr().String() != orig.Addr().String() {
		t.Fatalf("listener %T at %v, want TCP at %v", ln, ln.Addr(), orig.Addr())
	}
	// The adopted listener accepts what is sent to the launcher's port.
	go func() {
		if c, err := net.DialTimeout("tcp", orig.Addr().String(), 5*time.Second); err == nil {
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	c.Close()
	if string(b) != "hi" {
		t.Fatalf("read %q", b)
	}
	// The descriptor given is the listener's now: closed.
	if _, err := inheritedListener(fd, "listen-fd"); err == nil || !strings.Contains(err.Error(), "not an open descriptor") {
		t.Fatalf("taking the descriptor twice: %v", err)
	}

	// A Unix socket (vLLM's ipc:// engine listeners) is taken as one.
	path := filepath.Join(t.TempDir(), "in.sock")
	uorig, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer uorig.Close()
	uln, err := inheritedListener(listenerFD(t, uorig), "input-listener-fd")
	if err != nil {
		t.Fatal(err)
	}
	defer uln.Close()
	if _, ok := uln.(*net.UnixListener); !ok {
		t.Fatalf("listener %T", uln)
	}

	// A socket bound but not listening, as vLLM leaves its HTTP port:
	// listened on.
	sfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(sfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	bln, err := inheritedListener(sfd, "listen-fd")
	if err != nil {
		t.Fatal(err)
	}
	defer bln.Close()
	if c, err := net.DialTimeout("tcp", bln.Addr().String(), 5*time.Second); err != nil {
		t.Fatalf("the bound socket does not listen: %v", err)
	} else {
		c.Close()
	}

	// A datagram socket, and a descriptor that is no socket.
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := inheritedListener(listenerFD(t, conn.(*net.UDPConn)), "listen-fd"); err == nil || !strings.Contains(err.Error(), "not a stream socket") {
		t.Fatalf("a UDP socket: %v", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, err := inheritedListener(int(r.Fd()), "output-listener-fd"); err == nil || !strings.Contains(err.Error(), "not a stream socket") {
		t.Fatalf("a pipe: %v", err)
	}
}

// TestFrontendGenerationConfig: vLLM's generation_config argument: auto
// (or none) reads the model's folder, which the tokenizer's need not be;
// vllm and a folder pass as given.
func TestFrontendGenerationConfig(t *testing.T) {
	model, tok := t.TempDir(), t.TempDir()
	for _, c := range []struct {
		s    vllmServeArgs
		want string
	}{
		{vllmServeArgs{ModelTag: model}, model},
		{vllmServeArgs{ModelTag: model, GenerationConfig: "auto", Tokenizer: tok}, model},
		{vllmServeArgs{ModelTag: model, GenerationConfig: "vllm"}, "vllm"},
		{vllmServeArgs{ModelTag: model, GenerationConfig: "/gen"}, "/gen"},
		{vllmServeArgs{ModelTag: "no/such-model-here"}, tok},
	} {
		if got := c.s.generationConfig(tok); got != c.want {
			t.Errorf("%+v: %q, want %q", c.s, got, c.want)
		}
	}
}
