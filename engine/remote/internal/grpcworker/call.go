package grpcworker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/vajra-go/vajra/engine/remote"
)

// Stream names one protocol's Generate RPC.
type Stream struct {
	Method string // "/vllm.grpc.engine.VllmEngine/Generate"
	Fields *Fields
	// Abort sends the protocol's Abort RPC for the request id.
	Abort func(ctx context.Context, id string) error
	// ChoiceID is the id under which the worker runs choice i of request
	// id, which Abort stops alone (SGLang's "{id}-{i}"); nil when the
	// protocol cannot stop one choice (vLLM). Prefix says the worker's
	// Abort stops every request whose id begins with the one named
	// (SGLang's scheduler), so a choice whose id is a prefix of a running
	// sibling's ("-1" of "-10") is stopped only once that sibling is over.
	ChoiceID func(id string, i int) string
	Prefix   bool
}

var generateDesc = &grpc.StreamDesc{ServerStreams: true}

var codecOpt = grpc.ForceCodecV2(Codec{})

// Call is one Generate stream and its receive loop: remote.Call.
type Call struct {
	s   *Session
	st  *Stream
	id  string
	rx  remote.Receiver
	n   int
	cs  grpc.ClientStream
	end context.CancelFunc // ends the stream

	stopCtx func() bool // stops the AfterFunc on the caller's context

	mu        sync.Mutex
	over      bool          // the loop has ended
	abortDone chan struct{} // closed when the Abort RPC has returned; nil before Abort

	resp      *Response
	chunk     remote.Chunk
	done      remote.End
	finished  []bool
	delivered bool

	// Bit i of fin: choice i's complete came (set by the loop); of
	// dropped: the engine ended choice i (AbortChoice), whose output is
	// no longer delivered; of pending: its Abort RPC waits for a sibling
	// (Stream.Prefix). At most 64 choices (remote.MaxN is 16).
	fin, dropped atomic.Uint64
	pending      uint64 // guarded by mu
}

// Generate starts req (a GenerateRequest with N choices and id) on the
// worker and its receive loop. It returns once the stream is open and the
// request sent, or with a *remote.WorkerError: Retryable when the worker
// could not be reached. A worker's refusal that comes after (a status
// before any token) reaches rx.End as a *remote.WorkerError, Retryable
// when the code is UNAVAILABLE or RESOURCE_EXHAUSTED, since nothing of the
// request reached the client. ctx's end aborts the call on the worker.
func (s *Session) Generate(ctx context.Context, st *Stream, id string, n int, req proto.Message, rx remote.Receiver) (*Call, error) {
	if s.closed.Load() {
		return nil, &remote.WorkerError{Worker: s.Worker, Message: "generate: the client was closed"}
	}
	if err := ctx.Err(); err != nil {
		return nil, &remote.WorkerError{Worker: s.Worker, Status: 499, Message: "generate", Err: err}
	}
	sctx, end := context.WithCancel(s.ctx)
	// Until the stream is open the caller's context bounds the wait for a
	// connection; after, its end is an Abort.
	stopOpen := context.AfterFunc(ctx, end)
	cs, err := s.Conn.NewStream(sctx, generateDesc, st.Method, codecOpt)
	if err == nil {
		err = cs.SendMsg(req)
		if err == nil {
			err = cs.CloseSend()
		}
		if err == io.EOF {
			// The stream failed: RecvMsg has its status.
			err = cs.RecvMsg(NewResponse(st.Fields))
		}
	}
	if !stopOpen() || err != nil {
		end()
		if err == nil {
			err = ctx.Err()
		}
		return nil, s.Err("generate", err, false)
	}
	c := &Call{s: s, st: st, id: id, rx: rx, n: n, cs: cs, end: end, resp: NewResponse(st.Fields)}
	c.finished = make([]bool, n)
	c.done.Choices = make([]remote.ChoiceEnd, n)
	for i := range c.done.Choices {
		c.done.Choices[i].MatchedTokenID = -1
	}
	s.calls.Add(1)
	c.stopCtx = context.AfterFunc(ctx, c.Abort)
	go c.loop()
	return c, nil
}

// Abort sends the worker an Abort RPC for the request (on a goroutine of
// its own: Abort returns at once), then ends the stream. Idempotent; End
// still comes, with the unfinished choices' FinishReason "abort".
// After End it does nothing: the request is over on the worker too.
func (c *Call) Abort() {
	c.mu.Lock()
	if c.over || c.abortDone != nil {
		c.mu.Unlock()
		return
	}
	done := make(chan struct{})
	c.abortDone = done
	c.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(c.s.ctx, c.s.abortTimeout)
		_ = c.st.Abort(ctx, c.id)
		cancel()
		c.end()
		close(done)
	}()
}

// AbortChoice implements remote.ChoiceAborter: the engine has ended
// choice i while the others go on. Its output is dropped from now on; with
// Stream.ChoiceID the worker is told to stop it (an Abort RPC for the
// choice's id, on a goroutine of its own); and once every other choice has
// finished on the worker the whole request is aborted (Abort), so that a
// choice the worker could not stop alone does not run on to its own end.
// Safe for concurrent use; idempotent; nothing after End or Abort.
func (c *Call) AbortChoice(i int) {
	if i < 0 || i >= c.n || i >= 64 {
		return
	}
	bit := uint64(1) << i
	if c.dropped.Or(bit)&bit != 0 || c.fin.Load()&bit != 0 {
		return
	}
	c.mu.Lock()
	if c.over || c.abortDone != nil {
		c.mu.Unlock()
		return
	}
	if c.st.ChoiceID != nil {
		c.pending |= bit
	}
	c.mu.Unlock()
	c.settle()
}

// settle sends the Abort RPCs of the dropped choices that may go now, and
// aborts the call once no choice runs on the worker that the engine
// wants.
func (c *Call) settle() {
	fin, dropped := c.fin.Load(), c.dropped.Load()
	all := uint64(1)<<c.n - 1
	if c.n >= 64 {
		all = ^uint64(0)
	}
	if dropped != 0 && (fin|dropped)&all == all {
		c.Abort()
		return
	}
	c.mu.Lock()
	if c.over || c.abortDone != nil || c.pending == 0 {
		c.mu.Unlock()
		return
	}
	var send []int
	for i := 0; i < c.n && i < 64; i++ {
		if c.pending&(1<<i) == 0 || c.st.Prefix && c.shadows(i, fin, dropped) {
			continue
		}
		c.pending &^= 1 << i
		send = append(send, i)
	}
	if len(send) > 0 {
		c.s.calls.Add(1)
	}
	c.mu.Unlock()
	if len(send) == 0 {
		return
	}
	go func() {
		defer c.s.calls.Done()
		for _, i := range send {
			ctx, cancel := context.WithTimeout(c.s.ctx, c.s.abortTimeout)
			_ = c.st.Abort(ctx, c.st.ChoiceID(c.id, i))
			cancel()
		}
	}()
}

// shadows reports whether stopping choice i by its id, as a prefix, would
// stop a sibling still running that the engine wants.
func (c *Call) shadows(i int, fin, dropped uint64) bool {
	own := c.st.ChoiceID(c.id, i)
	for j := 0; j < c.n && j < 64; j++ {
		if j != i && (fin|dropped)&(1<<j) == 0 && strings.HasPrefix(c.st.ChoiceID(c.id, j), own) {
			return true
		}
	}
	return false
}

// ChoiceSuffix is the usual ChoiceID: id, a dash, the choice's index.
func ChoiceSuffix(id string, i int) string { return id + "-" + strconv.Itoa(i) }

func (c *Call) loop() {
	defer func() {
		// The loop's count covers the Abort RPC too: Close waits for both.
		c.mu.Lock()
		c.over = true
		done := c.abortDone
		c.mu.Unlock()
		if done != nil {
			<-done
		}
		c.s.calls.Done()
	}()
	r := c.resp
	for {
		err := c.cs.RecvMsg(r)
		if err != nil {
			c.finish(err)
			return
		}
		if r.Index < 0 || r.Index >= c.n {
			c.finish(&remote.WorkerError{Worker: c.s.Worker, Status: 502, Message: "generate",
				Err: fmt.Errorf("the worker sent choice %d of %d", r.Index, c.n)})
			return
		}
		switch r.Kind {
		case KindChunk:
			if r.PromptTokens > 0 {
				c.done.PromptTokens = r.PromptTokens
				c.done.CachedTokens = r.Cached
			}
			if len(r.TokenIDs) == 0 && r.PromptLogprobs == nil || c.dropped.Load()&(1<<r.Index) != 0 {
				continue
			}
			ch := &c.chunk
			ch.Choice = r.Index
			ch.TokenIDs = r.TokenIDs
			ch.Logprobs = r.Logprobs
			ch.Top = r.Top
			ch.PromptTokens = r.PromptTokens
			ch.CachedTokens = r.Cached
			ch.PromptLogprobs = r.PromptLogprobs
			c.done.Choices[r.Index].CompletionTokens += len(r.TokenIDs)
			c.delivered = true
			c.rx.Tokens(ch)
		case KindComplete:
			// Streamed, a complete's output_ids repeat the last chunk's
			// tokens (vLLM) or the whole output (SGLang's counts): the
			// chunks have delivered them all.
			ce := &c.done.Choices[r.Index]
			ce.FinishReason = r.FinishReason
			if ce.FinishReason == "" {
				ce.FinishReason = "stop"
			}
			ce.MatchedTokenID = r.MatchedTokenID
			if r.PromptTokens > 0 {
				c.done.PromptTokens = r.PromptTokens
				c.done.CachedTokens = r.Cached
			}
			c.finished[r.Index] = true
			if r.Index < 64 {
				c.fin.Or(1 << r.Index)
				if c.dropped.Load() != 0 {
					c.settle()
				}
			}
		}
	}
}

var errUnfinished = errors.New("the worker ended the stream before every choice finished")

func (c *Call) finish(err error) {
	c.stopCtx()
	c.mu.Lock()
	aborted := c.abortDone != nil
	c.mu.Unlock()
	switch {
	case err == io.EOF:
		for i, f := range c.finished {
			if f {
				continue
			}
			if aborted {
				c.done.Choices[i].FinishReason = "abort"
				continue
			}
			c.done.Err = &remote.WorkerError{Worker: c.s.Worker, Status: 502, Message: "generate", Err: errUnfinished}
			c.done.Choices[i].FinishReason = "error"
		}
	case aborted && !c.s.closed.Load():
		// Our own end of the stream after the Abort RPC.
		for i, f := range c.finished {
			if !f {
				c.done.Choices[i].FinishReason = "abort"
			}
		}
	default:
		var we *remote.WorkerError
		if errors.As(err, &we) {
			c.done.Err = we
		} else {
			c.done.Err = c.s.Err("generate", err, c.delivered)
		}
		for i, f := range c.finished {
			if !f {
				c.done.Choices[i].FinishReason = "error"
			}
		}
	}
	c.end()
	c.rx.End(&c.done)
}
