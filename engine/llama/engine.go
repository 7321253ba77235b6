package llama

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/capi"
	"github.com/vajra-go/vajra/engine/text"
	"github.com/vajra-go/vajra/engine/text/chattemplate"
)

// Engine serves a GGUF model with llama.cpp in process, under Vajra's own
// continuous-batching scheduler. It implements engine.Engine; every
// exported method is safe for concurrent use.
type Engine struct {
	cfg   Config
	model *capi.Model
	// ctxs are the KV pools' contexts (see scheduler): one, or the short
	// streams' and the long pool's.
	ctxs []*capi.Context
	// adapters[i-1] is the LoRA adapter of index i (a group's adapter; 0
	// is the base model), adapterIdx maps served names to indexes. Both
	// read-only after New.
	adapters   []*capi.Adapter
	adapterIdx map[string]int
	tmpl       *chattemplate.Template
	bos        string // the BOS token's text, "" when the model has none
	addBOS     bool

	vocabN int
	// pieces[pieceOff[t]:pieceOff[t+1]] is the text of token t as output
	// (control tokens render as nothing); tokStr the same as strings, for
	// logprobs. Built once at load.
	pieces   []byte
	pieceOff []uint32
	tokStr   string
	eog      []bool
	// kind is each token's text.Token* kind: a control token (which
	// renders as nothing in pieces) or one that is a marker of the
	// configured parsers; ctrl holds those tokens' own text
	// (ctrlText[ctrl[t][0]:ctrl[t][1]]), for the parsers and
	// skip_special_tokens=false.
	kind     []uint8
	ctrl     map[int32][2]uint32
	ctrlText []byte

	mu      sync.Mutex // guards inbox, aborts and closing
	inbox   []*group
	aborts  []*group
	closing bool
	closed  atomic.Bool
	wakeCh  chan struct{}
	done    chan struct{}

	// gate keeps the model and the context alive while a caller is in an
	// entry point that reaches llama.cpp (Prepare, Start, Tokenize): see
	// enter. kvCells is the context's size, read at load so that Stats
	// never calls into C.
	gate    gate
	kvCells int

	waitingN atomic.Int64
	entropy  atomic.Uint64

	st struct { // published once per step, read by Stats
		running, kvUsed           atomic.Int64
		prefixQueries, prefixHits atomic.Uint64
		preemptions, moves        atomic.Uint64
		wholeCopies               atomic.Uint64
		promptTokens, genTokens   atomic.Uint64
		compute                   atomic.Int64
		threads                   atomic.Int64
	}

	sched scheduler // loop-only

	emb embedState // POST /v1/embeddings' own context (embed.go)

	// toolTmpl is the GGUF's tool_use template, for requests with tools
	// (templates.go); nil without one.
	toolTmpl *chattemplate.Template
}

var _ engine.Engine = (*Engine)(nil)
var _ engine.ProcHolder = (*Engine)(nil)

// New loads the llama.cpp libraries (once per process), the model and its
// chat template, makes the KV cache and starts the scheduler goroutine.
func New(cfg Config) (*Engine, error) {
	if cfg.ModelPath == "" {
		return nil, errors.New("llama: no model file")
	}
	if _, err := os.Stat(cfg.ModelPath); err != nil {
		return nil, fmt.Errorf("--model: %w", err)
	}
	dir := cfg.LibDir
	if dir == "" {
		d, err := FindLibDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	if err := capi.Load(dir); err != nil {
		return nil, err
	}
	if _, err := text.NewParser(text.Options{Reasoning: cfg.ReasoningParser, Tools: cfg.ToolCallParser}); err != nil {
		return nil, err
	}
	gpu := cfg.GPULayers
	if !capi.HasGPU() {
		gpu = 0
		if m, _ := filepath.Glob(filepath.Join(dir, "libggml-[cv][uu][dl]*.so")); len(m) > 0 && cfg.Logger != nil {
			cfg.Logger.Warn("the GPU backend of this llama.cpp build did not load (no GPU or driver?): running on the CPU",
				zap.String("llama_lib", dir))
		}
	}
	loadMode, err := cfg.loadMode()
	if err != nil {
		return nil, err
	}
	m, err := capi.LoadModel(cfg.ModelPath, capi.ModelParams{GPULayers: gpu, LoadMode: loadMode})
	if err != nil {
		return nil, err
	}
	if err := cfg.normalize(m.TrainContext(), m.KVBytesPerToken()); err != nil {
		m.Free()
		return nil, err
	}
	ctxs, err := newContexts(m, &cfg)
	if err != nil {
		m.Free()
		return nil, err
	}
	freeCtxs := func() {
		for _, c := range ctxs {
			c.Free()
		}
	}
	adapters, err := loadAdapters(m, cfg.Adapters)
	if err != nil {
		freeCtxs()
		m.Free()
		return nil, err
	}
	e := &Engine{
		cfg:        cfg,
		model:      m,
		ctxs:       ctxs,
		adapters:   adapters,
		adapterIdx: map[string]int{},
		wakeCh:     make(chan struct{}, 1),
		done:       make(chan struct{}),
		addBOS:     m.AddBOS(),
	}
	for i, a := range cfg.Adapters {
		e.adapterIdx[a.Name] = i + 1
	}
	for _, c := range ctxs {
		e.kvCells += c.Size()
	}
	e.gate.init()
	e.loadVocab()
	if err := e.loadTemplate(); err != nil {
		freeCtxs()
		m.Free()
		return nil, err
	}
	e.entropy.Store(uint64(time.Now().UnixNano()) ^ uint64(cfg.Seed))
	e.sched.init(e)
	go e.run()
	cfg.Logger.Info("llama engine started",
		zap.String("model", cfg.ModelPath),
		zap.String("desc", m.Desc()),
		zap.String("llama_cpp", capi.Version()),
		zap.String("llama_lib", dir),
		zap.Strings("devices", capi.Devices()),
		zap.Int("max_model_len", cfg.MaxModelLen),
		zap.Int("max_num_seqs", cfg.MaxNumSeqs),
		zap.Int("max_num_batched_tokens", cfg.MaxNumBatchedTokens),
		zap.Int("kv_cache_tokens", e.kvCells),
		zap.Bool("kv_unified", cfg.unified()),
		zap.Int("kv_short_len", cfg.shortLen),
		zap.Int("threads", cfg.Threads),
		zap.Int("threads_batch", cfg.threadsBatch(cfg.Threads)),
		zap.String("flash_attn", cfg.FlashAttn),
		zap.String("cache_type_k", cfg.CacheTypeK),
		zap.String("cache_type_v", cfg.CacheTypeV),
		zap.Int("load_mode", loadMode),
		zap.Bool("prefix_caching", cfg.PrefixCaching),
		zap.Int("lora_adapters", len(adapters)))
	return e, nil
}

// newContexts makes the KV pools' llama.cpp contexts over m: one (a
// stream per sequence, or a unified pool), or with cfg.shortLen the short
// streams' and the long pool's.
func newContexts(m *capi.Model, cfg *Config) ([]*capi.Context, error) {
	// Checked by normalize: these cannot fail here.
	fa, _ := cfg.flashAttn()
	typeK, _ := cacheType("--cache-type-k", cfg.CacheTypeK)
	typeV, _ := cacheType("--cache-type-v", cfg.CacheTypeV)
	mk := func(tokens, seqs int, unified bool) (*capi.Context, error) {
		// A unified pool has twice the sequence ids: the other half name
		// the finished sequences kept for their prefix. With a stream per
		// sequence those keep their stream (as llama-server's idle slots).
		seqMax := seqs
		if unified {
			seqMax = 2 * seqs
		}
		seqMax = min(capi.MaxParallelSequences(), seqMax)
		if seqMax < seqs {
			return nil, fmt.Errorf("--max-num-seqs %d is more than llama.cpp's %d sequences", seqs, seqMax)
		}
		return capi.NewContext(m, capi.ContextParams{
			Ctx:          tokens,
			Batch:        cfg.MaxNumBatchedTokens,
			UBatch:       min(512, cfg.MaxNumBatchedTokens),
			SeqMax:       seqMax,
			Threads:      cfg.Threads,
			ThreadsBatch: cfg.threadsBatch(cfg.Threads),
			FlashAttn:    fa,
			TypeK:        typeK,
			TypeV:        typeV,
			KVUnified:    unified,
			OffloadKQV:   true,
		})
	}
	if cfg.shortLen == 0 {
		c, err := mk(cfg.KVCacheTokens, cfg.MaxNumSeqs, cfg.unified())
		if err != nil {
			return nil, err
		}
		return []*capi.Context{c}, nil
	}
	short := cfg.MaxNumSeqs * cfg.shortLen
	cs, err := mk(short, cfg.MaxNumSeqs, false)
	if err != nil {
		return nil, err
	}
	cl, err := mk(cfg.KVCacheTokens-short, cfg.MaxNumSeqs, true)
	if err != nil {
		cs.Free()
		return nil, err
	}
	return []*capi.Context{cs, cl}, nil
}

// loadVocab builds the piece table and the end-of-generation set.
func (e *Engine) loadVocab() {
	m := e.model
	n := m.VocabSize()
	e.vocabN = n
	e.pieceOff = make([]uint32, n+1)
	e.eog = make([]bool, n)
	e.kind = make([]uint8, n)
	e.ctrl = make(map[int32][2]uint32)
	markers := text.Markers(e.cfg.ReasoningParser, e.cfg.ToolCallParser)
	buf := make([]byte, 0, n*6)
	for t := 0; t < n; t++ {
		e.pieceOff[t] = uint32(len(buf))
		buf = m.Piece(buf, capi.Token(t), false)
		e.eog[t] = m.IsEOG(capi.Token(t))
		if int(e.pieceOff[t]) == len(buf) {
			// Nothing as output: a control token (or an empty one).
			at := len(e.ctrlText)
			e.ctrlText = m.Piece(e.ctrlText, capi.Token(t), true)
			if len(e.ctrlText) > at {
				e.kind[t] = text.MarkerKind(markers, e.ctrlText[at:])
				e.ctrl[int32(t)] = [2]uint32{uint32(at), uint32(len(e.ctrlText))}
			}
		}
	}
	e.pieceOff[n] = uint32(len(buf))
	e.pieces = buf
	e.tokStr = string(buf)
	if b := m.BOS(); b >= 0 && int(b) < n {
		e.bos = string(m.Piece(nil, b, true))
	}
}

// piece is the output text of token t.
func (e *Engine) piece(t int32) []byte { return e.pieces[e.pieceOff[t]:e.pieceOff[t+1]] }

// tokenString is piece as a string, without allocating.
func (e *Engine) tokenString(t int32) string { return e.tokStr[e.pieceOff[t]:e.pieceOff[t+1]] }

// loadTemplate parses --chat-template (a file or the text) or the model's
// own template; a model without one gets ChatML.
func (e *Engine) loadTemplate() error {
	opts := chattemplate.Options{BOSToken: e.bos}
	if t := e.model.EOS(); t >= 0 && int(t) < e.vocabN {
		opts.EOSToken = string(e.model.Piece(nil, t, true))
	}
	src := e.cfg.ChatTemplate
	if src != "" && !strings.Contains(src, "{") {
		b, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("--chat-template: %w", err)
		}
		src = string(b)
	}
	if src == "" {
		src = e.model.ChatTemplate()
	}
	if src == "" {
		e.tmpl = chattemplate.ChatML(opts)
		return nil
	}
	t, err := chattemplate.Parse(src, opts)
	if err != nil {
		return fmt.Errorf("the chat template does not parse: %w", err)
	}
	e.tmpl = t
	if err := e.loadNamedTemplates(opts); err != nil {
		return fmt.Errorf("the tool_use chat template does not parse: %w", err)
	}
	return nil
}

// MaxModelLen returns the context length in tokens.
func (e *Engine) MaxModelLen() int { return e.cfg.MaxModelLen }

// Tokenize returns the model's token ids of text, with the BOS token when
// the model adds one, special-token text parsed as its token (as vLLM's
// /tokenize with add_special_tokens).
// After Close it returns nil.
func (e *Engine) Tokenize(s string) []int {
	if !e.gate.enter() {
		return nil
	}
	defer e.gate.leave()
	toks, err := e.model.Tokenize(nil, s, true, true)
	if err != nil {
		return nil
	}
	return intsOf(toks)
}

// Detokenize returns the text of ids; ids outside the vocabulary are
// skipped, control tokens render as nothing.
func (e *Engine) Detokenize(ids []int) string {
	var b []byte
	for _, id := range ids {
		if id >= 0 && id < e.vocabN {
			b = append(b, e.piece(int32(id))...)
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func intsOf(toks []int32) []int {
	out := make([]int, len(toks))
	for i, t := range toks {
		out[i] = int(t)
	}
	return out
}

// Stats returns the figures published by the last step. Lock-free, and
// safe after Close (it reads only Go memory).
func (e *Engine) Stats() engine.Stats {
	total := e.kvCells / statBlock
	used := int(e.st.kvUsed.Load()) / statBlock
	return engine.Stats{
		Running:          int(e.st.running.Load()),
		Waiting:          int(max(0, e.waitingN.Load())),
		KVUsage:          float64(used) / float64(max(total, 1)),
		KVBlocksTotal:    total,
		KVBlocksUsed:     min(used, total),
		PrefixQueries:    e.st.prefixQueries.Load(),
		PrefixHits:       e.st.prefixHits.Load(),
		Preemptions:      e.st.preemptions.Load(),
		PromptTokens:     e.st.promptTokens.Load(),
		GenerationTokens: e.st.genTokens.Load(),
		Healthy:          !e.closed.Load(),
	}
}

// HeldProcs is engine.ProcHolder's: one P for the scheduler goroutine.
// It parks on the netpoller while llama.cpp's threads (the decoder's and
// ggml's) fill the cores, and must get a P the moment a decode ends; a P
// kept idle for it means an M waits in the netpoller for that eventfd,
// rather than the goroutine waiting for sysmon to retake one.
func (e *Engine) HeldProcs() int { return 1 }

// ComputeCPU is the CPU time the scheduler's thread spent in llama.cpp so
// far: llama_decode (the forward passes) and the samplers. With --threads
// 1 that is all of the model's work; with more, ggml's worker threads add
// theirs on other threads. Process CPU minus this is the front door's own
// cost: HTTP, sessions, scheduling, detokenizing and framing. Lock-free.
func (e *Engine) ComputeCPU() time.Duration { return time.Duration(e.st.compute.Load()) }

// KVTransfers counts the requests moved with their KV from a short stream
// to the long pool, and the shared prompts copied across streams as a
// whole stream. Lock-free.
func (e *Engine) KVTransfers() (moves, streamCopies uint64) {
	return e.st.moves.Load(), e.st.wholeCopies.Load()
}

// ComputeThreads is llama.cpp's compute threads now: the thread tuner's
// choice, or --threads. Lock-free.
func (e *Engine) ComputeThreads() int { return int(e.st.threads.Load()) }

// statBlock is the number of KV cells reported as one block in Stats, as
// engine/sim's block size.
const statBlock = 16

// Close aborts every session and stops the scheduler, then frees the
// context and the model. It first shuts the gate: a call of Prepare,
// Start or Tokenize made after that fails with KindClosed (Tokenize
// returns nil), and one already inside (a Prepare on a caller's prepare
// pool, a Start building its samplers) is waited for, so nothing reaches
// freed memory. Stats, Detokenize, MaxModelLen and ComputeCPU read Go
// memory only and stay safe. Idempotent; concurrent Closes all return
// once the engine is freed.
func (e *Engine) Close() error {
	e.gate.shut()
	e.mu.Lock()
	first := !e.closing
	e.closing = true
	e.closed.Store(true)
	e.mu.Unlock()
	e.wake()
	<-e.done
	if first {
		for _, c := range e.ctxs {
			c.Free()
		}
		e.emb.close()
		for _, a := range e.adapters {
			a.Free()
		}
		e.model.Free()
		e.cfg.Logger.Info("llama engine stopped",
			zap.Uint64("prompt_tokens", e.st.promptTokens.Load()),
			zap.Uint64("generation_tokens", e.st.genTokens.Load()),
			zap.Uint64("preemptions", e.st.preemptions.Load()),
			zap.Uint64("moved_to_long_pool", e.st.moves.Load()),
			zap.Uint64("whole_stream_copies", e.st.wholeCopies.Load()))
	}
	return nil
}

// loadAdapters loads the LoRA adapters of cfg for m, freeing those loaded
// when one fails.
func loadAdapters(m *capi.Model, cfg []Adapter) ([]*capi.Adapter, error) {
	var out []*capi.Adapter
	for _, a := range cfg {
		ad, err := capi.LoadAdapter(m, a.Path)
		if err == nil && ad.Meta("adapter.type") != "lora" {
			ad.Free()
			err = fmt.Errorf("%s is not a LoRA adapter (adapter.type %q)", a.Path, ad.Meta("adapter.type"))
		}
		if err != nil {
			for _, o := range out {
				o.Free()
			}
			return nil, fmt.Errorf("--lora %s: %w", a.Name, err)
		}
		out = append(out, ad)
	}
	return out, nil
}

// AdapterNames returns the served model names of the LoRA adapters, in
// Config.Adapters' order. Safe for concurrent use.
func (e *Engine) AdapterNames() []string {
	names := make([]string, len(e.cfg.Adapters))
	for i, a := range e.cfg.Adapters {
		names[i] = a.Name
	}
	return names
}

func (e *Engine) wake() {
	select {
	case e.wakeCh <- struct{}{}:
	default:
	}
}

// Start admits a prepared request; see engine.Engine.
func (e *Engine) Start(req *engine.Request, sink engine.Sink) (engine.Session, error) {
	if !e.gate.enter() {
		return nil, errClosed()
	}
	defer e.gate.leave()
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
	g, err := e.newGroup(req, p, sink)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		g.free()
		return nil, errClosed()
	}
	e.waitingN.Add(1)
	e.inbox = append(e.inbox, g)
	e.mu.Unlock()
	e.wake()
	return g, nil
}

func errClosed() error {
	return &engine.Error{Kind: engine.KindClosed, Message: "engine is shut down"}
}

// gate counts the callers inside the engine's entry points; Close shuts it
// and waits for the count to reach zero before it frees the C memory. One
// atomic add on the way in and one on the way out, per request (never per
// token): no lock on any path.
type gate struct {
	// n is the number of callers inside, plus gateShut once shut.
	n       atomic.Int64
	drained chan struct{} // closed once shut and empty
	once    atomic.Bool   // drained is closed
}

const gateShut = 1 << 40

func (g *gate) init() { g.drained = make(chan struct{}) }

// enter admits a caller, or reports false once the gate is shut. A caller
// admitted must call leave.
func (g *gate) enter() bool {
	if g.n.Add(1) >= gateShut {
		g.leave()
		return false
	}
	return true
}

// leave lets a caller out; the last one out of a shut gate wakes shut.
func (g *gate) leave() {
	if g.n.Add(-1) == gateShut {
		g.drain()
	}
}

func (g *gate) drain() {
	if g.once.CompareAndSwap(false, true) {
		close(g.drained)
	}
}

// shut refuses every later enter and waits for the callers inside to
// leave. Safe to call more than once, and concurrently.
func (g *gate) shut() {
	for {
		n := g.n.Load()
		if n >= gateShut {
			break
		}
		if g.n.CompareAndSwap(n, n+gateShut) {
			if n == 0 {
				g.drain()
			}
			break
		}
	}
	<-g.drained
}

func (e *Engine) overloaded() error {
	return &engine.Error{Kind: engine.KindOverloaded,
		Message: "the engine's waiting queue is full (" + strconv.Itoa(e.cfg.MaxWaiting) + " requests); retry later"}
}

// seedFor is choice i's sampling seed: the request's seed mixed with the
// choice index, or a fresh one.
func (e *Engine) seedFor(sp *engine.Sampling, i int) uint32 {
	if sp.HasSeed {
		return uint32(mix(uint64(sp.Seed), uint64(i)+1))
	}
	return uint32(mix(e.entropy.Add(0x9e3779b97f4a7c15), uint64(i)+1))
}

// mix is splitmix64's finalizer over a ^ b.
func mix(a, b uint64) uint64 {
	z := a ^ (b + 0x9e3779b97f4a7c15 + (a << 6) + (a >> 2))
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
