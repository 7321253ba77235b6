package sim

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/text"
)

// Engine is the simulated continuous-batching engine. It implements
// engine.Engine; every exported method is safe for concurrent use.
type Engine struct {
	cfg    Config
	vocab  *vocab
	corpus *corpus

	mu      sync.Mutex // guards inbox, aborts and closing
	inbox   []*group
	aborts  []*group
	closing bool
	closed  atomic.Bool // closing, readable without the lock
	wakeCh  chan struct{}
	done    chan struct{}

	waitingN atomic.Int64  // queued requests (new and preempted), for Start's bound and Stats
	entropy  atomic.Uint64 // seeds requests that sample without a seed

	st struct { // published once per pass, read by Stats
		running, kvUsed           atomic.Int64
		prefixQueries, prefixHits atomic.Uint64
		preemptions               atomic.Uint64
		promptTokens, genTokens   atomic.Uint64
	}

	// Loop-only state, owned by the scheduler goroutine.
	kv          *kvCache
	waiting     []*group
	running     []*group
	runningSeqs int
	prefillFree time.Time // when the prefill lane is free
	nextStep    time.Time // when the next decode step is due
	delta       engine.Delta
	start       engine.Start     // AppendStart's argument, reused
	choiceEnd   engine.ChoiceEnd // AppendChoiceEnd's argument, reused
	// hashes holds the block hashes of the prompt being admitted
	// (allocGroup), reused: a request keeps none between admissions.
	hashes []uint64
	bufs   seqBuffers
	// frames is the one step buffer every request's frames are written
	// into, in turn: Sink.Deliver copies what it keeps, so a request needs
	// no buffer of its own between steps (lent as group.buf).
	frames []byte
	// logits and order are the candidates of the decision in progress;
	// extra holds the filler pieces a shaped request adds (nextra of
	// them), see shape.go.
	logits        [maxCand]float64
	order         [maxCand]int
	extra         [len(fillerTexts)]int32
	nextra        int
	tops          [maxCand + 2*engine.MaxTopLogprobs]engine.TopLogprob
	prefixQueries uint64
	prefixHits    uint64
	preemptions   uint64
	promptTokens  uint64
	genTokens     uint64
}

var _ engine.Engine = (*Engine)(nil)

// New builds an engine from cfg (zero sizes take their defaults, see
// Config) and starts its scheduler goroutine. The tokenizer and corpus load
// once per process.
func New(cfg Config) (*Engine, error) {
	e, err := newEngineNoLoop(cfg)
	if err != nil {
		return nil, err
	}
	go e.run()
	cfg = e.cfg
	cfg.Logger.Info("sim engine started",
		zap.Int("max_num_seqs", cfg.MaxNumSeqs),
		zap.Int("max_model_len", cfg.MaxModelLen),
		zap.Int("kv_blocks", e.kv.total()),
		zap.Duration("itl", cfg.ITL),
		zap.Float64("prefill_tps", cfg.PrefillTPS),
		zap.String("mode", cfg.Mode))
	return e, nil
}

// newEngineNoLoop builds the engine without starting its scheduler (tests
// drive passes by hand).
func newEngineNoLoop(cfg Config) (*Engine, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	v, c, err := loadShared()
	if err != nil {
		return nil, err
	}
	e := &Engine{
		cfg:    cfg,
		vocab:  v,
		corpus: c,
		wakeCh: make(chan struct{}, 1),
		done:   make(chan struct{}),
		kv:     newKVCache(cfg.KVCacheTokens / BlockSize),
	}
	e.bufs.init(&e.cfg)
	e.entropy.Store(uint64(time.Now().UnixNano()))
	return e, nil
}

// MaxModelLen returns the context length in tokens.
func (e *Engine) MaxModelLen() int { return e.cfg.MaxModelLen }

// Start admits a prepared request; see engine.Engine. It prepares req itself
// when Prepare was not called.
func (e *Engine) Start(req *engine.Request, sink engine.Sink) (engine.Session, error) {
	if req.Stream && req.Formatter == nil {
		return nil, &engine.Error{Kind: engine.KindInternal, Message: "streamed request without a Formatter"}
	}
	if e.waitingN.Load() >= int64(e.cfg.MaxWaiting) {
		return nil, e.overloaded()
	}
	p, ok := req.Prepared.(*prepared)
	if !ok || p.e != e {
		if err := e.Prepare(req); err != nil {
			return nil, err
		}
		p = req.Prepared.(*prepared)
	}
	g := e.newGroup(req, p, sink)
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		return nil, &engine.Error{Kind: engine.KindClosed, Message: "engine is shut down"}
	}
	if e.waitingN.Load() >= int64(e.cfg.MaxWaiting) {
		e.mu.Unlock()
		return nil, e.overloaded()
	}
	e.waitingN.Add(1)
	e.inbox = append(e.inbox, g)
	e.mu.Unlock()
	e.wake()
	return g, nil
}

func (e *Engine) overloaded() error {
	return &engine.Error{Kind: engine.KindOverloaded,
		Message: "the engine's waiting queue is full (" + strconv.Itoa(e.cfg.MaxWaiting) +
			" requests); retry later, or raise the queue bound or --max-num-seqs"}
}

// newGroup builds the session of req: its choices, their seeds, and any
// output given in advance (tool-call arguments, JSON, echo).
func (e *Engine) newGroup(req *engine.Request, p *prepared, sink engine.Sink) *group {
	now := e.cfg.now()
	n := req.Sampling.Choices()
	g := p.takeGroup(n)
	g.e, g.req, g.prep, g.sink = e, req, p, sink
	g.arrival, g.interval = req.Arrival, max(1, req.StreamInterval)
	if g.arrival.IsZero() || g.arrival.After(now) {
		g.arrival = now
	}
	g.usage.PromptTokens = p.promptLen
	g.live = n
	sp := &req.Sampling
	var counts []int32
	if countsOn(sp) {
		counts = e.newCounts(n)
	}
	for i := range g.seqs {
		s := &g.seqs[i]
		s.g, s.index, s.ctx, s.stopTokenID = g, i, p.ctx, -1
		if counts != nil {
			nc := e.corpus.ncandTok
			s.counts = counts[i*nc : (i+1)*nc : (i+1)*nc]
		}
		s.rng.s = e.seedFor(req, p, i)
		// ids, text and blocks come from the engine's free lists at
		// admission (takeBuffers).
		if sp.Logprobs {
			// Logprobs are kept for the final Result: reserve them up to
			// maxLogprobsReserve tokens at once rather than copying as
			// they grow.
			s.lps = make([]engine.TokenLogprob, 0, min(p.maxTokens, maxLogprobsReserve))
		}
		if p.stops {
			// Without parsers' names NewParser cannot fail.
			s.stop, _ = text.NewParser(text.Options{Stop: sp.Stop, IncludeStop: sp.IncludeStopStr, MinTokens: sp.MinTokens})
			s.stop.Grow(max(e.vocab.strs.maxLen, p.maxStop))
		}
		s.target = naturalLength(&s.rng)
		s.after = phaseAnswer
		switch {
		case p.tool != nil:
			s.after = phaseTool
			s.call = engine.ToolCall{ID: callID(&s.rng), Name: p.tool.Name}
			s.script = e.vocab.encode(string(p.toolSchema.appendValue(nil, e.corpus, &s.rng, 0)))
		case p.respSchema != nil:
			s.script = e.vocab.encode(string(p.respSchema.appendValue(nil, e.corpus, &s.rng, 0)))
		case e.cfg.Mode == ModeEcho && len(p.echo) > 0:
			s.script, s.loop = p.echo, sp.IgnoreEOS || sp.MinTokens > len(p.echo)
		}
		s.phase = s.after
		if req.Reasoning.Enabled {
			s.phase = phaseReason
			s.reasonLeft = reasoningLength(req.Reasoning.Effort, req.Reasoning.BudgetTokens, p.maxTokens, &s.rng)
		}
	}
	return g
}

// groupOne is a group with its one choice, allocated together.
type groupOne struct {
	g   group
	one [1]seq
}

// init points x's group at its one choice and returns the group.
func (x *groupOne) init() *group {
	x.g.seqs = x.one[:]
	return &x.g
}

// makeGroup returns a zero group with n zero choices: one allocation when
// n is 1, the common case.
func makeGroup(n int) *group {
	if n == 1 {
		return (&groupOne{}).init()
	}
	return &group{seqs: make([]seq, n)}
}

// maxLogprobsReserve caps the per-choice logprob entries reserved up front
// (56 bytes each).
const maxLogprobsReserve = 1024

// frameBufSize is the initial capacity of the engine's step buffer: a chat
// completion chunk with one token is about 200-300 bytes.
const frameBufSize = 4096

// seedFor is the seed of choice i. Temperature 0 is greedy: every choice
// follows the prompt's content hash, so identical requests (and all choices
// of one) give identical output. Above 0, a request seed is mixed with the
// engine seed and the choice index; without one, each choice draws a fresh
// seed and output varies from call to call, as with a real engine.
func (e *Engine) seedFor(req *engine.Request, p *prepared, i int) uint64 {
	sp := &req.Sampling
	switch {
	case sp.Temperature <= 0:
		return p.ctx
	case sp.HasSeed:
		return mix(mix(uint64(sp.Seed), uint64(e.cfg.Seed)), uint64(i)+1)
	default:
		return mix(e.entropy.Add(0x9e3779b97f4a7c15), uint64(i)+1)
	}
}

// callID returns a tool call id drawn from r: "call_" and 24 base-62 digits.
func callID(r *rng) string {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	b := make([]byte, 5, 29)
	copy(b, "call_")
	for range 24 {
		b = append(b, digits[r.intn(len(digits))])
	}
	return string(b)
}

// Tokenize returns the o200k_base token ids of text.
func (e *Engine) Tokenize(text string) []int { return e.vocab.encode(text) }

// Detokenize returns the text of ids; unknown ids are skipped.
func (e *Engine) Detokenize(ids []int) string { return string(e.vocab.appendText(nil, ids)) }

// Stats returns the load figures published by the last scheduler pass.
// Lock-free.
func (e *Engine) Stats() engine.Stats {
	used := int(e.st.kvUsed.Load())
	total := e.kv.total()
	return engine.Stats{
		Running:          int(e.st.running.Load()),
		Waiting:          int(max(0, e.waitingN.Load())),
		KVUsage:          float64(used) / float64(total),
		KVBlocksTotal:    total,
		KVBlocksUsed:     used,
		PrefixQueries:    e.st.prefixQueries.Load(),
		PrefixHits:       e.st.prefixHits.Load(),
		Preemptions:      e.st.preemptions.Load(),
		PromptTokens:     e.st.promptTokens.Load(),
		GenerationTokens: e.st.genTokens.Load(),
		Healthy:          !e.isClosing(),
	}
}

func (e *Engine) isClosing() bool { return e.closed.Load() }

// Close aborts every session (each sink gets its final Result with a
// KindAborted error) and stops the scheduler. Idempotent; returns when the
// scheduler has stopped.
func (e *Engine) Close() error {
	e.mu.Lock()
	first := !e.closing
	e.closing = true
	e.closed.Store(true)
	e.mu.Unlock()
	e.wake()
	<-e.done
	if first {
		e.cfg.Logger.Info("sim engine stopped",
			zap.Uint64("prompt_tokens", e.st.promptTokens.Load()),
			zap.Uint64("generation_tokens", e.st.genTokens.Load()),
			zap.Uint64("preemptions", e.st.preemptions.Load()))
	}
	return nil
}
