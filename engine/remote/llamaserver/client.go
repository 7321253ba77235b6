// Package llamaserver is the remote engine's client of llama.cpp's own HTTP
// server, llama-server (URL llama-server://HOST:PORT): POST /completion
// with the prompt's token ids, streamed (SSE) with return_tokens, one
// request per choice (llama-server's /completion has no independent n);
// an abort closes that request's connection, which llama-server notices
// at its next token and frees the slot. /health, /props, /v1/models,
// /slots and /tokenize answer the rest.
//
// The stream is read with a small reader of its own into a reused buffer
// and a hand-written parser of the few fields of an event (event.go):
// per token nothing allocates.
package llamaserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/internal/sse"
)

// Scheme is the URL scheme of llama-server workers.
const Scheme = "llama-server"

func init() { remote.Register(Scheme, Dial) }

// Client is a remote.Client for one llama-server. Safe for concurrent use.
type Client struct {
	url  string // the worker's URL, for errors
	base string // http://host:port
	tr   *http.Transport
	hc   *http.Client // for the requests that are not streams: bounded

	mu     sync.Mutex
	calls  map[*call]struct{}
	closed bool
}

var _ remote.Client = (*Client)(nil)

// Dial makes the client of rawURL (llama-server://HOST:PORT); it does not
// connect.
func Dial(rawURL string, opts remote.DialOptions) (remote.Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != Scheme || u.Host == "" {
		return nil, fmt.Errorf("llamaserver: worker %q: want %s://HOST:PORT", rawURL, Scheme)
	}
	ct := opts.ConnectTimeout
	if ct <= 0 {
		ct = 5 * time.Second
	}
	d := &net.Dialer{Timeout: ct, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext:         d.DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 4096,
		MaxConnsPerHost:     opts.MaxConns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		// The status line of a stream comes after the prompt's prefill:
		// no header timeout (the engine's first-token timeout bounds it).
	}
	return &Client{
		url:   rawURL,
		base:  "http://" + u.Host,
		tr:    tr,
		hc:    &http.Client{Transport: tr, Timeout: 30 * time.Second},
		calls: map[*call]struct{}{},
	}, nil
}

// Close ends every call and drops idle connections. Idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	calls := make([]*call, 0, len(c.calls))
	for k := range c.calls {
		calls = append(calls, k)
	}
	c.mu.Unlock()
	for _, k := range calls {
		k.Abort()
	}
	c.tr.CloseIdleConnections()
	return nil
}

// Health asks /health (200 once the model is loaded).
func (c *Client) Health(ctx context.Context) error {
	_, err := c.get(ctx, "/health")
	return err
}

// get does one GET and returns the body of a 200, or a *WorkerError.
func (c *Client) get(ctx context.Context, path string) ([]byte, error) {
	return c.do(ctx, http.MethodGet, path, nil)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		// These POSTs change nothing on the worker: net/http may retry
		// them on a fresh connection when a pooled one turns out closed.
		req.Header["X-Idempotency-Key"] = nil
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, &remote.WorkerError{Worker: c.url, Retryable: true, Message: "unreachable", Err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, &remote.WorkerError{Worker: c.url, Retryable: true, Message: "reading " + path, Err: err}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, c.statusError(resp.StatusCode, b)
	}
	return b, nil
}

// statusError is the *WorkerError of a non-200 answer with body b
// ({"error":{"code","message","type"}}).
func (c *Client) statusError(status int, b []byte) *remote.WorkerError {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	msg := http.StatusText(status)
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		msg = e.Error.Message
	}
	return &remote.WorkerError{Worker: c.url, Status: status,
		Retryable: status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests, Message: msg}
}

// Info asks /props (context length per slot, model path, slots, chat
// template) and /v1/models (vocabulary size), and probes /v1/embeddings
// with one token for whether the worker computes pooled embeddings (it
// does when started with --embeddings and a pooling other than none: /props
// does not say).
func (c *Client) Info(ctx context.Context) (*remote.Info, error) {
	info, err := c.info(ctx)
	if err != nil {
		return nil, err
	}
	if info.Embeddings, err = c.probeEmbeddings(ctx); err != nil {
		return nil, err
	}
	return info, nil
}

// info is Info without the embeddings probe.
func (c *Client) info(ctx context.Context) (*remote.Info, error) {
	b, err := c.get(ctx, "/props")
	if err != nil {
		return nil, err
	}
	var p props
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("llamaserver: /props: %w", err)
	}
	info := &remote.Info{
		ModelPath:        p.ModelPath,
		MaxContextLength: p.DefaultGenerationSettings.NCtx,
		ChatTemplate:     p.ChatTemplate,
		Slots:            p.TotalSlots,
		BOSTokenID:       -1,
	}
	if b, err := c.get(ctx, "/v1/models"); err == nil {
		var m struct {
			Data []struct {
				ID   string `json:"id"`
				Meta struct {
					NVocab int `json:"n_vocab"`
				} `json:"meta"`
			} `json:"data"`
		}
		if json.Unmarshal(b, &m) == nil && len(m.Data) > 0 {
			info.VocabSize = m.Data[0].Meta.NVocab
		}
	}
	if p.EOSToken != "" {
		if ids, err := c.tokenize(ctx, p.EOSToken, false, true); err == nil && len(ids) == 1 {
			info.EOSTokenIDs = []int32{ids[0]}
		}
	}
	if p.BOSToken != "" {
		if ids, err := c.tokenize(ctx, p.BOSToken, false, true); err == nil && len(ids) == 1 {
			info.BOSTokenID = ids[0]
		}
	}
	return info, nil
}

// props is the part of /props the client reads.
type props struct {
	DefaultGenerationSettings struct {
		NCtx int `json:"n_ctx"`
	} `json:"default_generation_settings"`
	TotalSlots   int    `json:"total_slots"`
	ModelPath    string `json:"model_path"`
	ChatTemplate string `json:"chat_template"`
	BOSToken     string `json:"bos_token"`
	EOSToken     string `json:"eos_token"`
}

// Load reads /slots: the slots processing a request now, of all.
func (c *Client) Load(ctx context.Context) (remote.Load, error) {
	b, err := c.get(ctx, "/slots")
	if err != nil {
		return remote.Load{}, err
	}
	var slots []struct {
		IsProcessing bool `json:"is_processing"`
	}
	if err := json.Unmarshal(b, &slots); err != nil {
		return remote.Load{}, fmt.Errorf("llamaserver: /slots: %w", err)
	}
	l := remote.Load{Capacity: len(slots)}
	for _, s := range slots {
		if s.IsProcessing {
			l.Running++
		}
	}
	if l.Capacity > 0 {
		l.KVUsage = float64(l.Running) / float64(l.Capacity)
	}
	return l, nil
}

// TokenizerFiles: llama-server sends none (see WorkerTokenizer).
func (c *Client) TokenizerFiles(context.Context) (map[string][]byte, error) {
	return nil, remote.ErrUnsupported
}

// tokenize asks /tokenize for the ids of s.
func (c *Client) tokenize(ctx context.Context, s string, addSpecial, parseSpecial bool) ([]int32, error) {
	body, _ := json.Marshal(map[string]any{"content": s, "add_special": addSpecial, "parse_special": parseSpecial})
	b, err := c.do(ctx, http.MethodPost, "/tokenize", body)
	if err != nil {
		return nil, err
	}
	var out struct {
		Tokens []int32 `json:"tokens"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("llamaserver: /tokenize: %w", err)
	}
	return out.Tokens, nil
}

// Generate starts the request's choices, one /completion stream each; it
// returns at once (llama-server writes its status line only after the
// prefill), and a refusal comes in End.
func (c *Client) Generate(_ context.Context, g *remote.Generate, rx remote.Receiver) (remote.Call, error) {
	n := g.Sampling.Choices()
	if g.MinTokens > 0 && g.MinTokens < g.MaxTokens && g.Constraint.Kind != remote.ConstraintNone {
		// The continuation (see minTokensBodies) would start the grammar
		// afresh in the middle of the constrained output.
		return nil, &remote.WorkerError{Worker: c.url, Status: http.StatusBadRequest,
			Message: "min_tokens below max_tokens cannot be combined with response_format or a forced tool call on a llama-server worker"}
	}
	k := &call{c: c, rx: rx, streams: make([]stream, n), left: n}
	k.end.Choices = make([]remote.ChoiceEnd, n)
	for i := range k.streams {
		s := &k.streams[i]
		s.k, s.index = k, i
		s.ctx, s.cancel = context.WithCancel(context.Background())
		if g.MinTokens > 0 {
			var n1 int
			s.body, s.prompt2, s.rest2, n1 = minTokensBodies(g, i)
			if s.prompt2 != nil {
				s.ids = make([]int32, 0, n1) // no growth per token
			}
		} else {
			s.body = appendBody(nil, g, i)
		}
		k.end.Choices[i] = remote.ChoiceEnd{FinishReason: "abort", MatchedTokenID: -1}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, &remote.WorkerError{Worker: c.url, Retryable: true, Message: "client closed"}
	}
	c.calls[k] = struct{}{}
	c.mu.Unlock()
	for i := range k.streams {
		go k.streams[i].run()
	}
	return k, nil
}

// call is one request: n streams, whose receive goroutines take turns at
// the Receiver under mu.
type call struct {
	c       *Client
	rx      remote.Receiver
	streams []stream

	mu   sync.Mutex // serializes rx for the call's streams
	left int
	end  remote.End
}

// Abort closes every stream's connection. Safe for concurrent use.
func (k *call) Abort() {
	for i := range k.streams {
		k.streams[i].cancel()
	}
}

// AbortChoice closes one choice's connection.
func (k *call) AbortChoice(i int) {
	if i >= 0 && i < len(k.streams) {
		k.streams[i].cancel()
	}
}

// stream is one /completion request: one choice.
type stream struct {
	k      *call
	index  int
	ctx    context.Context
	cancel context.CancelFunc
	body   []byte
	// prompt2 and rest2 frame the continuation of a min_tokens request
	// (see minTokensBodies); nil otherwise. ids and text collect the first
	// part's tokens for it, and missing says llama-server left some ids out.
	prompt2, rest2 []byte
	ids            []int32
	text           []byte
	missing        bool
}

// run does the stream's request and reads its events to the end.
func (s *stream) run() {
	k := s.k
	ce, err := s.read()
	s.cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.end.Choices[s.index] = ce
	if err != nil && k.end.Err == nil {
		k.end.Err = err
	}
	k.left--
	if k.left > 0 {
		return
	}
	c := k.c
	c.mu.Lock()
	delete(c.calls, k)
	c.mu.Unlock()
	k.rx.End(&k.end)
}

// read runs the stream's request; for min_tokens, its first part and then,
// when that ran to its length, the continuation.
func (s *stream) read() (remote.ChoiceEnd, error) {
	ce, err := s.readOne(s.body, s.prompt2 != nil, true)
	if err != nil || s.prompt2 == nil || ce.FinishReason != "length" {
		return ce, err
	}
	n1 := ce.CompletionTokens
	body := s.prompt2
	if !s.missing {
		for _, id := range s.ids {
			body = append(body, ',')
			body = strconv.AppendInt(body, int64(id), 10)
		}
	} else {
		// llama-server named not every token (a character split across
		// tokens): the continuation gives the first part as text, which
		// llama-server tokenizes (a mixed prompt).
		q, _ := json.Marshal(string(s.text))
		body = append(append(body, ','), q...)
	}
	body = append(body, s.rest2...)
	s.ids, s.text = nil, nil
	ce, err = s.readOne(body, false, false)
	ce.CompletionTokens += n1
	return ce, err
}

// readOne does one /completion request and reads its events to the end.
// With collect it keeps the tokens' ids and text in s; with usage it
// reports the prompt's token counts (a continuation's prompt is not the
// request's).
func (s *stream) readOne(body []byte, collect, usage bool) (remote.ChoiceEnd, error) {
	c := s.k.c
	ce := remote.ChoiceEnd{FinishReason: "abort", MatchedTokenID: -1}
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, c.base+"/completion", bytes.NewReader(body))
	if err != nil {
		return ce, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	// A stream whose pooled connection turns out closed before the worker
	// read anything may be sent again on a fresh one.
	req.Header["X-Idempotency-Key"] = nil
	resp, err := c.tr.RoundTrip(req)
	if err != nil {
		if s.ctx.Err() != nil {
			return ce, &remote.WorkerError{Worker: c.url, Message: "aborted", Err: err}
		}
		return ce, &remote.WorkerError{Worker: c.url, Retryable: true, Message: "unreachable", Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return ce, c.statusError(resp.StatusCode, b)
	}
	r := &eventReader{s: s, collect: collect, usage: usage, ce: ce, chunk: remote.Chunk{Choice: s.index}}
	buf := make([]byte, readBuf)
	var sr sse.Reader
	for !r.done {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if ferr := sr.Feed(buf[:n], r); ferr != nil {
				return r.ce, &remote.WorkerError{Worker: c.url, Message: "a stream event is too large", Err: ferr}
			}
			continue
		}
		if err != nil {
			if s.ctx.Err() != nil {
				return r.ce, &remote.WorkerError{Worker: c.url, Message: "aborted", Err: s.ctx.Err()}
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return r.ce, &remote.WorkerError{Worker: c.url, Message: "the stream broke before its end", Err: err}
		}
	}
	if r.err != nil {
		return r.ce, r.err
	}
	// Read to the end, so that the connection goes back to the pool.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return r.ce, nil
}

// readBuf is the size of a stream's read buffer (sse.Reader copies an
// event that spans two reads).
const readBuf = 8 << 10

// eventReader handles the events of one /completion stream (an
// sse.Handler): each becomes a Chunk for the receiver, the final one the
// choice's end. Events after the end are ignored. Loop-only: the stream's
// goroutine.
type eventReader struct {
	s              *stream
	collect, usage bool // see readOne
	p              parser
	ev             event
	chunk          remote.Chunk
	got            int    // tokens seen, named or not
	text           []byte // unescaped content, for events with missing ids
	ce             remote.ChoiceEnd
	done           bool
	err            error
}

// OnEvent implements sse.Handler: one call per event, the per-token path.
func (r *eventReader) OnEvent(_, data []byte) {
	if r.done {
		return
	}
	s, k, ev := r.s, r.s.k, &r.ev
	url := k.c.url
	if err := r.p.parse(data, ev); err != nil {
		r.done, r.err = true, &remote.WorkerError{Worker: url, Message: "a stream event does not parse", Err: err}
		return
	}
	if ev.Error.has {
		r.done, r.err = true, &remote.WorkerError{Worker: url, Status: max(ev.Error.code, 500), Message: string(ev.Error.msg)}
		return
	}
	if len(ev.Tokens) > 0 {
		chunk := &r.chunk
		chunk.TokenIDs, chunk.Logprobs, chunk.Top = ev.Tokens, ev.Probs.logprobs, ev.Probs.top
		chunk.Missing, chunk.Text = 0, nil
		if gap := ev.Predicted - r.got - len(ev.Tokens); gap > 0 {
			// llama-server held tokens that ended inside a UTF-8
			// character and names only the last one: the content is the
			// text of them all.
			r.text = ev.content(r.text[:0])
			chunk.Missing, chunk.Text = gap, r.text
		}
		r.got += len(ev.Tokens) + chunk.Missing
		if r.collect {
			s.ids = append(s.ids, ev.Tokens...)
			s.text = ev.content(s.text)
			s.missing = s.missing || chunk.Missing > 0
		}
		if len(chunk.Logprobs) != len(chunk.TokenIDs) {
			chunk.Logprobs, chunk.Top = nil, nil
		}
		k.mu.Lock()
		k.rx.Tokens(chunk)
		k.mu.Unlock()
	}
	if ev.Stop {
		r.done = true
		r.ce.CompletionTokens = max(ev.Predicted, r.got)
		switch ev.StopType {
		case stopLimit:
			r.ce.FinishReason = "length"
		default:
			r.ce.FinishReason = "stop"
		}
		if r.usage {
			k.mu.Lock()
			k.end.PromptTokens = max(k.end.PromptTokens, ev.Evaluated)
			k.end.CachedTokens = max(k.end.CachedTokens, ev.Timings.CacheN)
			k.mu.Unlock()
		}
	}
}

// appendBody appends the /completion request of choice i of g. Every
// sampling field is explicit: llama-server's defaults (min_p 0.05,
// repeat_last_n 64, top_k 40, ...) are not the OpenAI API's.
func appendBody(dst []byte, g *remote.Generate, i int) []byte {
	dst = appendPrompt(dst, g.Prompt)
	return appendParams(dst, g, i, g.MaxTokens, g.Sampling.IgnoreEOS, false)
}

// minTokensBodies returns the two /completion requests of choice i of g
// when g asks for min_tokens, which llama-server's /completion does not
// take. The first generates exactly min(MinTokens, MaxTokens) tokens with
// ignore_eos (llama-server then biases every end-of-generation token to
// -inf) and the stop token ids banned by logit_bias. The second, sent only
// when tokens are still due, continues from the prompt and the first's
// tokens (cache_prompt reuses the slot's KV cache) with the request's own
// parameters: prompt2 is its head, to which the caller appends
// ",id,id...]" (or a JSON string for text) and then rest2.
func minTokensBodies(g *remote.Generate, i int) (first, prompt2, rest2 []byte, n1 int) {
	n1 = min(g.MinTokens, g.MaxTokens)
	first = appendPrompt(nil, g.Prompt)
	first = appendParams(first, g, i, n1, true, true)
	if n1 == g.MaxTokens {
		return first, nil, nil, n1
	}
	prompt2 = appendPrompt(nil, g.Prompt)
	prompt2 = prompt2[:len(prompt2)-1] // reopen the array
	rest2 = append(rest2, ']')
	rest2 = appendParams(rest2, g, i, g.MaxTokens-n1, g.Sampling.IgnoreEOS, false)
	return first, prompt2, rest2, n1
}

// appendPrompt appends `{"prompt":[ids]`.
func appendPrompt(dst []byte, prompt []int32) []byte {
	dst = append(dst, `{"prompt":[`...)
	for j, id := range prompt {
		if j > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(id), 10)
	}
	return append(dst, ']')
}

// appendParams appends the rest of a /completion body after its prompt:
// nPredict tokens at most, ignoreEOS, and with banStops the stop token ids
// banned (the first part of a min_tokens request).
func appendParams(dst []byte, g *remote.Generate, i, nPredict int, ignoreEOS, banStops bool) []byte {
	sp := g.Sampling
	dst = append(dst, `,"stream":true,"return_tokens":true,"id_slot":-1,"cache_prompt":`...)
	dst = strconv.AppendBool(dst, g.CachePrompt)
	dst = append(dst, `,"n_predict":`...)
	dst = strconv.AppendInt(dst, int64(nPredict), 10)
	dst = append(dst, `,"temperature":`...)
	dst = appendFloat(dst, sp.Temperature)
	dst = append(dst, `,"top_k":`...)
	dst = strconv.AppendInt(dst, int64(sp.TopK), 10)
	topP := sp.TopP
	if topP <= 0 {
		topP = 1
	}
	dst = append(dst, `,"top_p":`...)
	dst = appendFloat(dst, topP)
	dst = append(dst, `,"min_p":`...)
	dst = appendFloat(dst, sp.MinP)
	dst = append(dst, `,"typical_p":1,"xtc_probability":0,"dry_multiplier":0,"mirostat":0,"top_n_sigma":-1,"dynatemp_range":0`...)
	rp := sp.RepetitionPenalty
	if rp <= 0 {
		rp = 1
	}
	dst = append(dst, `,"repeat_penalty":`...)
	dst = appendFloat(dst, rp)
	// The penalties look at the whole context, as vLLM's do (llama-server
	// takes no -1 here).
	dst = append(dst, `,"repeat_last_n":`...)
	dst = strconv.AppendInt(dst, int64(len(g.Prompt)+g.MaxTokens), 10)
	dst = append(dst, `,"presence_penalty":`...)
	dst = appendFloat(dst, sp.PresencePenalty)
	dst = append(dst, `,"frequency_penalty":`...)
	dst = appendFloat(dst, sp.FrequencyPenalty)
	dst = append(dst, `,"seed":`...)
	dst = strconv.AppendInt(dst, seedFor(sp.Seed, sp.HasSeed, i), 10)
	dst = append(dst, `,"ignore_eos":`...)
	dst = strconv.AppendBool(dst, ignoreEOS)
	nProbs := 0
	if sp.Logprobs {
		nProbs = max(1, sp.TopLogprobs)
	}
	dst = append(dst, `,"n_probs":`...)
	dst = strconv.AppendInt(dst, int64(nProbs), 10)
	dst = append(dst, `,"post_sampling_probs":false,"stop":[]`...)
	dst = append(dst, `,"logit_bias":[`...)
	for j, b := range sp.LogitBias {
		if j > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		dst = strconv.AppendInt(dst, int64(b.TokenID), 10)
		dst = append(dst, ',')
		if b.Bias <= -100 {
			dst = append(dst, "false"...) // llama-server: false bans the token
		} else {
			dst = appendFloat(dst, b.Bias)
		}
		dst = append(dst, ']')
	}
	if banStops {
		for j, id := range sp.StopTokenIDs {
			if j > 0 || len(sp.LogitBias) > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '[')
			dst = strconv.AppendInt(dst, int64(id), 10)
			dst = append(dst, ",false]"...)
		}
	}
	dst = append(dst, ']')
	switch g.Constraint.Kind {
	case remote.ConstraintJSONObject:
		dst = append(dst, `,"json_schema":{"type":"object"}`...)
	case remote.ConstraintJSONSchema:
		dst = append(dst, `,"json_schema":`...)
		dst = append(dst, g.Constraint.Value...)
	case remote.ConstraintGrammar:
		dst = append(dst, `,"grammar":`...)
		q, _ := json.Marshal(g.Constraint.Value)
		dst = append(dst, q...)
	}
	return append(dst, '}')
}

// seedFor is choice i's seed: the request's for choice 0 (so that one
// choice through Vajra samples as llama-server alone with that seed), mixed
// with the index for the others; -1 (llama-server: random) without one.
func seedFor(seed int64, has bool, i int) int64 {
	if !has {
		return -1
	}
	if i == 0 {
		return int64(uint32(seed))
	}
	z := uint64(seed) ^ (uint64(i) * 0x9e3779b97f4a7c15)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return int64(uint32(z ^ (z >> 31)))
}

func appendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, '0')
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64)
}
