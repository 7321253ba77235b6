package actors

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
)

// embeddingsDialect is POST /v1/embeddings (OpenAI's shape): decode checks
// the body (codegen/openai.DecodeEmbeddingRequest), the model, and that
// the engine computes embeddings (engine.Embedder), and tokenizes the text
// inputs; then one Embed call computes every input's vector on a goroutine
// of its own (the session actor stays free to hear of a disconnect, which
// cancels it), and receive answers with the vectors. The route takes an
// admission permit like a generation; a held session (held.go) starts its
// call when the permit comes (launchHeld). Errors are OpenAI's.
type embeddingsDialect struct {
	tokenizeDialect // the methods of a dialect that never streams

	req    openai.EmbeddingRequest
	ereq   engine.EmbedRequest
	emb    engine.Embedder
	cancel context.CancelFunc
	done   embedDone
}

// embedDone carries the Embed call's outcome to the session actor.
type embedDone struct {
	res *engine.EmbedResult
	err error
}

func (d *embeddingsDialect) decode(ss *session) *apiError {
	if err := openai.DecodeEmbeddingRequest(ss.req.Body, &d.req, false); err != nil {
		return openaiError(err.(*openai.ParamError).API())
	}
	if !ss.owner.servesModel(d.req.Model) {
		return modelNotFound(d.req.Model)
	}
	emb, ok := engine.As[engine.Embedder](ss.owner.cfg.Engine)
	if !ok {
		return &apiError{Status: 400, Type: "invalid_request_error", Code: openai.CodeUnsupported, Param: "model",
			Message: "The model " + quote(d.req.Model) + " does not support the embeddings API (its engine computes no embeddings)."}
	}
	d.emb = emb
	d.ereq.Model = d.req.Model
	eng := ss.owner.cfg.Engine
	for _, s := range d.req.Input.Texts {
		ids := eng.Tokenize(s)
		toks := make([]int32, len(ids))
		for i, id := range ids {
			toks[i] = int32(id)
		}
		d.ereq.Inputs = append(d.ereq.Inputs, toks)
	}
	for _, ids := range d.req.Input.Tokens {
		toks := make([]int32, len(ids))
		for i, id := range ids {
			toks[i] = int32(id)
		}
		d.ereq.Inputs = append(d.ereq.Inputs, toks)
	}
	ss.ereq.Model = d.req.Model // what the session's logs and metrics report
	if ss.held {
		ss.ready = true
		return errPending
	}
	d.launch(ss)
	return errPending
}

// launch starts the Embed call; its outcome comes back as d.done.
func (d *embeddingsDialect) launch(ss *session) {
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	ss.es = d
	self, root := ss.self, ss.owner.root
	go func() {
		res, err := d.emb.Embed(ctx, &d.ereq)
		d.done = embedDone{res: res, err: err}
		root.Send(self, &d.done)
	}()
}

// Abort implements engine.Session (the session's ss.es): a client that
// leaves cancels the call.
func (d *embeddingsDialect) Abort() { d.cancel() }

// launchHeld implements heldLauncher: a held request starts its call once
// it has its permit.
func (d *embeddingsDialect) launchHeld(ss *session, _ actor.Context) bool {
	d.launch(ss)
	return true
}

// receive answers once the call is done.
func (d *embeddingsDialect) receive(ss *session, ctx actor.Context) {
	m, ok := ctx.Message().(*embedDone)
	if !ok || m != &d.done {
		return
	}
	d.cancel()
	if m.err != nil {
		ss.fail(ctx, d.engineError(engine.AsError(m.err), nil))
		return
	}
	d.body = openai.AppendEmbeddingResponse(d.body[:0], d.req.Model, m.res.Vectors, d.req.EncodingFormat == "base64", m.res.PromptTokens)
	ss.finish(200, d.body)
}

func (d *embeddingsDialect) engineError(e *engine.Error, _ *engine.Request) *apiError {
	return openaiError(openai.FromEngineError(e, "input"))
}

// quote is s in double quotes, for messages.
func quote(s string) string { return `"` + s + `"` }
