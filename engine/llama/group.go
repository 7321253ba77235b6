package llama

import (
	"sync/atomic"
	"time"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/llama/capi"
	"github.com/vajra-go/vajra/engine/text"
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

	state    groupState
	arrival  time.Time
	admit    time.Time
	first    time.Time
	admitted bool
	started  bool // AppendStart written
	// broken: the request's own code (its Formatter, its Sink) panicked;
	// the engine calls neither again but to deliver the final Result.
	broken bool
	live   int // choices not finished
	// adapter is the LoRA adapter the request generates with (the index
	// of Engine.adapters plus one; 0: the base model), by its model name.
	adapter  int
	usage    engine.Usage
	buf      []byte // this step's frames
	interval int    // tokens per Delta (StreamInterval, at least 1)

	// promptLP holds the prompt's logprobs (completions echo), filled as
	// its prefill runs; nil when not asked for.
	promptLP []engine.TokenLogprob
	// gaps counts the time between the steps that gave the request a
	// token (its inter-token latencies), for the Result.
	gaps engine.Gaps
}

// seq is one choice: a llama.cpp sequence id while admitted, its own
// sampler chain and output parser.
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
	parser  *text.Parser
	forced  *text.Forced // set when tool_choice forces a call
	events  []text.Event

	gen  []int   // generated tokens
	hist []int32 // prompt then gen: what the KV cache must hold
	lps  []engine.TokenLogprob
	pend int // gen[pend:] not yet delivered in a Delta
	// hold is text kept back for the stream interval, of kind holdKind.
	hold     []byte
	holdKind engine.DeltaKind
	// tok is this step's sampled token (when out >= 0).
	tok int32

	first       bool // a Delta was written
	done        bool
	finish      engine.FinishReason
	stopString  string
	stopTokenID int
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
	now := time.Now()
	n := req.Sampling.Choices()
	g := &group{e: e, req: req, prep: p, sink: sink, seqs: make([]seq, n), live: n,
		arrival: req.Arrival, interval: max(1, req.StreamInterval)}
	if g.arrival.IsZero() || g.arrival.After(now) {
		g.arrival = now
	}
	g.usage.PromptTokens = len(p.prompt)
	g.adapter = e.adapterIdx[req.Model]
	sp := &req.Sampling
	params := e.samplerParams(sp, p.grammar)
	for i := range g.seqs {
		s := &g.seqs[i]
		s.g, s.index, s.id, s.stopTokenID, s.out = g, i, -1, -1, -1
		params.Seed = e.seedFor(sp, i)
		smp, err := capi.NewSampler(e.model, params)
		if err != nil {
			g.free()
			return nil, invalid("response_format", err.Error())
		}
		s.sampler = smp
		smp.AcceptPrompt(p.prompt)
		pr, err := text.NewParser(p.parse)
		if err != nil {
			g.free()
			return nil, &engine.Error{Kind: engine.KindInternal, Message: err.Error()}
		}
		s.parser = pr
		if p.forced != nil {
			s.forced = new(text.Forced)
			s.forced.Reset(p.forced.name, req.Stream)
		}
		s.hist = append(make([]int32, 0, len(p.prompt)+min(p.maxTokens, 256)), p.prompt...)
		if sp.Logprobs {
			s.lps = make([]engine.TokenLogprob, 0, min(p.maxTokens, 1024))
		}
	}
	if req.PromptLogprobs != 0 {
		g.promptLP = make([]engine.TokenLogprob, len(p.prompt))
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
