package llama

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/capi"
	"github.com/vajra-go/vajra/engine/llama/tinymodel"
	"github.com/vajra-go/vajra/internal/eventually"
)

// TestDefaultsGiveEachSequenceAStream: with no sizes given, the KV cache
// holds a whole context per sequence, as llama-server's slots.
func TestDefaultsGiveEachSequenceAStream(t *testing.T) {
	e := newTestEngine(t, Config{}, tinymodel.Config{})
	if e.ctxs[0].Unified() {
		t.Fatalf("unified KV cache with the defaults (kv %d, seqs %d, len %d)", e.cfg.KVCacheTokens, e.cfg.MaxNumSeqs, e.cfg.MaxModelLen)
	}
	if e.cfg.MaxNumSeqs != DefaultMaxNumSeqs || e.ctxs[0].SeqMax() != e.cfg.MaxNumSeqs {
		t.Fatalf("max_num_seqs %d, sequence ids %d", e.cfg.MaxNumSeqs, e.ctxs[0].SeqMax())
	}
	small := newTestEngine(t, Config{Config: engine.Config{MaxNumSeqs: 8, MaxModelLen: 256, KVCacheTokens: 300}}, tinymodel.Config{})
	if !small.ctxs[0].Unified() {
		t.Fatal("a KV cache smaller than max-num-seqs whole contexts is not one unified pool")
	}
}

// TestStreamCopyFromARunningSequence: a request whose prompt extends one
// that is still running starts from a copy of that sequence's stream; its
// greedy output, and the running one's, are those of each run alone.
func TestStreamCopyFromARunningSequence(t *testing.T) {
	long := strings.Repeat("The sea is calm tonight, the tide is full, the moon lies fair upon the straits. ", 4)
	mk := func(content string, n int) *engine.Request {
		r := chatReq(content, n)
		r.Sampling.IgnoreEOS = true
		return r
	}
	alone := newTestEngine(t, Config{PrefixCaching: true}, tinymodel.Config{})
	wantA, _ := run(t, alone, mk(long, 150))
	ref := newTestEngine(t, Config{PrefixCaching: true}, tinymodel.Config{})
	wantB, _ := run(t, ref, mk(long+"And then?", 20))

	e := newTestEngine(t, Config{PrefixCaching: true}, tinymodel.Config{})
	reqA := mk(long, 150)
	if err := e.Prepare(reqA); err != nil {
		t.Fatal(err)
	}
	recA := newRecorder()
	if _, err := e.Start(reqA, recA); err != nil {
		t.Fatal(err)
	}
	// Wait until A's prompt is in its stream (and A decodes).
	eventually.True(t, "request A decodes", func() bool { return e.Stats().GenerationTokens >= 2 })
	gotB, _ := run(t, e, mk(long+"And then?", 20))
	<-recA.done
	gotA := recA.res
	if gotB.Usage.CachedTokens < wantA.Usage.PromptTokens/2 {
		t.Fatalf("B cached %d tokens of %d; A's prompt has %d", gotB.Usage.CachedTokens, gotB.Usage.PromptTokens, wantA.Usage.PromptTokens)
	}
	if gotB.Choices[0].Text != wantB.Choices[0].Text {
		t.Fatalf("B after the copy:\n%q\nalone:\n%q", gotB.Choices[0].Text, wantB.Choices[0].Text)
	}
	if gotA.Choices[0].Text != wantA.Choices[0].Text {
		t.Fatalf("A, copied from while running:\n%q\nalone:\n%q", gotA.Choices[0].Text, wantA.Choices[0].Text)
	}
	if n := e.st.wholeCopies.Load(); n != 0 {
		t.Fatalf("%d copies moved a whole stream: llama.cpp refused the sequence state", n)
	}
}

// gateSink is a recorder whose first step delivery holds the engine's
// goroutine (held closed) until release is closed.
type gateSink struct {
	*recorder
	held, release chan struct{}
	n             int
}

func (s *gateSink) Deliver(frames []byte, final *engine.Result) {
	s.recorder.Deliver(frames, final)
	if s.n++; s.n == 1 && final == nil {
		close(s.held)
		<-s.release
	}
}

// TestSharedPromptComputedOnce: requests arriving together with one
// prompt compute it once; the others wait for it and start from copies,
// and each says greedily what it says alone.
func TestSharedPromptComputedOnce(t *testing.T) {
	long := strings.Repeat("The sea is calm tonight, the tide is full, the moon lies fair upon the straits. ", 3)
	mk := func() *engine.Request {
		r := chatReq(long, 12)
		r.Sampling.IgnoreEOS = true
		return r
	}
	alone := newTestEngine(t, Config{PrefixCaching: true}, tinymodel.Config{})
	want, _ := run(t, alone, mk())

	e := newTestEngine(t, Config{PrefixCaching: true}, tinymodel.Config{})
	// A request of another prompt holds the engine's goroutine in its
	// first delivery while the n requests arrive, so that one admission
	// pass finds them all waiting.
	gate := &gateSink{recorder: newRecorder(), held: make(chan struct{}), release: make(chan struct{})}
	other := chatReq("Something else entirely.", 4)
	other.Stream, other.Formatter = true, gate.recorder
	if err := e.Prepare(other); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(other, gate); err != nil {
		t.Fatal(err)
	}
	<-gate.held
	const n = 6
	recs := make([]*recorder, n)
	for i := range recs {
		req := mk()
		if err := e.Prepare(req); err != nil {
			t.Fatal(err)
		}
		recs[i] = newRecorder()
		if _, err := e.Start(req, recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if w := e.Stats().Waiting; w != n {
		t.Fatalf("%d requests waiting while the engine is held, want %d", w, n)
	}
	close(gate.release)
	for i, r := range recs {
		<-r.done
		if !slices.Equal(r.res.Choices[0].TokenIDs, want.Choices[0].TokenIDs) {
			t.Fatalf("request %d:\n%q\nalone:\n%q", i, r.res.Choices[0].Text, want.Choices[0].Text)
		}
	}
	prompt := want.Usage.PromptTokens
	if got := e.Stats().PromptTokens; got > uint64(prompt+n*minShare) {
		t.Fatalf("%d prompt tokens computed for %d requests of one %d-token prompt", got, n, prompt)
	}
}

// TestGreedyChoicesFromCopiedStreams: the other choices of a request
// continue from copies of the first one's prompt in streams of their own
// (capi's CopyPrefix through llama.cpp's sequence state); greedy, each
// says what the request says alone, token for token.
func TestGreedyChoicesFromCopiedStreams(t *testing.T) {
	e := newTestEngine(t, Config{}, tinymodel.Config{})
	if e.ctxs[0].Unified() {
		t.Fatal("the defaults give one unified pool: no stream to copy to")
	}
	long := strings.Repeat("The sea is calm tonight, the tide is full, the moon lies fair upon the straits. ", 3)
	mk := func(n int) *engine.Request {
		r := chatReq(long, 60)
		r.Sampling.N, r.Sampling.IgnoreEOS = n, true
		return r
	}
	want, _ := run(t, e, mk(1))
	got, _ := run(t, e, mk(3))
	if len(got.Choices) != 3 {
		t.Fatalf("%d choices", len(got.Choices))
	}
	for i, c := range got.Choices {
		if !slices.Equal(c.TokenIDs, want.Choices[0].TokenIDs) {
			t.Fatalf("choice %d from a copied stream:\n%q\nalone:\n%q", i, c.Text, want.Choices[0].Text)
		}
	}
	if n := e.st.wholeCopies.Load(); n != 0 {
		t.Fatalf("%d copies moved a whole stream: llama.cpp refused the sequence state", n)
	}
}

// TestSlotAffinity: a repeated prompt goes back to the idle stream that
// holds it, whichever was used last.
func TestSlotAffinity(t *testing.T) {
	e := newTestEngine(t, Config{PrefixCaching: true}, tinymodel.Config{})
	x := "Tell me about the sea and the ships that sail on it, and the sailors. "
	y := "What do mountains, rivers and valleys have in common, geologically? "
	first := map[string]*engine.Result{}
	for _, p := range []string{x, y} {
		first[p], _ = run(t, e, chatReq(p, 4))
	}
	for _, p := range []string{x, y, x} {
		res, _ := run(t, e, chatReq(p, 4))
		if res.Usage.CachedTokens != res.Usage.PromptTokens-1 {
			t.Fatalf("%q cached %d of %d prompt tokens, want all but the last", p, res.Usage.CachedTokens, res.Usage.PromptTokens)
		}
		if res.Choices[0].Text != first[p].Choices[0].Text {
			t.Fatalf("%q from its kept stream: %q, first run %q", p, res.Choices[0].Text, first[p].Choices[0].Text)
		}
	}
}

// TestThreadTunerReadsTheMachine: the tuner reads the machine's and the
// process's CPU time, and keeps the threads between one and its maximum.
func TestThreadTunerReadsTheMachine(t *testing.T) {
	tt := newThreadTuner(2)
	if tt == nil {
		t.Skip("no /proc")
	}
	defer tt.close()
	b0, ok1 := tt.readBusy()
	m0, ok2 := tt.readSelf()
	if !ok1 || !ok2 || b0 == 0 {
		t.Fatalf("busy %d (%v), self %d (%v)", b0, ok1, m0, ok2)
	}
	now := time.Now()
	if n := tt.check(now); n != 0 {
		t.Fatalf("first check changed the threads to %d", n)
	}
	// Burn CPU until the process's own clock ticks (bounded).
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		if m, _ := tt.readSelf(); m > m0+2 {
			break
		}
	}
	m1, _ := tt.readSelf()
	if m1 <= m0 {
		t.Fatalf("own CPU did not advance: %d then %d", m0, m1)
	}
	for i := 1; i <= 3; i++ {
		n := tt.check(now.Add(time.Duration(i) * 2 * tunePeriod))
		if n < 0 || n > 2 || tt.cur < 1 || tt.cur > 2 {
			t.Fatalf("threads %d (current %d), outside [1, 2]", n, tt.cur)
		}
	}
}

// TestPenaltiesMatchLlamaCpp: Vajra's penalty sampler (the window's
// distinct tokens only) gives llama.cpp's own logits, for a window that
// wraps around, repeated tokens, negative and positive logits.
func TestPenaltiesMatchLlamaCpp(t *testing.T) {
	e := newTestEngine(t, Config{}, tinymodel.Config{})
	n := e.model.VocabSize()
	logits := make([]float32, n)
	for i := range logits {
		logits[i] = float32((i*7919)%200-100) / 10
	}
	var toks []int32
	for i := 0; i < 300; i++ {
		toks = append(toks, int32((i*i+3*i)%(n/3)))
	}
	for _, c := range []struct {
		lastN           int
		rep, freq, pres float32
	}{{64, 1.3, 0, 0}, {64, 1, 0.5, 0.25}, {1000, 1.1, 0.2, 0.7}, {1, 1.5, 1, 1}} {
		ours, theirs, err := capi.PenaltyParity(e.model, c.lastN, c.rep, c.freq, c.pres, toks, logits)
		if err != nil {
			t.Fatal(err)
		}
		changed := 0
		for i := range ours {
			if ours[i] != theirs[i] {
				t.Fatalf("%+v: token %d: %v, llama.cpp %v", c, i, ours[i], theirs[i])
			}
			if ours[i] != logits[i] {
				changed++
			}
		}
		if changed == 0 {
			t.Fatalf("%+v: no logit penalized", c)
		}
	}
}

// TestDrawFollowsSoftmax: the fused draw of temperature-only sampling
// (vLLM's defaults: no top-k, top-p or min-p) draws each token with its
// probability under softmax(logits/T), over a vocabulary the size of a
// real model's, at two temperatures: the count of each group of tokens
// sharing a logit is within 5 standard deviations of its expectation (a
// wrong temperature, an off-by-one in the walk or a broken generator
// moves the counts by far more), and a seed draws the same tokens again.
func TestDrawFollowsSoftmax(t *testing.T) {
	newTestEngine(t, Config{}, tinymodel.Config{}) // loads the libraries
	t.Logf("vectorized softmax: %v", capi.VectorSoftmax())
	const n, draws = 49152, 40000
	logits := make([]float32, n)
	for i := range logits {
		logits[i] = float32((i*7919)%1000) / 100 // 0 to 9.99, scattered
	}
	logits[12345] = 14 // one likely token
	logits[n-1] = 13   // and the last one
	for _, temp := range []float32{1, 0.5} {
		counts := capi.DrawCounts(logits, temp, 42, draws)
		// Tokens of one logit are alike: compare each logit's total (about
		// 1,000 groups, so that 5 standard deviations is a bound no fair
		// draw crosses by chance).
		var z float64
		for _, l := range logits {
			z += math.Exp(float64(l / temp))
		}
		got, members := map[float32]int{}, map[float32]int{}
		total := 0
		for i, c := range counts {
			got[logits[i]] += c
			members[logits[i]]++
			total += c
		}
		for l, c := range got {
			p := float64(members[l]) * math.Exp(float64(l/temp)) / z
			want := p * draws
			if sd := math.Sqrt(want * (1 - p)); math.Abs(float64(c)-want) > 5*sd+1 {
				t.Fatalf("T=%v: the %d tokens of logit %v drawn %d times, want %.1f ± %.1f", temp, members[l], l, c, want, sd)
			}
		}
		if total != draws {
			t.Fatalf("T=%v: %d draws counted, want %d", temp, total, draws)
		}
		if a, b := capi.DrawCounts(logits, temp, 7, 1000), capi.DrawCounts(logits, temp, 7, 1000); !slices.Equal(a, b) {
			t.Fatalf("T=%v: the same seed drew differently", temp)
		}
	}
}

// BenchmarkDraw: one fused draw (temperature only) over a vocabulary of
// 49,152 (SmolLM2's), ggml-cpu's vectorized softmax where it is exported.
func BenchmarkDraw(b *testing.B) {
	newTestEngine(b, Config{}, tinymodel.Config{})
	logits := make([]float32, 49152)
	for i := range logits {
		logits[i] = float32((i*7919)%1000) / 100
	}
	b.ReportAllocs()
	b.ResetTimer()
	capi.DrawCounts(logits, 1, 1, b.N)
}

// TestChunkFollowsTheStepCost: the prefill budget of a step that decodes
// is what fits in max(decode step, minStretch) at the measured time per
// prefill token, never below minChunk.
func TestChunkFollowsTheStepCost(t *testing.T) {
	var s scheduler
	s.chunk = initialChunk
	step := func(decodes, prefill int, dt time.Duration) {
		s.passDecodes, s.passPrefill = decodes, prefill
		s.tuneChunk(dt)
	}
	for i := 0; i < 20; i++ {
		step(24, 0, 40*time.Millisecond) // decode-only steps: 40 ms
	}
	if s.chunk != initialChunk {
		t.Fatalf("chunk %d before any prefill was timed", s.chunk)
	}
	for i := 0; i < 40; i++ {
		step(24, 200, 40*time.Millisecond+200*250*time.Microsecond) // 250 µs per prefill token
	}
	if s.chunk < 150 || s.chunk > 170 { // 40 ms / 250 µs = 160
		t.Fatalf("chunk %d, want about 160 (a 40 ms step may grow by 40 ms)", s.chunk)
	}
	for i := 0; i < 40; i++ {
		step(1, 0, 2*time.Millisecond)
	}
	for i := 0; i < 40; i++ {
		step(1, 100, 2*time.Millisecond+100*250*time.Microsecond)
	}
	if s.chunk < 75 || s.chunk > 85 { // minStretch 20 ms / 250 µs = 80
		t.Fatalf("chunk %d, want about 80 (a 2 ms step may grow by minStretch)", s.chunk)
	}
	for i := 0; i < 40; i++ {
		step(0, 512, 512*10*time.Millisecond) // very slow tokens
	}
	if s.chunk != minChunk {
		t.Fatalf("chunk %d, want the floor %d", s.chunk, minChunk)
	}
}
