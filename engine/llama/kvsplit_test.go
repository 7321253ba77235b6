package llama

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
	"github.com/vajra-go/vajra/internal/eventually"
)

// TestSplitKVLayout: a default KV budget that cannot give each of the
// default sequences a whole context is laid out as short streams and a
// long pool; SmolLM2-135M's (8,192-token context, 22.5 KiB a token) in
// 2 GiB is 64 streams of 1,024 tokens, llama-server's -np 64 -c 65536,
// and a long pool of the rest. Given sizes keep their meaning.
func TestSplitKVLayout(t *testing.T) {
	smol := func(c Config) Config {
		c.budgetTokens = DefaultKVBudget / 23040
		if err := c.normalize(8192, 23040); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := smol(Config{})
	if c.shortLen != 1024 || c.MaxNumSeqs != DefaultMaxNumSeqs || c.MaxModelLen != 8192 {
		t.Fatalf("short streams of %d tokens, %d sequences, context %d", c.shortLen, c.MaxNumSeqs, c.MaxModelLen)
	}
	if long := c.KVCacheTokens - 64*1024; long < 8192 || c.KVCacheTokens > DefaultKVBudget/23040 {
		t.Fatalf("KV cache %d tokens, long pool %d", c.KVCacheTokens, long)
	}
	if c.unified() {
		t.Fatal("short streams reported as one unified pool")
	}
	// --max-num-seqs or --kv-cache-tokens given: the layout they say.
	if c := smol(Config{Config: engine.Config{MaxNumSeqs: 32}}); c.shortLen != 0 || !c.unified() {
		t.Fatalf("--max-num-seqs 32: short streams of %d, unified %v", c.shortLen, c.unified())
	}
	if c := smol(Config{Config: engine.Config{KVCacheTokens: 65536}}); c.shortLen != 0 {
		t.Fatalf("--kv-cache-tokens given: short streams of %d", c.shortLen)
	}
	// A budget whose streams would be shorter than minShortLen is one
	// unified pool, as before.
	small := Config{budgetTokens: 40000}
	if err := small.normalize(8192, 23040); err != nil {
		t.Fatal(err)
	}
	if small.shortLen != 0 || !small.unified() {
		t.Fatalf("a small budget: short streams of %d, unified %v", small.shortLen, small.unified())
	}
}

// splitEngine is an engine on the tiny model (2,048-token context) whose
// default budget of 65,536 tokens is laid out as 64 streams of 768 tokens
// and a long pool of 16,384 (whole contexts would be 32).
func splitEngine(t *testing.T) *Engine {
	e := newTestEngine(t, Config{budgetTokens: 65536}, tinymodel.Config{})
	if len(e.ctxs) != 2 || e.cfg.shortLen != 768 {
		t.Fatalf("%d contexts, short streams of %d tokens", len(e.ctxs), e.cfg.shortLen)
	}
	if s := e.ctxs[0]; s.Unified() || s.SeqMax() != 64 || s.Size()/s.SeqMax() != 768 {
		t.Fatalf("short streams: unified %v, %d ids, %d cells", s.Unified(), s.SeqMax(), s.Size())
	}
	if l := e.ctxs[1]; !l.Unified() || l.Size() < 2048 {
		t.Fatalf("long pool: unified %v, %d cells", l.Unified(), l.Size())
	}
	return e
}

// TestSplitKVAnswersAsWholeContexts: greedy answers are the same whether
// the cache gives each sequence a whole context or short streams and a
// long pool: a short request, one longer than a short stream (the long
// pool), and one with no max_tokens that outgrows its short stream and
// moves to the long pool.
func TestSplitKVAnswersAsWholeContexts(t *testing.T) {
	whole := newTestEngine(t, Config{}, tinymodel.Config{})
	split := splitEngine(t)
	long := strings.Repeat("The sea is calm tonight, the tide is full, the moon lies fair upon the straits. ", 24)
	cases := []struct {
		name    string
		content string
		max     int
		ignore  bool
	}{
		{"short", "Tell me about the sea.", 40, true},
		{"long prompt", long, 40, true},
		{"long output", "Count to a thousand.", 900, true},
		{"no max_tokens", "Write a long story.", 0, false},
	}
	for _, c := range cases {
		mk := func() *engine.Request {
			r := chatReq(c.content, c.max)
			r.Sampling.IgnoreEOS = c.ignore
			return r
		}
		want, _ := run(t, whole, mk())
		got, _ := run(t, split, mk())
		if want.Err != nil || got.Err != nil {
			t.Fatalf("%s: errors %v, %v", c.name, want.Err, got.Err)
		}
		t.Logf("%s: %d prompt tokens, %d generated", c.name, got.Usage.PromptTokens, got.Usage.CompletionTokens)
		if got.Choices[0].Text != want.Choices[0].Text || got.Usage != want.Usage {
			t.Fatalf("%s: split KV gave %d tokens (%+v):\n%q\nwhole contexts %d (%+v):\n%q", c.name,
				got.Usage.CompletionTokens, got.Usage, got.Choices[0].Text, want.Usage.CompletionTokens, want.Usage, want.Choices[0].Text)
		}
	}
	// The one with no max_tokens moved with its KV copied: nothing was
	// recomputed (a move that recomputes counts as a preemption).
	if m, _ := split.KVTransfers(); m != 1 {
		t.Fatalf("%d requests moved to the long pool, want 1 (the one with no max_tokens)", m)
	}
	if m, _ := whole.KVTransfers(); m != 0 || split.Stats().Preemptions != 0 {
		t.Fatalf("moves without short streams, or preemptions (%d): a move recomputed", split.Stats().Preemptions)
	}
	if got, want := split.Stats().PromptTokens, whole.Stats().PromptTokens; got != want {
		t.Fatalf("prompt tokens computed: %d with short streams, %d with whole contexts", got, want)
	}
}

// TestSplitKVRunsManyShortSequences: short requests run together up to
// --max-num-seqs, beyond the whole contexts the same budget would hold,
// while a whole-context prompt still runs beside them; each answers as it
// does alone.
func TestSplitKVRunsManyShortSequences(t *testing.T) {
	e := splitEngine(t)
	const n = 60 // whole contexts of this budget: 32
	mk := func(i int) *engine.Request {
		r := chatReq("Tell me about ship number "+strings.Repeat("nine ", i%7), 120)
		r.Sampling.IgnoreEOS = true
		return r
	}
	alone := map[string]string{}
	for i := 0; i < 7; i++ {
		res, _ := run(t, e, mk(i))
		alone[mk(i).Messages[0].Content] = res.Choices[0].Text
	}
	recs := make([]*recorder, n)
	for i := range recs {
		r := mk(i)
		if err := e.Prepare(r); err != nil {
			t.Fatal(err)
		}
		recs[i] = newRecorder()
		if _, err := e.Start(r, recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	longReq := chatReq(strings.Repeat("A long prompt about the sea and its ships. ", 90), 8)
	longRes := make(chan *engine.Result, 1)
	go func() { r, _ := run(t, e, longReq); longRes <- r }()
	eventually.True(t, "more short sequences running than whole contexts fit", func() bool { return e.Stats().Running > 32 })
	for i, r := range recs {
		<-r.done
		if r.res.Err != nil {
			t.Fatalf("request %d: %v", i, r.res.Err)
		}
		if got, want := r.res.Choices[0].Text, alone[mk(i).Messages[0].Content]; got != want {
			t.Fatalf("request %d among %d:\n%q\nalone:\n%q", i, n, got, want)
		}
	}
	if r := <-longRes; r.Err != nil || r.Usage.PromptTokens <= e.cfg.shortLen || r.Usage.CompletionTokens != 8 {
		t.Fatalf("the long prompt beside them: %+v, err %v", r.Usage, r.Err)
	}
}

// TestSplitKVRoutes: a request runs in the short streams when each
// choice fits one to the end of its max_tokens, or, when its end is not
// known (no ignore_eos), when its tokens so far and its min_tokens fill
// at most half a stream; else in the long pool.
func TestSplitKVRoutes(t *testing.T) {
	e := splitEngine(t)
	long := strings.Repeat("waves ", 500) // over half of a 768-token stream
	cases := []struct {
		name    string
		content string
		max     int
		grown   int // tokens generated so far (a preempted or moved request)
		ignore  bool
		minTok  int
		want    uint
	}{
		{"short", "Hello.", 64, 0, false, 0, 1},
		{"short, ignore_eos", "Hello.", 64, 0, true, 0, 1},
		{"max_tokens past the stream", "Hello.", 760, 0, false, 0, 1},
		{"max_tokens past the stream, ignore_eos", "Hello.", 760, 0, true, 0, 2},
		{"min_tokens past the stream", "Hello.", 900, 0, false, 800, 2},
		{"no max_tokens, short prompt", "Hello.", 0, 0, false, 0, 1},
		{"no max_tokens, long prompt", long, 0, 0, false, 0, 2},
		{"no max_tokens, outgrown", "Hello.", 0, 760, false, 0, 2},
		{"ignore_eos, half generated", "Hello.", 600, 300, true, 0, 1},
	}
	for _, c := range cases {
		r := chatReq(c.content, c.max)
		r.Sampling.IgnoreEOS, r.Sampling.MinTokens = c.ignore, c.minTok
		if err := e.Prepare(r); err != nil {
			t.Fatal(err)
		}
		g, err := e.newGroup(r, r.Prepared.(*prepared), newRecorder())
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < c.grown; i++ {
			g.seqs[0].hist = append(g.seqs[0].hist, 1)
		}
		if got := e.sched.poolsFor(g); got != c.want {
			t.Errorf("%s (prompt %d tokens): pools %b, want %b", c.name, g.promptLen(), got, c.want)
		}
		g.free()
	}
}

// TestOneStream: a sequence's state from a cache of 4 streams, its cells
// in the third, becomes a one-stream cache's state (header kept); states
// of other layouts are refused.
func TestOneStream(t *testing.T) {
	u := func(v ...uint32) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, x)
		}
		return b
	}
	hdr := u(0xaf143cd8, 7)
	cells := u(2, 0, 1, 7, 1, 1, 7, 0xdead, 0xbeef) // 2 cells: metadata, then data
	st := slices.Concat(hdr, u(4, 0, 0), cells, u(0))
	got, ok := oneStream(slices.Clone(st), 4)
	if want := slices.Concat(hdr, u(1), cells); !ok || !bytes.Equal(got, want) {
		t.Fatalf("oneStream: %v %x, want %x", ok, got, want)
	}
	for name, bad := range map[string][]byte{
		"stream count": slices.Concat(hdr, u(3, 0, 0), cells),
		"no cells":     slices.Concat(hdr, u(4, 0, 0, 0, 0)),
		"cells after":  slices.Concat(hdr, u(4, 0, 0), cells, u(5)),
		"short":        slices.Concat(hdr, u(4, 0)),
		"header only":  hdr,
	} {
		if _, ok := oneStream(bad, 4); ok {
			t.Errorf("%s: accepted", name)
		}
	}
}
