package vllmcore

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/engine/remote/vllmcore/v032"
	"github.com/vajra-go/vajra/internal/eventually"
)

// stall bounds every wait in these tests: a stall detector, far above
// what each step takes.
const stall = 10 * time.Second

// recorder is a remote.Receiver that keeps what it was given.
type recorder struct {
	mu       sync.Mutex
	tokens   [][]int32 // per choice
	logprobs []float32
	top      [][]remote.TopLogprob
	prompt   []engine.TokenLogprob
	end      *remote.End
	ended    chan struct{}
	usage    [2]int
}

func newRecorder(n int) *recorder {
	return &recorder{tokens: make([][]int32, n), ended: make(chan struct{})}
}

func (r *recorder) Tokens(c *remote.Chunk) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tokens[c.Choice] = append(r.tokens[c.Choice], c.TokenIDs...)
	r.logprobs = append(r.logprobs, c.Logprobs...)
	for _, t := range c.Top {
		r.top = append(r.top, slices.Clone(t))
	}
	if c.PromptLogprobs != nil {
		r.prompt = c.PromptLogprobs
	}
	if c.PromptTokens > 0 {
		r.usage = [2]int{c.PromptTokens, c.CachedTokens}
	}
}

func (r *recorder) End(e *remote.End) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.end != nil {
		panic("End twice")
	}
	cp := *e
	cp.Choices = slices.Clone(e.Choices)
	r.end = &cp
	close(r.ended)
}

func (r *recorder) wait(t testing.TB) *remote.End {
	t.Helper()
	select {
	case <-r.ended:
	case <-time.After(stall):
		t.Fatal("the call never ended")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.end
}

func listen(t testing.TB, o Options) *Frontend {
	t.Helper()
	f, err := Listen("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func attach(t testing.TB, f *Frontend, rank int) (*fakeEngine, *Engine) {
	t.Helper()
	fe := startFake(t, f.Addr().String(), fakeOpts{rank: rank})
	for deadline := time.Now().Add(stall); ; {
		for _, e := range f.Engines() {
			if e.Rank() == rank && e.Err() == nil {
				return fe, e
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the engine did not attach")
		}
		if _, err := f.Wait(rank+1, 100*time.Millisecond); err != nil && errors.Is(err, ErrClosed) {
			t.Fatal(err)
		}
	}
}

func greedy(id string, n int) *remote.Generate {
	return &remote.Generate{
		ID: id, Prompt: []int32{1, 15, 300},
		Sampling:    &engine.Sampling{N: n, Temperature: 0, StopTokenIDs: []int{7}},
		MaxTokens:   4,
		EOSTokenIDs: []int32{2, 9}, // the tokenizer's, then generation_config's
		CachePrompt: true,
	}
}

func field(t testing.TB, req []any, i int) any {
	t.Helper()
	if i >= len(req) {
		return nil
	}
	return req[i]
}

func TestGenerateThroughFakeEngine(t *testing.T) {
	f := listen(t, Options{})
	fe, e := attach(t, f, 0)
	if e.Ready().MaxModelLen != 2048 || e.Ready().VLLMVersion != "0.32.0" {
		t.Fatalf("registration %+v", e.Ready())
	}
	rec := newRecorder(1)
	if _, err := e.Generate(context.Background(), greedy("req-1", 1), rec); err != nil {
		t.Fatal(err)
	}
	typ, v := fe.request()
	if typ != v032.TypeAdd {
		t.Fatalf("request type %d", typ)
	}
	req := v.([]any)
	if req[0] != "req-1" || len(req[1].([]any)) != 3 || field(t, req, 8) != int64(0) && field(t, req, 8) != uint64(0) {
		t.Fatalf("request %v", req)
	}
	sp := req[3].(map[string]any)
	if sp["temperature"] != 0.0 || toInt(sp["max_tokens"]) != 4 || toInt(sp["_eos_token_id"]) != 2 {
		t.Fatalf("sampling params %v", sp)
	}
	if all := sp["_all_stop_token_ids"].([]any); len(all) != 3 || toInt(all[0]) != 2 || toInt(all[1]) != 7 || toInt(all[2]) != 9 {
		t.Fatalf("_all_stop_token_ids %v", all)
	}
	// generation_config's other EOS ids stop as stop token ids (vLLM's
	// update_from_generation_config).
	if st := sp["stop_token_ids"].([]any); len(st) != 2 || toInt(st[0]) != 7 || toInt(st[1]) != 9 {
		t.Fatalf("stop_token_ids %v", st)
	}
	fe.send(&v032.OutputsMsg{Outputs: []v032.OutputMsg{{RequestID: "req-1", TokenIDs: []int32{11}, FinishReason: v032.NoFinish, StopToken: -1, HasPrefill: true, PromptTokens: 3, CachedTokens: 0}}, Stats: &v032.Stats{Running: 1}})
	fe.send(&v032.OutputsMsg{Outputs: []v032.OutputMsg{{RequestID: "req-1", TokenIDs: []int32{12, 13}, FinishReason: v032.NoFinish, StopToken: -1}}})
	fe.send(&v032.OutputsMsg{Outputs: []v032.OutputMsg{{RequestID: "req-1", TokenIDs: []int32{7}, FinishReason: v032.FinishStop, StopToken: 7}}, Stats: &v032.Stats{Running: 0}})
	end := rec.wait(t)
	if end.Err != nil || end.Choices[0].FinishReason != "stop" || end.Choices[0].MatchedTokenID != 7 || end.PromptTokens != 3 {
		t.Fatalf("end %+v", end)
	}
	if got := rec.tokens[0]; !slices.Equal(got, []int32{11, 12, 13, 7}) {
		t.Fatalf("tokens %v", got)
	}
	if l, _ := e.Load(context.Background()); l.Running != 0 || l.Capacity != 8 {
		t.Fatalf("load %+v", l)
	}
}

// TestVLLMExtensionsReachEngine: bad words (as token sequences),
// allowed token ids, priority, the session id, vllm_xargs (as
// extra_args) and a grammar constraint
// are in the EngineCoreRequest where vLLM's front end puts them, and the
// engine declares it has them.
func TestVLLMExtensionsReachEngine(t *testing.T) {
	f := listen(t, Options{})
	fe, e := attach(t, f, 0)
	info, err := e.Info(context.Background())
	if err != nil || info.Supports != engine.CapBadWords|engine.CapAllowedTokenIDs|engine.CapPriority|engine.CapCacheSalt|engine.CapExtraArgs {
		t.Fatalf("info %+v, %v", info, err)
	}
	g := greedy("req-x", 1)
	g.AllowedTokenIDs = []int{5, 6}
	g.BadWords = [][]int32{{40}, {41, 42}}
	g.Priority = -2
	g.SessionID = "conv-42"
	g.ExtraArgs = []byte(`{"mode":"strict","ids":[1,"two"]}`)
	g.Constraint = remote.Constraint{Kind: remote.ConstraintGrammar, Value: `root ::= "a"`, EBNF: `root ::= "a"`}
	if _, err := e.Generate(context.Background(), g, newRecorder(1)); err != nil {
		t.Fatal(err)
	}
	_, v := fe.request()
	req := v.([]any)
	if p := field(t, req, 13); toInt(p) != -2 {
		t.Fatalf("priority %v in %v", p, req)
	}
	if s := field(t, req, 20); s != "conv-42" {
		t.Fatalf("session_id %v in %v", s, req)
	}
	sp := req[3].(map[string]any)
	if x, _ := sp["extra_args"].(map[string]any); len(x) != 2 || x["mode"] != "strict" || len(x["ids"].([]any)) != 2 || toInt(x["ids"].([]any)[0]) != 1 || x["ids"].([]any)[1] != "two" {
		t.Fatalf("extra_args %#v", sp["extra_args"])
	}
	if a, _ := sp["allowed_token_ids"].([]any); len(a) != 2 || toInt(a[0]) != 5 || toInt(a[1]) != 6 {
		t.Fatalf("allowed_token_ids %v", sp["allowed_token_ids"])
	}
	bw, _ := sp["_bad_words_token_ids"].([]any)
	if len(bw) != 2 || len(bw[0].([]any)) != 1 || toInt(bw[1].([]any)[1]) != 42 {
		t.Fatalf("_bad_words_token_ids %v", sp["_bad_words_token_ids"])
	}
	so, _ := sp["structured_outputs"].(map[string]any)
	if so["grammar"] != `root ::= "a"` || so["_backend"] != "xgrammar" || so["regex"] != nil {
		t.Fatalf("structured_outputs %v", so)
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

func TestAbortReachesEngine(t *testing.T) {
	f := listen(t, Options{})
	fe, e := attach(t, f, 0)
	rec := newRecorder(1)
	call, err := e.Generate(context.Background(), greedy("req-a", 1), rec)
	if err != nil {
		t.Fatal(err)
	}
	fe.request()
	fe.send(&v032.OutputsMsg{Outputs: []v032.OutputMsg{{RequestID: "req-a", TokenIDs: []int32{5}, FinishReason: v032.NoFinish, StopToken: -1}}})
	eventually.Within(t, stall, "the token reaches the receiver", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.tokens[0]) == 1
	})
	call.Abort()
	call.Abort()
	end := rec.wait(t)
	if end.Err != nil || end.Choices[0].FinishReason != "abort" {
		t.Fatalf("end %+v", end)
	}
	typ, v := fe.request()
	if typ != v032.TypeAbort || len(v.([]any)) != 1 || v.([]any)[0] != "req-a" {
		t.Fatalf("abort %d %v", typ, v)
	}
	// Late output for the aborted request is dropped, not delivered.
	fe.send(&v032.OutputsMsg{Outputs: []v032.OutputMsg{{RequestID: "req-a", TokenIDs: []int32{6}, FinishReason: v032.NoFinish, StopToken: -1}}})
	rec2 := newRecorder(1)
	if _, err := e.Generate(context.Background(), greedy("req-b", 1), rec2); err != nil {
		t.Fatal(err)
	}
	fe.request()
	fe.send(&v032.OutputsMsg{Outputs: []v032.OutputMsg{{RequestID: "req-b", TokenIDs: []int32{9}, FinishReason: v032.FinishLength, StopToken: -1}}})
	rec2.wait(t)
	if len(rec.tokens[0]) != 1 {
		t.Fatalf("tokens after abort: %v", rec.tokens[0])
	}
}

func TestChoicesAreSubRequests(t *testing.T) {
	f := listen(t, Options{})
	fe, e := attach(t, f, 0)
	rec := newRecorder(3)
	g := greedy("p", 3)
	g.Sampling.Seed, g.Sampling.HasSeed = 40, true
	call, err := e.Generate(context.Background(), g, rec)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 3 {
		_, v := fe.request()
		req := v.([]any)
		ids = append(ids, req[0].(string))
		if field(t, req, 16) != "p" {
			t.Fatalf("external id %v", field(t, req, 16))
		}
		// Each choice samples with its own seed (vLLM: seed + index).
		if sp := req[3].(map[string]any); toInt(sp["seed"]) != int64(40+i) {
			t.Fatalf("choice %d: seed %v", i, sp["seed"])
		}
	}
	if !slices.Equal(ids, []string{"0_p", "1_p", "2_p"}) {
		t.Fatalf("sub-request ids %v", ids)
	}
	fe.send(&v032.OutputsMsg{Outputs: []v032.OutputMsg{
		{RequestID: "0_p", TokenIDs: []int32{1}, FinishReason: v032.FinishLength, StopToken: -1},
		{RequestID: "2_p", TokenIDs: []int32{3}, FinishReason: v032.NoFinish, StopToken: -1},
	}})
	call.(remote.ChoiceAborter).AbortChoice(1)
	typ, v := fe.request()
	if typ != v032.TypeAbort || v.([]any)[0] != "1_p" {
		t.Fatalf("abort %d %v", typ, v)
	}
	fe.send(&v032.OutputsMsg{Outputs: []v032.OutputMsg{{RequestID: "2_p", TokenIDs: []int32{4}, FinishReason: v032.FinishStop, StopToken: -1}}})
	end := rec.wait(t)
	if end.Choices[0].FinishReason != "length" || end.Choices[1].FinishReason != "abort" || end.Choices[2].FinishReason != "stop" {
		t.Fatalf("end %+v", end.Choices)
	}
	if !slices.Equal(rec.tokens[2], []int32{3, 4}) || !slices.Equal(rec.tokens[0], []int32{1}) {
		t.Fatalf("tokens %v", rec.tokens)
	}
}

func TestKilledEngineEndsStreamsAndAttachesAgain(t *testing.T) {
	detached := make(chan error, 1)
	f := listen(t, Options{OnDetach: func(_ *Engine, err error) { detached <- err }})
	fe, e := attach(t, f, 0)
	recs := []*recorder{newRecorder(1), newRecorder(1)}
	for i, r := range recs {
		if _, err := e.Generate(context.Background(), greedy("k"+string(rune('0'+i)), 1), r); err != nil {
			t.Fatal(err)
		}
		fe.request()
	}
	start := time.Now()
	fe.kill()
	for _, r := range recs {
		end := r.wait(t)
		var we *remote.WorkerError
		if !errors.As(end.Err, &we) || !errors.Is(end.Err, ErrEngineDead) || !we.Retryable {
			t.Fatalf("end error %v", end.Err)
		}
	}
	// Each wait above is bounded by stall; how soon is logged, not
	// asserted (a loaded machine may be slow, never wrong).
	t.Logf("streams ended %v after the engine died", time.Since(start))
	select {
	case <-detached:
	case <-time.After(stall):
		t.Fatal("no detach")
	}
	if _, err := e.Generate(context.Background(), greedy("late", 1), newRecorder(1)); err == nil {
		t.Fatal("Generate on a dead engine succeeded")
	}
	fe2, e2 := attach(t, f, 0)
	if e2 == e {
		t.Fatal("the same engine")
	}
	rec := newRecorder(1)
	if _, err := e2.Generate(context.Background(), greedy("again", 1), rec); err != nil {
		t.Fatal(err)
	}
	fe2.request()
	fe2.send(&v032.OutputsMsg{Outputs: []v032.OutputMsg{{RequestID: "again", TokenIDs: []int32{4}, FinishReason: v032.FinishLength, StopToken: -1}}})
	if end := rec.wait(t); end.Err != nil {
		t.Fatal(end.Err)
	}
}

func TestEngineCoreDeadEndsStreams(t *testing.T) {
	f := listen(t, Options{})
	fe, e := attach(t, f, 0)
	rec := newRecorder(1)
	if _, err := e.Generate(context.Background(), greedy("d", 1), rec); err != nil {
		t.Fatal(err)
	}
	fe.request()
	if err := fe.out.WriteMsg([]byte(v032.EngineCoreDead)); err != nil {
		t.Fatal(err)
	}
	end := rec.wait(t)
	if !errors.Is(end.Err, ErrEngineDead) || !strings.Contains(end.Err.Error(), "ENGINE_CORE_DEAD") {
		t.Fatalf("end error %v", end.Err)
	}
}

func TestMalformedOutputIsAnError(t *testing.T) {
	for name, msg := range map[string][][]byte{
		"garbage":        {{0xc1, 0x00}},
		"truncated":      {{0x94, 0x00, 0x91, 0x92, 0xa1}},
		"not an array":   {{0xa3, 'a', 'b', 'c'}},
		"bad aux index":  {append([]byte{0x94, 0x00, 0x91, 0x93, 0xa1, 'd', 0x90, 0x94, 0x93, 0xa3, '<', 'i', '4', 0x92, 0x01, 0x01, 0x07}, 0x93, 0xa3, '<', 'f', '4', 0x92, 0x01, 0x01, 0xc0, 0xc0, 0xc0)},
		"finish reason":  {{0x94, 0x00, 0x91, 0x96, 0xa1, 'd', 0x90, 0xc0, 0xc0, 0xc0, 0x63, 0xc0, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0}},
		"logprobs shape": {{0x94, 0x00, 0x91, 0x93, 0xa1, 'd', 0x90, 0x94, 0x93, 0xa3, '<', 'i', '4', 0x91, 0x02, 0xd6, 0x03, 1, 0, 0, 0, 0xc0, 0xc0, 0xc0}},
	} {
		t.Run(name, func(t *testing.T) {
			f := listen(t, Options{})
			fe, e := attach(t, f, 0)
			rec := newRecorder(1)
			if _, err := e.Generate(context.Background(), greedy("d", 1), rec); err != nil {
				t.Fatal(err)
			}
			fe.request()
			if err := fe.out.WriteMsg(msg...); err != nil {
				t.Fatal(err)
			}
			end := rec.wait(t)
			if !errors.Is(end.Err, v032.ErrMessage) {
				t.Fatalf("end error %v", end.Err)
			}
			select {
			case <-e.Done():
			case <-time.After(stall):
				t.Fatal("the engine was kept")
			}
		})
	}
}

func TestVersionMismatchRefused(t *testing.T) {
	errs := make(chan error, 1)
	f := listen(t, Options{OnError: func(err error) { errs <- err }})
	startFake(t, f.Addr().String(), fakeOpts{version: "0.34.0"})
	select {
	case err := <-errs:
		if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), "0.34.0") || !strings.Contains(err.Error(), "0.32") {
			t.Fatalf("error %v", err)
		}
	case <-time.After(stall):
		t.Fatal("no error")
	}
	if n := len(f.Engines()); n != 0 {
		t.Fatalf("%d engines attached", n)
	}
}

func TestLogprobsInlineAndInFrames(t *testing.T) {
	f := listen(t, Options{})
	fe, e := attach(t, f, 0)
	for _, rows := range []int{1, 40} { // 40 rows x 3 x 4 bytes: extra frames
		rec := newRecorder(1)
		g := greedy("lp", 1)
		g.Sampling.Logprobs, g.Sampling.TopLogprobs = true, 2
		if _, err := e.Generate(context.Background(), g, rec); err != nil {
			t.Fatal(err)
		}
		_, v := fe.request()
		if lp := toInt(v.([]any)[3].(map[string]any)["logprobs"]); lp != 2 {
			t.Fatalf("logprobs %d", lp)
		}
		l := v032.Logprobs{Rows: rows, Cols: 3}
		var toks []int32
		for r := range rows {
			toks = append(toks, int32(100+r))
			l.TokenIDs = append(l.TokenIDs, int32(100+r), int32(200+r), int32(300+r))
			l.Logprobs = append(l.Logprobs, -float32(r), -1-float32(r), -2-float32(r))
			l.Ranks = append(l.Ranks, 1)
		}
		fe.send(&v032.OutputsMsg{Outputs: []v032.OutputMsg{{RequestID: "lp", TokenIDs: toks, Logprobs: l, FinishReason: v032.FinishLength, StopToken: -1}}})
		if end := rec.wait(t); end.Err != nil {
			t.Fatal(end.Err)
		}
		if len(rec.logprobs) != rows || rec.logprobs[rows-1] != -float32(rows-1) || len(rec.top) != rows ||
			rec.top[rows-1][1].TokenID != int32(300+rows-1) || rec.top[rows-1][1].Logprob != -2-float32(rows-1) {
			t.Fatalf("rows %d: logprobs %v top %v", rows, rec.logprobs, rec.top)
		}
	}
}

func TestUtilityCalls(t *testing.T) {
	f := listen(t, Options{})
	fe, e := attach(t, f, 0)
	done := make(chan error, 1)
	go func() {
		ok, err := e.ResetPrefixCache(context.Background(), false, false)
		if err == nil && !ok {
			err = errors.New("reset_prefix_cache answered false")
		}
		done <- err
	}()
	typ, v := fe.request()
	call := v.([]any)
	if typ != v032.TypeUtility || call[2] != "reset_prefix_cache" || len(call[3].([]any)) != 2 || call[3].([]any)[0] != false {
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
	go func() { done <- e.Sleep(context.Background(), 1, "") }()
	_, v = fe.request()
	call = v.([]any)
	if call[2] != "sleep" || toInt(call[3].([]any)[0]) != 1 || call[3].([]any)[1] != "abort" {
		t.Fatalf("sleep %v", call)
	}
	fe.send(&v032.OutputsMsg{Utility: &v032.UtilityOutput{CallID: toInt(call[1]), Failure: []byte("Sleep mode is not enabled")}})
	select {
	case err := <-done:
		if !errors.Is(err, ErrUtility) || !strings.Contains(err.Error(), "Sleep mode") {
			t.Fatalf("sleep error %v", err)
		}
	case <-time.After(stall):
		t.Fatal("no answer")
	}
}

// reentrant is a recorder whose Tokens ends the call the way the remote
// engine does from inside it: a choice (a stop string) or the whole call.
type reentrant struct {
	*recorder
	call  chan remote.Call
	whole bool
}

func (r *reentrant) Tokens(c *remote.Chunk) {
	r.recorder.Tokens(c)
	if c.Choice != 0 {
		return
	}
	call := <-r.call
	if r.whole {
		call.Abort()
	} else {
		call.(remote.ChoiceAborter).AbortChoice(c.Choice)
	}
	r.call <- call
}

// TestAbortFromInsideReceiver: the Receiver may end its call from inside
// Tokens (the remote engine does, on a stop string or a failure): no
// deadlock, End comes once, after Tokens returned, and the engine is told.
func TestAbortFromInsideReceiver(t *testing.T) {
	f := listen(t, Options{})
	fe, e := attach(t, f, 0)
	for _, whole := range []bool{false, true} {
		rec := &reentrant{recorder: newRecorder(2), call: make(chan remote.Call, 1), whole: whole}
		id := "re-" + strconv.FormatBool(whole)
		call, err := e.Generate(context.Background(), greedy(id, 2), rec)
		if err != nil {
			t.Fatal(err)
		}
		rec.call <- call
		fe.request()
		fe.request()
		fe.send(&v032.OutputsMsg{Outputs: []v032.OutputMsg{{RequestID: "0_" + id, TokenIDs: []int32{5}, FinishReason: v032.NoFinish, StopToken: -1}}})
		typ, v := fe.request()
		if typ != v032.TypeAbort || v.([]any)[0] != "0_"+id {
			t.Fatalf("whole=%v: abort %d %v", whole, typ, v)
		}
		if !whole {
			fe.send(&v032.OutputsMsg{Outputs: []v032.OutputMsg{{RequestID: "1_" + id, TokenIDs: []int32{6}, FinishReason: v032.FinishLength, StopToken: -1}}})
		}
		end := rec.wait(t)
		if end.Choices[0].FinishReason != "abort" || !whole && (end.Choices[1].FinishReason != "length" || !slices.Equal(rec.tokens[1], []int32{6})) {
			t.Fatalf("whole=%v: end %+v", whole, end.Choices)
		}
	}
}

// TestRanks: the number of ranks a pinned request may name is the
// launcher's data-parallel size, else an MoE engine's registered one; a
// dense rank registers as size 1 (an independent rank) and says nothing.
func TestRanks(t *testing.T) {
	for _, c := range []struct{ launcher, registered, want int }{
		{0, 1, 0}, {0, 2, 2}, {4, 1, 4}, {1, 1, 1},
	} {
		f := &Frontend{opts: Options{DataParallelSize: c.launcher}}
		e := &Engine{f: f, ready: &v032.ReadyResponse{DataParallelSize: c.registered}}
		if got := e.Ranks(); got != c.want {
			t.Errorf("launcher %d, registered %d: Ranks %d, want %d", c.launcher, c.registered, got, c.want)
		}
	}
}
