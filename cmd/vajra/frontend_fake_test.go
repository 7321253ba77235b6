package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"
	"golang.org/x/sys/unix"

	"github.com/vajra-go/vajra/engine/remote/vllmcore/v032"
	"github.com/vajra-go/vajra/engine/remote/vllmcore/zmtp"
	"github.com/vajra-go/vajra/engine/tokenizer"
	"github.com/vajra-go/vajra/internal/fixture"
)

// stall bounds the waits of these tests: a stall detector.
const stall = 30 * time.Second

// syncBuf is an io.Writer safe for the frontend's logger and the test.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// launched is `vajra frontend` run in process as vLLM's launcher runs it:
// the HTTP port bound, the engine sockets listening, all handed over by
// descriptor; and an engine core written in Go on the other side.
type launched struct {
	httpAddr string
	code     chan int
	cancel   context.CancelFunc
	log      *syncBuf
	in, out  *zmtp.Conn // the fake engine's DEALER and PUSH
	tok      *tokenizer.Tokenizer
}

func launch(t *testing.T) *launched {
	t.Helper()
	tokPath, err := fixture.Find("", filepath.Join(".tokenizers", "llama3", "package", "models", "tokenizer.json"), "the Llama 3 tokenizer is missing: run make tokenizers")
	dir := filepath.Dir(fixture.Need(t, "VAJRA_REQUIRE_TOKENIZERS", tokPath, err))
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The HTTP port: bound, not listening, as vLLM leaves it.
	hfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(hfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(hfd)
	httpAddr := "127.0.0.1:" + strconv.Itoa(sa.(*unix.SockaddrInet4).Port)
	// The engine sockets: listening on ipc paths.
	sockDir := t.TempDir()
	fds := make([]int, 2)
	eps := make([]string, 2)
	for i, name := range []string{"in", "out"} {
		eps[i] = "ipc://" + filepath.Join(sockDir, name)
		ln, err := zmtp.Listen(eps[i])
		if err != nil {
			t.Fatal(err)
		}
		uln := ln.(*net.UnixListener)
		uln.SetUnlinkOnClose(false) // the launcher's copy goes, the path stays
		fds[i] = listenerFD(t, uln)
		uln.Close()
	}
	args := []string{"--listen-fd", strconv.Itoa(hfd), "--input-listener-fd", strconv.Itoa(fds[0]), "--output-listener-fd", strconv.Itoa(fds[1]),
		"--engine-start-index", "0", "--engine-count", "1", "--data-parallel-size", "1",
		"--args-json", fmt.Sprintf(`{"model_tag": %q, "served_model_name": ["fake"], "max_model_len": 1024, "port": 8000, "enforce_eager": true}`, dir)}
	ctx, cancel := context.WithCancel(context.Background())
	l := &launched{httpAddr: httpAddr, code: make(chan int, 1), cancel: cancel, log: &syncBuf{}, tok: tok}
	go func() { l.code <- frontend(ctx, args, io.Discard, l.log) }()
	t.Cleanup(func() {
		cancel()
		l.exit(t)
		if t.Failed() {
			t.Logf("vajra frontend's log:\n%s", l.log)
		}
	})
	// The engine: its DEALER (identity: rank 0) and PUSH, then its
	// registration, as vLLM's engine core does once the handshake told it
	// these addresses.
	dial := func(ep, typ string, id []byte) *zmtp.Conn {
		nc, err := net.DialTimeout("unix", strings.TrimPrefix(ep, "ipc://"), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c, err := zmtp.Client(nc, typ, id, stall)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	l.in = dial(eps[0], "DEALER", []byte{0, 0})
	l.out = dial(eps[1], "PUSH", nil)
	reg := msgp.AppendMapHeader(nil, 4)
	reg = msgp.AppendString(reg, "max_model_len")
	reg = msgp.AppendInt(reg, 2048)
	reg = msgp.AppendString(reg, "vllm_version")
	reg = msgp.AppendString(reg, "0.32.0")
	reg = msgp.AppendString(reg, "data_parallel_rank")
	reg = msgp.AppendInt(reg, 0)
	reg = msgp.AppendString(reg, "max_num_seqs")
	reg = msgp.AppendInt(reg, 8)
	if err := l.in.WriteMsg(reg); err != nil {
		t.Fatal(err)
	}
	return l
}

// exit waits for the command's exit code (once).
func (l *launched) exit(t *testing.T) int {
	t.Helper()
	select {
	case c, ok := <-l.code:
		if ok {
			close(l.code)
			return c
		}
		return -1
	case <-time.After(stall):
		t.Error("vajra frontend did not return")
		return -1
	}
}

// serveOne reads one request off the engine's DEALER and answers it with
// the tokens of text, the last one finishing it by length.
func (l *launched) serveOne(t *testing.T, text string) (id string, sampling map[string]any) {
	t.Helper()
	frames, err := l.in.ReadMsg()
	if err != nil {
		t.Error(err)
		return "", nil
	}
	v, _, err := msgp.ReadIntfBytes(frames[1])
	if err != nil || frames[0][0] != v032.TypeAdd {
		t.Errorf("request %v: %v", frames, err)
		return "", nil
	}
	req := v.([]any)
	id = req[0].(string)
	ids := l.tok.Encode(nil, text)
	for i, tid := range ids {
		o := v032.OutputMsg{RequestID: id, TokenIDs: []int32{tid}, FinishReason: v032.NoFinish, StopToken: -1}
		if i == 0 {
			o.HasPrefill, o.PromptTokens = true, len(req[1].([]any))
		}
		if i == len(ids)-1 {
			o.FinishReason = v032.FinishLength
		}
		b, aux := v032.AppendOutputs(nil, nil, &v032.OutputsMsg{Outputs: []v032.OutputMsg{o}})
		if err := l.out.WriteMsg(append([][]byte{b}, aux...)...); err != nil {
			t.Error(err)
		}
	}
	return id, req[3].(map[string]any)
}

func TestFrontendCommandServesTheHandedOverEngine(t *testing.T) {
	l := launch(t)
	type reply struct {
		status int
		body   []byte
		err    error
	}
	got := make(chan reply, 1)
	go func() {
		c := http.Client{Timeout: stall}
		resp, err := c.Post("http://"+l.httpAddr+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model": "fake", "messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 3, "temperature": 0}`))
		if err != nil {
			got <- reply{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- reply{resp.StatusCode, b, err}
	}()
	_, sp := l.serveOne(t, "Hi there!")
	if sp["temperature"] != 0.0 || toInt(sp["max_tokens"]) != 3 {
		t.Errorf("sampling params %v", sp)
	}
	r := <-got
	if r.err != nil || r.status != 200 {
		t.Fatalf("%d %s %v", r.status, r.body, r.err)
	}
	var cc struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(r.body, &cc); err != nil || len(cc.Choices) != 1 {
		t.Fatalf("%s: %v", r.body, err)
	}
	if cc.Model != "fake" || cc.Choices[0].Message.Content != "Hi there!" || cc.Choices[0].FinishReason != "length" {
		t.Fatalf("answer %s", r.body)
	}
	// The launcher's SIGTERM: a clean exit.
	l.cancel()
	if code := l.exit(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if log := l.log.String(); strings.Contains(log, "engine gone") || !strings.Contains(log, "engine closed") {
		t.Fatalf("Vajra's own shutdown is logged as an engine failure:\n%s", log)
	}
}

func TestFrontendCommandEndsWithItsEngines(t *testing.T) {
	l := launch(t)
	// Up: the model list answers on the handed-over port.
	c := http.Client{Timeout: stall}
	resp, err := c.Get("http://" + l.httpAddr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"id":"fake"`) || !strings.Contains(string(b), `"max_model_len":1024`) {
		t.Fatalf("/v1/models: %s", b)
	}
	// The engine dies with no word (SIGKILL): Vajra exits non-zero, which
	// ends vllm serve.
	l.in.Close()
	l.out.Close()
	if code := l.exit(t); code != 1 {
		t.Fatalf("exit code %d after the engine died", code)
	}
	if !strings.Contains(l.log.String(), "every engine is gone") {
		t.Fatalf("log:\n%s", l.log)
	}
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case uint64:
		return int64(x)
	}
	return -999
}
