// Package testworker is a worker for the gRPC clients' tests: a real
// grpc.Server that implements vLLM's VllmEngine and SGLang's
// SglangScheduler (the generated services of vllmpb and sglangpb) with a
// deterministic generator, records what it received, honours Abort, and
// can refuse or fail streams. It runs in the test's process (Start) or in a
// child process that a test can kill (StartChild, Child), over loopback.
//
// It stands in for workers the tests cannot run here: SGLang has no CPU
// build, and vLLM's needs a large install (engine/remote/vllm's tests run
// against a real `vllm serve --grpc` too, when it is installed).
package testworker

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
)

// Config says how the worker behaves. Safe to change only before Start.
type Config struct {
	// Step is the pause before each generation step (every unfinished
	// choice gets TokensPerChunk tokens per step).
	Step           time.Duration
	TokensPerChunk int // default 1
	// Refuse ends every Generate with this status before any token (0 =
	// serve).
	Refuse codes.Code
	// FailAfter ends a stream with INTERNAL after this many steps (0 =
	// never).
	FailAfter int
	// AbortComplete: after an Abort, send each unfinished choice a
	// complete with finish_reason "abort" before ending the stream
	// (SGLang's way); otherwise just end it (vLLM's).
	AbortComplete bool
	// Tokenizer is what GetTokenizer streams (as a ZIP archive).
	Tokenizer map[string][]byte
	// ContextLength, EOS: GetModelInfo's.
	ContextLength int
	EOS           []int32
	ServedName    string
	// Embedding makes GetModelInfo report an embedding model
	// (is_generation false), as a worker that serves Embed does.
	Embedding bool
	// EmbedRefuse ends every Embed with this status (0 = serve).
	EmbedRefuse codes.Code
	// TokenBase is added to every generated id (Token's): a test whose
	// tokenizer gives low ids to single bytes moves the output onto
	// words with it.
	TokenBase int32
}

// Token is the token the generator gives choice c at step k: 100*(c+1)+k.
func Token(c, k int) int32 { return int32(100*(c+1) + k) }

// Logprob is the generator's logprob of choice c's token at step k; its
// r-th alternative (r = 0 is the token itself) has Logprob(c, k) - r and
// token Token(c, k) + r.
func Logprob(c, k int) float32 { return -float32(k+1)/10 - float32(c)/100 }

// PromptLogprob is the generator's logprob of prompt token i (> 0; the
// first has none); its r-th alternative has PromptLogprob(i) - r.
func PromptLogprob(i int) float32 { return -float32(i) / 2 }

// request is one Generate as the generator runs it, either protocol's.
type request struct {
	id             string
	prompt         []uint32
	n              int
	maxTokens      int
	stop           map[int32]bool
	logprobs       int // -1 none
	promptLogprobs int // -1 none
	// sglang: Abort matches by id prefix, and the choices of an n > 1
	// request run as "{id}-{i}", each of which Abort stops alone, after
	// which the stream waits for the client to end it (as SGLang's
	// servicer, whose multiplexer waits for the stopped choice's output,
	// which its scheduler drops).
	sglang bool
	// choiceAborted has bit i set once choice i was stopped alone.
	choiceAborted atomic.Uint64
}

// Worker is the state both services share.
type Worker struct {
	cfg Config

	running atomic.Int64
	mu      sync.Mutex
	aborts  map[string]chan struct{}
	live    map[string]*request // running requests by id
	aborted []string
	vllm    []any // received requests, by protocol
	sglang  []any
	// steps generated per request id, and the step at which its abort
	// arrived
	steps   map[string]int
	abortAt map[string]int
	// tokens generated per request id and choice
	counts map[string][]int
	// embeds are the request ids of the Embed RPCs received, in order;
	// embedMax the most of them in flight at once
	embeds             []string
	embedNow, embedMax int
}

func newWorker(cfg Config) *Worker {
	if cfg.TokensPerChunk <= 0 {
		cfg.TokensPerChunk = 1
	}
	if cfg.ContextLength == 0 {
		cfg.ContextLength = 4096
	}
	if cfg.ServedName == "" {
		cfg.ServedName = "test-model"
	}
	return &Worker{cfg: cfg, aborts: map[string]chan struct{}{}, live: map[string]*request{}, steps: map[string]int{},
		abortAt: map[string]int{}, counts: map[string][]int{}}
}

// Running is the number of Generate streams the worker is serving.
func (w *Worker) Running() int { return int(w.running.Load()) }

// Aborted returns the request ids the Abort RPC named, in order.
func (w *Worker) Aborted() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.aborted...)
}

// Steps returns how many steps request id ran, and the step at which its
// Abort arrived (-1 when none did).
func (w *Worker) Steps(id string) (steps, abortAt int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a, ok := w.abortAt[id]
	if !ok {
		a = -1
	}
	return w.steps[id], a
}

// Embeds returns the request ids of the Embed RPCs received, in order,
// and the most that were in flight at once.
func (w *Worker) Embeds() (ids []string, maxInFlight int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.embeds...), w.embedMax
}

// embedStart records an Embed RPC; the func it returns records its end.
func (w *Worker) embedStart(id string) func() {
	w.mu.Lock()
	w.embeds = append(w.embeds, id)
	w.embedNow++
	w.embedMax = max(w.embedMax, w.embedNow)
	w.mu.Unlock()
	if w.cfg.Step > 0 {
		time.Sleep(w.cfg.Step) // the worker's compute time, not synchronisation
	}
	return func() {
		w.mu.Lock()
		w.embedNow--
		w.mu.Unlock()
	}
}

// ChoiceTokens returns how many tokens choice c of request id generated.
func (w *Worker) ChoiceTokens(id string, c int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := w.counts[id]; c < len(n) {
		return n[c]
	}
	return 0
}

// abortSGLang is SGLang's Abort: every running request whose id begins
// with id is stopped, and every choice "{rid}-{i}" of an n > 1 request
// that begins with it.
func (w *Worker) abortSGLang(id string) {
	w.mu.Lock()
	var whole []string
	for rid, r := range w.live {
		if strings.HasPrefix(rid, id) {
			whole = append(whole, rid)
			continue
		}
		if r.n > 1 {
			for c := range r.n {
				if strings.HasPrefix(rid+"-"+strconv.Itoa(c), id) {
					r.choiceAborted.Or(1 << c)
				}
			}
		}
	}
	w.aborted = append(w.aborted, id)
	w.mu.Unlock()
	for _, rid := range whole {
		w.abortOne(rid, false)
	}
}

func (w *Worker) abort(id string) { w.abortOne(id, true) }

func (w *Worker) abortOne(id string, record bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if record {
		w.aborted = append(w.aborted, id)
	}
	if _, ok := w.abortAt[id]; !ok {
		w.abortAt[id] = w.steps[id]
	}
	if ch, ok := w.aborts[id]; ok {
		delete(w.aborts, id)
		close(ch)
	}
}

// chunkData is one choice's step.
type chunkData struct {
	choice int
	tokens []int32
	step0  int // the step of tokens[0]
}

// sender sends one protocol's messages.
type sender interface {
	chunk(r *request, d chunkData, first bool) error
	complete(r *request, choice int, last chunkData, reason string, matched int32, completion int) error
}

// generate runs r, sending through out, until every choice finishes, r is
// aborted, or ctx (the stream) ends.
func (w *Worker) generate(ctx context.Context, r *request, out sender) error {
	w.running.Add(1)
	defer w.running.Add(-1)
	abort := make(chan struct{})
	w.mu.Lock()
	w.aborts[r.id] = abort
	w.live[r.id] = r
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		if w.aborts[r.id] == abort {
			delete(w.aborts, r.id)
		}
		if w.live[r.id] == r {
			delete(w.live, r.id)
		}
		w.mu.Unlock()
	}()
	if w.cfg.Refuse != 0 {
		return statusErr(w.cfg.Refuse, "refused by the test worker")
	}
	done := make([]bool, r.n)
	count := make([]int, r.n)
	first := make([]bool, r.n)
	for i := range first {
		first[i] = true
	}
	left := r.n
	var timer *time.Timer
	for step := 0; left > 0; step++ {
		if w.cfg.Step > 0 {
			if timer == nil {
				timer = time.NewTimer(w.cfg.Step)
				defer timer.Stop()
			} else {
				timer.Reset(w.cfg.Step)
			}
			select {
			case <-timer.C:
			case <-abort:
				return w.aborted1(r, out, done, count)
			case <-ctx.Done():
				return ctx.Err()
			}
		} else {
			select {
			case <-abort:
				return w.aborted1(r, out, done, count)
			case <-ctx.Done():
				return ctx.Err()
			default:
			}
		}
		if w.cfg.FailAfter > 0 && step >= w.cfg.FailAfter {
			return statusErr(codes.Internal, "the test worker failed mid-stream")
		}
		stopped := r.choiceAborted.Load()
		for c := 0; c < r.n; c++ {
			if done[c] {
				continue
			}
			if stopped&(1<<c) != 0 {
				// Stopped alone: no more output, no complete.
				done[c] = true
				left--
				continue
			}
			d := chunkData{choice: c, step0: count[c]}
			reason, matched := "", int32(-1)
			for range w.cfg.TokensPerChunk {
				t := w.cfg.TokenBase + Token(c, count[c])
				d.tokens = append(d.tokens, t)
				count[c]++
				if r.stop[t] {
					reason, matched = "stop", t
					break
				}
				if count[c] >= r.maxTokens {
					reason = "length"
					break
				}
			}
			if err := out.chunk(r, d, first[c]); err != nil {
				return err
			}
			first[c] = false
			if reason != "" {
				done[c] = true
				left--
				if err := out.complete(r, c, d, reason, matched, count[c]); err != nil {
					return err
				}
			}
		}
		w.mu.Lock()
		w.steps[r.id] = step + 1
		w.counts[r.id] = append(w.counts[r.id][:0], count...)
		w.mu.Unlock()
	}
	if r.sglang && r.choiceAborted.Load() != 0 {
		// SGLang's stream of an n > 1 request with a choice stopped alone
		// never ends by itself: the client aborts it.
		select {
		case <-abort:
			return w.aborted1(r, out, done, count)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (w *Worker) aborted1(r *request, out sender, done []bool, count []int) error {
	if !w.cfg.AbortComplete {
		return nil
	}
	for c := range done {
		if !done[c] {
			if err := out.complete(r, c, chunkData{choice: c}, "abort", -1, count[c]); err != nil {
				return err
			}
		}
	}
	return nil
}
