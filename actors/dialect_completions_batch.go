package actors

import (
	"strconv"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
)

// A batch of prompts in one POST /v1/completions (as vLLM and OpenAI take
// it; lm-eval sends them): one engine session per prompt, run by the
// completions dialect itself (decode returns errPending). Every prompt is
// validated, prepared and started before the status line, so a prompt that
// does not fit fails the whole request with a clean 400. Prompt k's choices
// are k*n … k*n+n-1 of the response, under one id; the usage is the sum.
//
// Streamed, each prompt's frames come from its own CompletionFormatter
// (with ChoiceOffset), which neither ends the stream nor writes errors: the
// batch writes the single end (usage chunk, data: [DONE]) with the
// dialect's own formatter once every prompt finished, or the error event if
// one failed (the others are then aborted). The parts' StreamInfo stays
// zero (DialectNone): an engine must format them with their Formatters.

// maxBatchSequences bounds prompts × n of one request, like n alone
// (openai.MaxChoices): one request must not fan out without bound.
const maxBatchSequences = openai.MaxChoices

// completionsBatch is the state of a batched request. Its lock guards what
// the engine's goroutines deliver; the rest belongs to the session actor.
type completionsBatch struct {
	ss    *session
	parts []batchPart

	mu       sync.Mutex
	pending  []byte
	results  []*engine.Result
	done     int
	notified bool
	detached bool
	msg      batchReady

	out     []byte
	aborted bool
}

// batchPart is one prompt's engine request.
type batchPart struct {
	req  engine.Request
	es   engine.Session
	fmt  batchFormatter
	sink batchSink
	echo string
}

// batchReady tells the session that a batch's sinks hold bytes.
type batchReady struct{}

// batchSink receives one prompt's deliveries.
type batchSink struct {
	b *completionsBatch
	k int
}

// Deliver implements engine.Sink (on the engine's goroutine).
func (s *batchSink) Deliver(frames []byte, final *engine.Result) {
	b := s.b
	b.mu.Lock()
	if b.detached {
		b.mu.Unlock()
		return
	}
	b.pending = append(b.pending, frames...)
	if final != nil {
		b.results[s.k] = final
		b.done++
	}
	post := !b.notified
	b.notified = true
	b.mu.Unlock()
	if post {
		b.ss.owner.root.Send(b.ss.self, &b.msg)
	}
}

// Abort implements engine.Session for the whole batch (the session's
// ss.es): a client that leaves aborts every prompt.
func (b *completionsBatch) Abort() {
	b.mu.Lock()
	b.detached = true
	b.mu.Unlock()
	b.abortParts()
}

func (b *completionsBatch) abortParts() {
	for i := range b.parts {
		if es := b.parts[i].es; es != nil {
			es.Abort()
		}
	}
}

// batchFormatter is one prompt's stream formatter: codegen's, without the
// stream's end and error, which the batch writes once.
type batchFormatter struct {
	openai.CompletionFormatter
}

// AppendEnd implements engine.Formatter: the batch ends the stream.
func (f *batchFormatter) AppendEnd(dst []byte, _ *engine.Result) []byte { return dst }

// AppendError implements engine.Formatter: the batch reports the error.
func (f *batchFormatter) AppendError(dst []byte, _ *engine.Error) []byte { return dst }

// startBatch validates, prepares and starts every prompt of d.req. It
// answers errPending when the batch runs (the session then waits for
// batchReady), or the error that refuses the request. A held session
// (held.go) validates and prepares every prompt, sends a stream's head,
// and starts them when its permit comes (launchHeld).
func (d *completionsDialect) startBatch(ss *session) *apiError {
	if ae := d.prepareBatch(ss); ae != nil {
		return ae
	}
	if ss.held {
		ss.ready = true
		if d.req.Stream.V {
			ss.conn.StartStream(d.streamContentType(), nil)
			ss.streaming = true
		}
		return errPending
	}
	if err := d.launchBatch(ss); err != nil {
		return d.engineError(err, &ss.ereq)
	}
	return errPending
}

// launchHeld implements heldLauncher: a held batch starts its prompts now
// that it has its permit; one the engine refuses fails the request (in the
// stream if its head is out). It reports false for a one-prompt request,
// which the session starts itself.
func (d *completionsDialect) launchHeld(ss *session, ctx actor.Context) bool {
	if d.batch == nil {
		return false
	}
	if err := d.launchBatch(ss); err != nil {
		if ss.streaming {
			ss.failStream(ctx, err)
		} else {
			ss.fail(ctx, d.engineError(err, &ss.ereq))
		}
	}
	return true
}

// prepareBatch validates and prepares every prompt of d.req into d.batch,
// or says why the request is refused.
func (d *completionsDialect) prepareBatch(ss *session) *apiError {
	p := &d.req.Prompt
	count := p.Count()
	n := max(d.req.N.V, 1)
	if count*n > maxBatchSequences {
		return &apiError{Status: 400, Type: "invalid_request_error", Code: openai.CodeInvalidValue, Param: "prompt",
			Message: "'prompt' holds " + strconv.Itoa(count) + " prompts of " + strconv.Itoa(n) +
				" choices each; at most " + strconv.Itoa(maxBatchSequences) + " sequences per request."}
	}
	b := &completionsBatch{ss: ss, parts: make([]batchPart, count), results: make([]*engine.Result, count)}
	eng := ss.owner.cfg.Engine
	one := d.req
	for k := range b.parts {
		part := &b.parts[k]
		if k < len(p.Texts) {
			one.Prompt = openai.Prompt{Texts: p.Texts[k : k+1]}
		} else {
			one.Prompt = openai.Prompt{Tokens: p.Tokens[k-len(p.Texts) : k-len(p.Texts)+1]}
		}
		if pe := one.ToEngine(&part.req); pe != nil {
			ae := openaiError(pe.API())
			if ae.Param == "prompt" {
				ae.Param = "prompt[" + strconv.Itoa(k) + "]"
			}
			return ae
		}
		if k == 0 && !ss.owner.servesModel(part.req.Model) {
			return modelNotFound(part.req.Model)
		}
		if err := eng.Prepare(&part.req); err != nil {
			return d.engineError(engine.AsError(err), &part.req)
		}
		part.req.ID = ss.req.RequestID + "-" + strconv.Itoa(k)
		part.req.Arrival = ss.req.Arrival
		part.req.StreamInterval = max(part.req.StreamInterval, ss.owner.cfg.StreamInterval)
		if d.req.Echo {
			part.echo = echoText(eng, &one.Prompt)
		}
	}
	ss.ereq = b.parts[0].req // the model and sampling the session reports
	ss.framing = ss.req.framing()
	d.batch = b
	return nil
}

// launchBatch starts every prompt of the prepared d.batch and writes the
// status line of a stream (unless a held session wrote it). A prompt the
// engine refuses aborts those started and is the error returned.
func (d *completionsDialect) launchBatch(ss *session) *engine.Error {
	b := d.batch
	eng := ss.owner.cfg.Engine
	stream := d.req.Stream.V
	n := max(d.req.N.V, 1)
	for k := range b.parts {
		part := &b.parts[k]
		part.sink = batchSink{b: b, k: k}
		if stream {
			o := d.req.CompletionStreamOptions()
			o.Framing, o.EchoPrompt, o.ChoiceOffset = ss.framing, part.echo, k*n
			part.fmt.Reset(d.id, part.req.Model, d.created, o)
			part.req.Formatter = &part.fmt
		}
		es, err := eng.Start(&part.req, &part.sink)
		if err != nil {
			b.Abort()
			return engine.AsError(err)
		}
		part.es = es
	}
	ss.es = b
	if stream {
		// The dialect's own formatter writes the stream's end; an error
		// (a prompt's, or the session's) is appendStreamError's.
		o := d.req.CompletionStreamOptions()
		o.Framing = ss.framing
		d.fmt.Reset(d.id, b.parts[0].req.Model, d.created, o)
		if !ss.streaming {
			ss.conn.StartStream(d.streamContentType(), nil)
			ss.streaming = true
		}
	}
	return nil
}

// receive forwards what the prompts delivered and ends the response once
// every prompt finished.
func (d *completionsDialect) receive(ss *session, ctx actor.Context) {
	b := d.batch
	if _, ok := ctx.Message().(*batchReady); !ok || b == nil {
		return
	}
	var failed *engine.Error
	b.mu.Lock()
	b.out, b.pending = b.pending, b.out[:0]
	done := b.done
	b.notified = false
	for _, r := range b.results {
		if r != nil && r.Err != nil && (failed == nil || failed.Kind == engine.KindAborted) {
			failed = r.Err
		}
	}
	b.mu.Unlock()
	if ss.streaming && len(b.out) > 0 {
		ss.conn.Send(b.out)
	}
	if failed != nil && !b.aborted {
		b.aborted = true
		b.abortParts() // one prompt failed: the others cannot make a response
	}
	if done < len(b.parts) {
		return
	}
	// Every result is in: the sinks wrote them before the last unlock.
	ss.finished = true
	n := max(d.req.N.V, 1)
	merged := b.merge(n)
	switch {
	case ss.streaming && failed != nil:
		ss.body = d.appendStreamError(ss.body[:0], ss, failed)
		ss.conn.EndStream(ss.body)
	case ss.streaming:
		ss.body = d.fmt.AppendEnd(ss.body[:0], merged)
		ss.conn.EndStream(ss.body)
	case failed != nil:
		ae := d.engineError(failed, &ss.ereq)
		ss.body = d.appendError(ss.body[:0], ae)
		ss.conn.Respond(ae.Status, contentTypeJSON, nil, ss.body)
	default:
		m := openai.CompletionMeta{ID: d.id, Model: ss.ereq.Model, Created: d.created,
			Logprobs: d.req.Logprobs.Defined, Echo: d.req.Echo, TokenIDs: d.req.ReturnTokenIDs}
		if d.req.ReturnTokenIDs {
			m.PromptTokenIDs = make([][]int32, len(merged.Choices))
			for i := range m.PromptTokenIDs {
				if r := b.results[min(i/n, len(b.results)-1)]; r != nil {
					m.PromptTokenIDs[i] = r.PromptTokens
				}
			}
		}
		if d.req.Echo {
			m.EchoPrompts = make([]string, len(merged.Choices))
			for i := range m.EchoPrompts {
				m.EchoPrompts[i] = b.parts[min(i/n, len(b.parts)-1)].echo
			}
		}
		ss.body = openai.AppendCompletion(ss.body[:0], &m, merged)
		ss.conn.Respond(200, contentTypeJSON, nil, ss.body)
	}
	ss.stop(ctx)
}

// merge joins the prompts' results: choices renumbered in prompt order (n
// per prompt), usage summed.
func (b *completionsBatch) merge(n int) *engine.Result {
	res := &engine.Result{}
	for k, r := range b.results {
		for _, c := range r.Choices {
			c.Index += k * n
			res.Choices = append(res.Choices, c)
		}
		res.Usage.PromptTokens += r.Usage.PromptTokens
		res.Usage.CompletionTokens += r.Usage.CompletionTokens
		res.Usage.CachedTokens += r.Usage.CachedTokens
		res.Usage.ReasoningTokens += r.Usage.ReasoningTokens
	}
	return res
}
