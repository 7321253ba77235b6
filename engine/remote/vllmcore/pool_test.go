package vllmcore

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/engine/remote/vllmcore/v032"
	"github.com/vajra-go/vajra/internal/eventually"
)

// byteTok is a byte-level tokenizer: ids 0..255 the bytes, 256 BOS, 257
// EOS; EOSIDs adds 258 as generation_config's second EOS id.
type byteTok struct{}

func (byteTok) Encode(dst []int32, s string) []int32 {
	for i := 0; i < len(s); i++ {
		dst = append(dst, int32(s[i]))
	}
	return dst
}
func (byteTok) AppendPiece(dst []byte, id int32) []byte {
	if id < 256 {
		return append(dst, byte(id))
	}
	return dst
}
func (byteTok) IsSpecial(id int32) bool { return id >= 256 }
func (byteTok) VocabSize() int          { return 259 }
func (byteTok) ChatTemplate() string    { return "" }
func (byteTok) BOS() int32              { return 256 }
func (byteTok) EOS() int32              { return 257 }
func (byteTok) AddBOS() bool            { return true }
func (byteTok) EOSIDs() []int32         { return []int32{257, 258} }

// sink records one request's frames and its final Result.
type sink struct {
	mu     sync.Mutex
	text   strings.Builder
	res    *engine.Result
	done   chan struct{}
	errors int
}

func newSink() *sink { return &sink{done: make(chan struct{})} }

func (s *sink) Deliver(_ []byte, final *engine.Result) {
	if final != nil {
		s.res = final
		close(s.done)
	}
}
func (s *sink) AppendStart(dst []byte, _ *engine.Start) []byte { return dst }
func (s *sink) AppendDelta(dst []byte, d *engine.Delta) []byte {
	s.mu.Lock()
	s.text.Write(d.Text)
	s.mu.Unlock()
	return dst
}
func (s *sink) AppendChoiceEnd(dst []byte, _ *engine.ChoiceEnd) []byte { return dst }
func (s *sink) AppendEnd(dst []byte, _ *engine.Result) []byte          { return dst }
func (s *sink) AppendError(dst []byte, _ *engine.Error) []byte {
	s.errors++
	return dst
}

func (s *sink) wait(t testing.TB) *engine.Result {
	t.Helper()
	select {
	case <-s.done:
		return s.res
	case <-time.After(stall):
		t.Fatal("no final Result")
		return nil
	}
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// healthy lists the remote engine's serving workers.
func healthy(e *remote.Engine) []*remote.Worker {
	var out []*remote.Worker
	for _, w := range e.Workers() {
		if w.Healthy() && !w.Draining() {
			out = append(out, w)
		}
	}
	return out
}

// TestPoolAttachServeDieReattach: vllm-core://HOST:PORT as a remote
// engine's worker binds the address; an engine rank that attaches
// becomes a worker of its own and serves, with the tokenizer's EOS ids in
// its sampling params; when its connection drops (a SIGKILL) its stream
// ends with an error within a second and the worker is gone, requests get
// 503; the engine started again attaches again and serves.
func TestPoolAttachServeDieReattach(t *testing.T) {
	addr := freeAddr(t)
	e, err := remote.New(remote.Config{Workers: []string{"vllm-core://" + addr}, Tokenizer: byteTok{},
		TokenizerPath: "my-model", HealthInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	req := func(max int) *engine.Request {
		return &engine.Request{Model: "my-model", Stream: true, Prompt: "hi", Sampling: engine.Sampling{MaxTokens: max}}
	}
	if err := e.Prepare(req(4)); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("before any engine attached: %v", err)
	}
	fe := startFake(t, addr, fakeOpts{rank: 0})
	eventually.Within(t, stall, "rank 0 serving", func() bool { return len(healthy(e)) == 1 })
	if w := healthy(e)[0]; !strings.HasSuffix(w.URL(), "#0") || !strings.HasPrefix(w.URL(), "vllm-core://") {
		t.Fatalf("worker URL %q", w.URL())
	}
	if e.ModelName() != "my-model" {
		t.Fatalf("model name %q", e.ModelName())
	}

	// A request served: the tokenizer's EOS is _eos_token_id,
	// generation_config's other one a stop token id.
	s := newSink()
	r := req(4)
	r.Formatter = s
	if _, err := e.Start(r, s); err != nil {
		t.Fatal(err)
	}
	_, v := fe.request()
	add := v.([]any)
	sp := add[3].(map[string]any)
	if toInt(sp["_eos_token_id"]) != 257 || len(sp["stop_token_ids"].([]any)) != 1 || toInt(sp["stop_token_ids"].([]any)[0]) != 258 {
		t.Fatalf("sampling params %v", sp)
	}
	id := add[0].(string)
	fe.send(&v032.OutputsMsg{Outputs: []v032.OutputMsg{{RequestID: id, TokenIDs: []int32{'o', 'k'}, FinishReason: v032.NoFinish, StopToken: -1}},
		Stats: &v032.Stats{Running: 1, Waiting: 2, KVCacheUsage: 0.25, PrefixRequests: 1, PrefixQueries: 40, PrefixHits: 32}})
	fe.send(&v032.OutputsMsg{Outputs: []v032.OutputMsg{{RequestID: id, TokenIDs: []int32{258}, FinishReason: v032.FinishStop, StopToken: 258}}})
	if res := s.wait(t); res.Err != nil || res.Choices[0].Text != "ok" || res.Choices[0].FinishReason != engine.FinishStop {
		t.Fatalf("result %+v", res)
	}

	// The scheduler stats are the load signal and vLLM's metrics' source.
	eventually.Within(t, stall, "the engine's stats", func() bool {
		st := e.Stats()
		l := healthy(e)[0].Load()
		return st.PrefixQueries == 40 && st.PrefixHits == 32 && st.Waiting == 2 && l.Running == 1 && l.KVUsage == 0.25
	})

	// The engine dies mid-stream: the stream ends with an error at once.
	s = newSink()
	r = req(100)
	r.Formatter = s
	if _, err := e.Start(r, s); err != nil {
		t.Fatal(err)
	}
	_, v = fe.request()
	id = v.([]any)[0].(string)
	fe.send(&v032.OutputsMsg{Outputs: []v032.OutputMsg{{RequestID: id, TokenIDs: []int32{'a'}, FinishReason: v032.NoFinish, StopToken: -1}}})
	eventually.Within(t, stall, "first token", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.text.Len() > 0 })
	killed := time.Now()
	fe.kill()
	res := s.wait(t)
	if res.Err == nil || res.Err.Kind != engine.KindClosed || s.errors != 1 {
		t.Fatalf("after the engine died: %+v (%d error frames)", res.Err, s.errors)
	}
	if d := time.Since(killed); d > time.Second {
		t.Errorf("the stream ended %v after the engine died (want within 1 s)", d)
	}
	eventually.Within(t, stall, "the dead rank removed", func() bool { return len(e.Workers()) == 0 })
	s = newSink()
	r = req(4)
	r.Formatter = s
	if _, err := e.Start(r, s); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("with no engine attached: %v", err)
	}
	if _, err := e.IsSleeping(context.Background()); err == nil {
		t.Fatal("IsSleeping with no engine attached succeeded")
	}

	// Started again, it attaches again; the counters of the engine that
	// left still count.
	fe = startFake(t, addr, fakeOpts{rank: 0})
	eventually.Within(t, stall, "rank 0 back", func() bool { return len(healthy(e)) == 1 })
	if st := e.Stats(); st.PrefixQueries != 40 || st.PrefixHits != 32 {
		t.Fatalf("prefix counters %d/%d after the engine re-attached", st.PrefixHits, st.PrefixQueries)
	}
	done := make(chan error, 1)
	go func() {
		sleeping, err := e.IsSleeping(context.Background())
		if err == nil && !sleeping {
			err = errors.New("is_sleeping: false, want true")
		}
		done <- err
	}()
	typ, v := fe.request()
	call := v.([]any)
	if typ != v032.TypeUtility || call[2] != "is_sleeping" {
		t.Fatalf("utility %d %v", typ, v)
	}
	fe.send(&v032.OutputsMsg{Utility: &v032.UtilityOutput{CallID: toInt(call[1]), Result: []byte{0xc3}}})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(stall):
		t.Fatal("no answer")
	}
}

// TestPoolSetWorkers: a configuration reload keeps a pool and its
// attached members, and closing a removed pool ends its members.
func TestPoolSetWorkers(t *testing.T) {
	addr := freeAddr(t)
	u := "vllm-core://" + addr
	e, err := remote.New(remote.Config{Workers: []string{u}, Tokenizer: byteTok{}, HealthInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	startFake(t, addr, fakeOpts{rank: 0})
	startFake(t, addr, fakeOpts{rank: 1})
	eventually.Within(t, stall, "two ranks serving", func() bool { return len(healthy(e)) == 2 })
	if err := e.SetWorkers([]string{u}); err != nil {
		t.Fatal(err)
	}
	if n := len(healthy(e)); n != 2 {
		t.Fatalf("%d ranks serving after a reload that kept the pool", n)
	}
	other := "vllm-core://" + freeAddr(t)
	if err := e.SetWorkers([]string{other}); err != nil {
		t.Fatal(err)
	}
	eventually.Within(t, stall, "the removed pool's ranks gone", func() bool { return len(e.Workers()) == 0 })
	if _, err := remote.Dial(other, remote.DialOptions{}); err == nil {
		t.Fatal("Dial of a pool URL succeeded")
	}
}

// TestPoolNeedsTokenizerAndAddress: a vllm-core:// worker without a
// tokenizer, or on an address already bound, fails at start with an
// error that says what to do.
func TestPoolNeedsTokenizerAndAddress(t *testing.T) {
	addr := freeAddr(t)
	_, err := remote.New(remote.Config{Workers: []string{"vllm-core://" + addr}})
	if err == nil || !strings.Contains(err.Error(), "--tokenizer") {
		t.Fatalf("without a tokenizer: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = remote.New(remote.Config{Workers: []string{"vllm-core://" + ln.Addr().String()}, Tokenizer: byteTok{}})
	if err == nil || !strings.Contains(err.Error(), "bind") {
		t.Fatalf("on a bound address: %v", err)
	}
}
