package llama

import (
	"sync/atomic"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/capi"
	"github.com/vajra-go/vajra/engine/pipeline"
)

// groupState is where a request is in the scheduler.
type groupState uint8

const (
	stateWaiting groupState = iota // queued, new or preempted
	stateRunning                   // holds sequence ids: prefilling or decoding
	stateDone                      // final Result delivered
)

// group is one request: its N choices (sequences), admitted, preempted and
// finished together. It is the engine.Session handed to the caller. Every
// field but aborting is loop-only after Start.
type group struct {
	e    *Engine
	req  *engine.Request
	prep *prepared
	sink engine.Sink
	seqs []seq

	aborting atomic.Bool

	state groupState
	// pool is the KV pool g runs in; nil while it waits.
	pool     *pool
	admit    time.Time
	admitted bool
	// adapter is the LoRA adapter the request generates with (the index
	// of Engine.adapters plus one; 0: the base model), by its model name.
	adapter int
	// out is the request's output (pipeline.Out): choices, parsers,
	// frames, usage, the Result. Its Broken says the request's own code
	// (its Formatter, its Sink) panicked: the engine calls neither again
	// but to deliver the final Result.
	out pipeline.Out

	// promptLP holds the prompt's logprobs (completions echo), filled as
	// its prefill runs (out keeps it); nil when not asked for.
	promptLP []engine.TokenLogprob
}

// seq is one choice: a llama.cpp sequence id while admitted, its own
// sampler chain (its output is the group's out, choice index).
type seq struct {
	g     *group
	index int
	id    int // llama.cpp sequence id; -1 while not admitted
	// kv is the number of tokens of hist() in the KV cache.
	kv int
	// shadow: a choice (index > 0) of a fresh request that shares choice
	// 0's prompt prefill and samples its first token from the same logits.
	shadow bool
	// first0 is a shadow choice's first token, drawn with choice 0's.
	first0 int32
	drawn  bool // first0 waits to be taken
	// out is this step's batch index whose logits it samples, or -1; at
	// and fed are where its tokens start in the batch and how many.
	out, at, fed int

	sampler *capi.Sampler

	hist []int32 // prompt then the generated tokens: what the KV cache must hold
	// tok is this step's sampled token (when out >= 0).
	tok int32

	// done: the choice ended and its sequence is released.
	done bool
}

// Abort stops the session; see engine.Session. Safe for concurrent use;
// idempotent.
func (g *group) Abort() {
	if g.aborting.Swap(true) {
		return
	}
	e := g.e
	e.mu.Lock()
	e.aborts = append(e.aborts, g)
	e.mu.Unlock()
	e.wake()
}

// newGroup builds the session of req: its choices with their samplers and
// parsers. It runs on the caller's goroutine.
func (e *Engine) newGroup(req *engine.Request, p *prepared, sink engine.Sink) (*group, error) {
	n := req.Sampling.Choices()
	g := &group{e: e, req: req, prep: p, sink: sink, seqs: make([]seq, n)}
	cfg := pipeline.Config{Request: req, Sink: sink, Vocab: vocab{e}, Logger: e.cfg.Logger, Parse: p.parse,
		PromptTokens: len(p.prompt), MaxTokens: p.maxTokens, MaxLen: e.cfg.MaxModelLen, PieceLogprobs: true}
	if p.forced != nil {
		cfg.Forced, cfg.ForcedName = true, p.forced.name
	}
	if err := g.out.Init(&cfg); err != nil {
		return nil, err
	}
	g.adapter = e.adapterIdx[req.Model]
	sp := &req.Sampling
	params := e.samplerParams(sp, p.grammar)
	for i := range g.seqs {
		s := &g.seqs[i]
		s.g, s.index, s.id, s.out = g, i, -1, -1
		params.Seed = e.seedFor(sp, i)
		smp, err := capi.NewSampler(e.model, params)
		if err != nil {
			g.free()
			return nil, invalid("response_format", err.Error())
		}
		s.sampler = smp
		smp.AcceptPrompt(p.prompt)
		s.hist = append(make([]int32, 0, len(p.prompt)+min(p.maxTokens, 256)), p.prompt...)
	}
	if req.PromptLogprobs != 0 {
		g.promptLP = make([]engine.TokenLogprob, len(p.prompt))
		g.out.SetPromptLogprobs(g.promptLP)
	}
	return g, nil
}

// free releases the samplers (C memory). Loop-only once started.
func (g *group) free() {
	for i := range g.seqs {
		if s := g.seqs[i].sampler; s != nil {
			s.Free()
			g.seqs[i].sampler = nil
		}
	}
}

// promptLen is the prompt's token count.
func (g *group) promptLen() int { return len(g.prep.prompt) }
