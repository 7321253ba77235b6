package remote

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/text"
	"github.com/vajra-go/vajra/engine/text/chattemplate"
	"github.com/vajra-go/vajra/engine/tokenizer"
)

// Defaults of Config.
const (
	// DefaultFirstTokenTimeout ends a request whose worker sent no token
	// for this long after it was sent (a long prefill on a CPU takes
	// seconds, a stalled worker forever).
	DefaultFirstTokenTimeout = 120 * time.Second
	// DefaultInterTokenTimeout ends a request whose worker sent nothing
	// for this long between two tokens.
	DefaultInterTokenTimeout = 30 * time.Second
	// DefaultHealthInterval is how often a healthy worker is asked for its
	// health and load.
	DefaultHealthInterval = time.Second
	// MaxN caps Sampling.N.
	MaxN = 16
	// MaxStopStrings caps the stop strings of one request.
	MaxStopStrings = 16
	// backoffMin and backoffMax bound the wait between health probes of a
	// worker that is down: doubling from 50 ms to 2 s, so a restarted
	// worker is back within 2 s and a dead one costs a probe per 2 s.
	backoffMin = 50 * time.Millisecond
	backoffMax = 2 * time.Second
)

// Config configures the remote engine.
type Config struct {
	// Workers are the workers' URLs (--worker), scheme://host:port; the
	// scheme names the protocol (see Register).
	Workers []string
	// Dial is passed to every protocol client.
	Dial DialOptions
	// Tokenizer, when set, tokenizes and detokenizes; else TokenizerPath
	// (--tokenizer: a tokenizer.json, a model folder or a GGUF file) is
	// loaded; else the first worker that answers provides one: its
	// tokenizer files through TokenizerFromFiles (vLLM's and SGLang's
	// GetTokenizer), or its own (TokenizerSource: llama-server, whose
	// prompts are then encoded on any healthy worker of the same
	// vocabulary, so that the first may go down).
	Tokenizer     Tokenizer
	TokenizerPath string
	// TokenizerFromFiles builds a Tokenizer from the files a worker sends
	// (Client.TokenizerFiles); nil: the package's TokenizerFromFiles
	// (engine/tokenizer).
	TokenizerFromFiles func(files map[string][]byte) (Tokenizer, error)
	// GenerationConfig is vLLM's --generation-config: "" or "auto" takes
	// the sampling parameters of the model's generation_config.json (the
	// tokenizer's: beside --tokenizer, or among the worker's files) as the
	// defaults of the requests that leave them out, as vLLM's and SGLang's
	// front ends do; "vllm" takes none; anything else is a folder holding
	// the generation_config.json to take them from.
	GenerationConfig string
	// Config is what every engine shares. Here ChatTemplate overrides
	// the tokenizer's (or the worker's) chat template; MaxModelLen caps
	// the context length (0: the worker's); ReasoningParser and
	// ToolCallParser parse the model's text, as the engine detokenizes it
	// itself. MaxNumSeqs, KVCacheTokens and Seed are each worker's own
	// (its flags): New refuses them (engine.ErrUnsupportedSetting).
	engine.Config
	// FirstTokenTimeout and InterTokenTimeout end a stream whose worker
	// stalls, with an error, and abort it on the worker (0: the defaults;
	// negative: never).
	FirstTokenTimeout time.Duration
	InterTokenTimeout time.Duration
	// HealthInterval is how often a healthy worker is probed (0: default).
	HealthInterval time.Duration
	// Picker chooses the worker of each request (nil: LeastLoaded); a
	// Router (engine/route) also gets each request's outcome and decides
	// its retries.
	Picker Picker
	// Logger gets worker state changes (never per token); nil: none.
	Logger *zap.Logger
}

// Engine is an engine.Engine over remote workers. Every exported method is
// safe for concurrent use.
type Engine struct {
	cfg    Config
	log    *zap.Logger
	wsp    atomic.Pointer[[]*Worker] // the workers: replaced whole by SetWorkers
	wsMu   sync.Mutex                // serializes SetWorkers and the pools' members joining and leaving
	pools  map[string]Pool           // by configured URL; guarded by wsMu
	pooled atomic.Int32              // len(pools), read without wsMu (ranks)
	picker Picker
	router Router // picker, when it is one

	model     atomic.Pointer[model]
	modelOnce sync.Mutex // serializes loading the model state

	running atomic.Int64
	// gonePrefix sums the prefix cache counters of the pool members that
	// left (Load.PrefixQueries, PrefixHits), so that Stats' stay monotonic.
	goneQueries, goneHits atomic.Uint64
	promptN               atomic.Uint64
	genN                  atomic.Uint64
	callSeq               atomic.Uint64
	closed                atomic.Bool
	done                  chan struct{}
	wg                    sync.WaitGroup
	liveMu                sync.Mutex // guards live: per request, never per token
	live                  map[*request]struct{}
	sweepDur              time.Duration
}

var _ engine.Engine = (*Engine)(nil)

// model is what the engine knows of the model its workers serve, loaded
// from the first worker that answers (or from the configuration).
type model struct {
	tok  Tokenizer
	tmpl *chattemplate.Template
	// toolTmpl is the tokenizer's "tool_use" template, for requests with
	// tools, as transformers picks it; nil when none.
	toolTmpl *chattemplate.Template
	bosText  string
	maxLen   int
	vocab    int
	eos      []bool // by id: ends generation (the worker's EOS ids)
	// eosIDs lists the ids of eos: the tokenizer's EOS first, then
	// generation_config's and the worker's (Generate.EOSTokenIDs).
	eosIDs         []int32
	name           string
	defaults       engine.SamplingDefaults // the model's (Config.GenerationConfig)
	promptLogprobs bool
	supports       engine.Capability
	// kind is each id's text.Token* kind: ordinary text, special, or a
	// special token that is a marker of the configured parsers.
	kind []uint8
}

// New dials every worker and starts probing them. A worker that is down
// is not an error: the engine starts, reports itself unhealthy and
// refuses requests (KindClosed: 503) until one is up. It waits for a
// first answer of each worker for at most the dial's connect timeout.
func New(cfg Config) (*Engine, error) {
	if len(cfg.Workers) == 0 {
		return nil, errors.New("remote: no worker")
	}
	if err := cfg.Config.Check(); err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	if err := cfg.Config.Unsupported("a remote worker engine", "each worker schedules, caches and seeds itself: give the worker the setting",
		"max-num-seqs", "kv-cache-tokens", "seed"); err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	if _, err := text.NewParser(text.Options{Reasoning: cfg.ReasoningParser, Tools: cfg.ToolCallParser}); err != nil {
		return nil, err
	}
	if cfg.FirstTokenTimeout == 0 {
		cfg.FirstTokenTimeout = DefaultFirstTokenTimeout
	}
	if cfg.InterTokenTimeout == 0 {
		cfg.InterTokenTimeout = DefaultInterTokenTimeout
	}
	if cfg.HealthInterval <= 0 {
		cfg.HealthInterval = DefaultHealthInterval
	}
	if cfg.Dial.ConnectTimeout <= 0 {
		cfg.Dial.ConnectTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	switch g := cfg.GenerationConfig; g {
	case "", "auto", "vllm":
	default:
		if st, err := os.Stat(g); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("--generation-config %q: not auto, vllm or a folder", g)
		}
	}
	if cfg.Tokenizer == nil && cfg.TokenizerPath != "" {
		t, err := LoadTokenizer(cfg.TokenizerPath)
		if err != nil {
			return nil, fmt.Errorf("--tokenizer: %w", err)
		}
		cfg.Tokenizer = t
	}
	if cfg.TokenizerFromFiles == nil {
		cfg.TokenizerFromFiles = TokenizerFromFiles
	}
	e := &Engine{cfg: cfg, log: cfg.Logger, picker: cfg.Picker, done: make(chan struct{}), live: map[*request]struct{}{}}
	if e.picker == nil {
		e.picker = &LeastLoaded{}
	}
	e.router, _ = e.picker.(Router)
	var ws []*Worker
	e.pools = map[string]Pool{}
	for _, u := range cfg.Workers {
		if _, dup := e.pools[u]; dup {
			continue
		}
		c, p, err := open(u, cfg.Dial)
		if err != nil {
			for _, w := range ws {
				_ = w.client.Close()
			}
			closePools(slices.Collect(maps.Values(e.pools)))
			return nil, err
		}
		if p != nil {
			e.pools[u] = p
			if cfg.Tokenizer == nil && cfg.TokenizerPath == "" {
				closePools(slices.Collect(maps.Values(e.pools)))
				for _, w := range ws {
					_ = w.client.Close()
				}
				return nil, fmt.Errorf("remote: worker %s: its engines have no tokenizer: give --tokenizer MODEL_DIR (the model's folder)", u)
			}
			continue
		}
		ws = append(ws, newWorker(u, c))
	}
	e.wsp.Store(&ws)
	e.pooled.Store(int32(len(e.pools)))
	// One probe of every worker, in parallel, before serving.
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() { defer wg.Done(); e.probe(w) }()
	}
	wg.Wait()
	for _, w := range ws {
		e.wg.Add(1)
		go e.watch(w)
	}
	for u, p := range e.pools {
		e.watchPool(u, p)
	}
	e.sweepDur = sweepInterval(cfg.FirstTokenTimeout, cfg.InterTokenTimeout)
	if e.sweepDur > 0 {
		e.wg.Add(1)
		go e.sweep()
	}
	return e, nil
}

func (e *Engine) closeClients() {
	for _, w := range e.list() {
		_ = w.client.Close()
	}
}

// ModelName is the name the workers serve their model under (the worker's
// served name, else its model file's base name), "" until one answered.
func (e *Engine) ModelName() string {
	if m := e.model.Load(); m != nil {
		return m.name
	}
	e.wsMu.Lock()
	pools := len(e.pools)
	e.wsMu.Unlock()
	if pools > 0 && pools == len(e.cfg.Workers) {
		// Workers that attach name no model (loadModel): --tokenizer's.
		return e.cfg.TokenizerPath
	}
	return ""
}

// MaxModelLen is the context length in tokens (0 until a worker answered
// and none was configured).
func (e *Engine) MaxModelLen() int {
	if m := e.model.Load(); m != nil {
		return m.maxLen
	}
	return e.cfg.MaxModelLen
}

// Workers returns the engine's workers (for a routing layer's figures):
// the current configuration's, and those removed from it still draining.
// The slice is shared: read only.
func (e *Engine) Workers() []*Worker { return e.list() }

func (e *Engine) list() []*Worker { return *e.wsp.Load() }

// loadModel builds the model state from worker w's Info, once.
func (e *Engine) loadModel(ctx context.Context, w *Worker, info *Info) error {
	e.modelOnce.Lock()
	defer e.modelOnce.Unlock()
	if e.model.Load() != nil {
		return nil
	}
	m := &model{maxLen: info.MaxContextLength, promptLogprobs: info.PromptLogprobs, supports: info.Supports}
	if e.cfg.MaxModelLen > 0 && (m.maxLen == 0 || e.cfg.MaxModelLen < m.maxLen) {
		m.maxLen = e.cfg.MaxModelLen
	}
	if m.maxLen <= 0 {
		return errors.New("the worker reports no context length; set --max-model-len")
	}
	m.name = info.ServedModelName
	if m.name == "" && info.ModelPath == "" {
		// A worker that does not say (vLLM's engine core): the model as
		// --tokenizer names it, as vLLM serves its model under the name
		// it was given by.
		m.name = e.cfg.TokenizerPath
	}
	if m.name == "" && info.ModelPath != "" {
		b := info.ModelPath
		if i := strings.LastIndexByte(b, '/'); i >= 0 {
			b = b[i+1:]
		}
		m.name = strings.TrimSuffix(b, ".gguf")
	}
	tok := e.cfg.Tokenizer
	if tok == nil {
		switch src, ok := w.client.(TokenizerSource); {
		case ok:
			t, err := src.WorkerTokenizer(ctx)
			if err != nil {
				return fmt.Errorf("the worker's tokenizer: %w", err)
			}
			tok = &anyWorkerTok{Tokenizer: t, e: e, from: w}
		case e.cfg.TokenizerFromFiles != nil:
			files, err := w.client.TokenizerFiles(ctx)
			if err != nil {
				return fmt.Errorf("the worker's tokenizer files: %w", err)
			}
			t, err := e.cfg.TokenizerFromFiles(files)
			if err != nil {
				return fmt.Errorf("the worker's tokenizer files: %w", err)
			}
			tok = t
		default:
			return errors.New("no tokenizer: give --tokenizer (the worker sends none)")
		}
	}
	m.tok = tok
	d, err := e.generationDefaults(tok)
	if err != nil {
		return err
	}
	m.defaults = d
	m.vocab = tok.VocabSize()
	if info.VocabSize > m.vocab {
		m.vocab = info.VocabSize
	}
	m.eos = make([]bool, m.vocab)
	eos := []int32{tok.EOS()}
	if t, ok := tok.(interface{ EOSIDs() []int32 }); ok {
		eos = append(eos, t.EOSIDs()...)
	}
	eos = append(eos, info.EOSTokenIDs...)
	for _, id := range eos {
		if id >= 0 && int(id) < m.vocab && !m.eos[id] {
			m.eos[id] = true
			m.eosIDs = append(m.eosIDs, id)
		}
	}
	m.kind = tokenKinds(tok, m.vocab, text.Markers(e.cfg.ReasoningParser, e.cfg.ToolCallParser))
	opts := chattemplate.Options{}
	if id := tok.BOS(); id >= 0 {
		m.bosText = string(tok.AppendPiece(nil, id))
		opts.BOSToken = m.bosText
	}
	if id := tok.EOS(); id >= 0 {
		opts.EOSToken = string(tok.AppendPiece(nil, id))
	}
	src, err := templateSource(e.cfg.ChatTemplate)
	if err != nil {
		return err
	}
	if src == "" {
		src = tok.ChatTemplate()
	}
	if src == "" {
		src = info.ChatTemplate
	}
	if src == "" {
		m.tmpl = chattemplate.ChatML(opts)
	} else if m.tmpl, err = chattemplate.Parse(src, opts); err != nil {
		return fmt.Errorf("the chat template does not parse: %w", err)
	}
	if t, ok := tok.(interface{ toolTemplate() string }); ok && e.cfg.ChatTemplate == "" {
		if ts := t.toolTemplate(); ts != "" {
			if m.toolTmpl, err = chattemplate.Parse(ts, opts); err != nil {
				return fmt.Errorf("the tool_use chat template does not parse: %w", err)
			}
		}
	}
	e.model.Store(m)
	e.log.Info("remote model ready", zap.String("worker", w.url), zap.String("model", m.name),
		zap.Int("max_model_len", m.maxLen), zap.Int("vocab", m.vocab))
	return nil
}

// Stats sums the workers' figures. Lock-free.
func (e *Engine) Stats() engine.Stats {
	st := engine.Stats{
		Running:          int(e.running.Load()),
		PromptTokens:     e.promptN.Load(),
		GenerationTokens: e.genN.Load(),
	}
	var kv float64
	n := 0
	st.PrefixQueries, st.PrefixHits = e.goneQueries.Load(), e.goneHits.Load()
	for _, w := range e.list() {
		if l := w.load.Load(); l != nil && (w.pool == "" || !w.draining.Load()) {
			// A pool member that left is counted in gone*.
			st.PrefixQueries += l.PrefixQueries
			st.PrefixHits += l.PrefixHits
		}
		if !w.healthy.Load() || w.draining.Load() {
			continue
		}
		st.Healthy = true
		if l := w.load.Load(); l != nil {
			st.Waiting += l.Waiting
			kv += l.KVUsage
			n++
		}
	}
	if n > 0 {
		st.KVUsage = kv / float64(n)
	}
	st.Healthy = st.Healthy && e.model.Load() != nil && !e.closed.Load()
	return st
}

// Tokenize returns the ids of s with the BOS token when the model adds one,
// special-token text parsed as its token; nil before a worker answered.
func (e *Engine) Tokenize(s string) []int {
	m := e.model.Load()
	if m == nil {
		return nil
	}
	ids, err := m.encode(nil, s, m.tok.AddBOS())
	if err != nil {
		return nil
	}
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// tokenKinds classifies the ids of tok (n of them): text, special, or a
// special token whose text is one of markers.
func tokenKinds(tok Tokenizer, n int, markers []text.Marker) []uint8 {
	kind := make([]uint8, n)
	var buf []byte
	for id := range n {
		if !tok.IsSpecial(int32(id)) {
			continue
		}
		buf = tok.AppendPiece(buf[:0], int32(id))
		kind[id] = text.MarkerKind(markers, buf)
	}
	return kind
}

// Detokenize returns the text of ids (special tokens as nothing).
func (e *Engine) Detokenize(ids []int) string {
	m := e.model.Load()
	if m == nil {
		return ""
	}
	var b []byte
	for _, id := range ids {
		if id >= 0 && id < m.vocab && !m.tok.IsSpecial(int32(id)) {
			b = m.tok.AppendPiece(b, int32(id))
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// encode tokenizes s, with BOS first when bos is set. It fails only with
// a tokenizer that asks a worker (llama-server's /tokenize).
func (m *model) encode(dst []int32, s string, bos bool) ([]int32, error) {
	if bos {
		if id := m.tok.BOS(); id >= 0 {
			dst = append(dst, id)
		}
	}
	if te, ok := m.tok.(interface {
		EncodeErr(dst []int32, text string) ([]int32, error)
	}); ok {
		return te.EncodeErr(dst, s)
	}
	return m.tok.Encode(dst, s), nil
}

// Close aborts every request, stops probing and closes the clients.
// Idempotent.
func (e *Engine) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	e.wsMu.Lock() // a SetWorkers under way has started its probers
	pools := slices.Collect(maps.Values(e.pools))
	e.pools = map[string]Pool{}
	e.pooled.Store(0)
	e.wsMu.Unlock()
	closePools(pools)
	close(e.done)
	e.liveMu.Lock()
	live := make([]*request, 0, len(e.live))
	for r := range e.live {
		live = append(live, r)
	}
	e.liveMu.Unlock()
	for _, r := range live {
		r.shutdown()
	}
	e.closeClients()
	e.wg.Wait()
	return nil
}

func sweepInterval(first, inter time.Duration) time.Duration {
	d := time.Duration(0)
	for _, t := range []time.Duration{first, inter} {
		if t > 0 && (d == 0 || t < d) {
			d = t
		}
	}
	if d == 0 {
		return 0
	}
	// A stall is noticed within a quarter of the timeout past it.
	return min(max(d/4, 5*time.Millisecond), time.Second)
}

// sweep ends the requests whose worker stalled: one pass over the live
// requests per sweep interval, reading two atomics each.
func (e *Engine) sweep() {
	defer e.wg.Done()
	t := time.NewTicker(e.sweepDur)
	defer t.Stop()
	var stalled []*request
	for {
		select {
		case <-e.done:
			return
		case <-t.C:
		}
		now := time.Now().UnixNano()
		stalled = stalled[:0]
		e.liveMu.Lock()
		for r := range e.live {
			if r.stalled(now, e.cfg.FirstTokenTimeout, e.cfg.InterTokenTimeout) {
				stalled = append(stalled, r)
			}
		}
		e.liveMu.Unlock()
		for _, r := range stalled {
			r.timeout()
		}
	}
}

func (e *Engine) track(r *request) {
	e.liveMu.Lock()
	e.live[r] = struct{}{}
	e.liveMu.Unlock()
}

func (e *Engine) untrack(r *request) {
	e.liveMu.Lock()
	delete(e.live, r)
	e.liveMu.Unlock()
}

// generationDefaults are the requests' sampling defaults that
// Config.GenerationConfig names.
func (e *Engine) generationDefaults(tok Tokenizer) (engine.SamplingDefaults, error) {
	switch g := e.cfg.GenerationConfig; g {
	case "vllm":
		return engine.SamplingDefaults{}, nil
	case "", "auto":
		if t, ok := tok.(interface{ GenerationSampling() map[string]float64 }); ok {
			return engine.SamplingDefaultsFrom(t.GenerationSampling()), nil
		}
		return engine.SamplingDefaults{}, nil
	default:
		b, err := os.ReadFile(filepath.Join(g, tokenizer.FileGenerationConfig))
		if errors.Is(err, os.ErrNotExist) {
			if st, serr := os.Stat(g); serr == nil && st.IsDir() {
				return engine.SamplingDefaults{}, nil // a model without one, as vLLM takes it
			}
		}
		if err != nil {
			return engine.SamplingDefaults{}, fmt.Errorf("--generation-config: %w", err)
		}
		s, err := tokenizer.GenerationSampling(b)
		if err != nil {
			return engine.SamplingDefaults{}, fmt.Errorf("--generation-config: %w", err)
		}
		return engine.SamplingDefaultsFrom(s), nil
	}
}
