// Package vllm is the remote.Client of a vLLM worker: the gRPC service
// `vllm serve MODEL --grpc` serves, vllm.grpc.engine.VllmEngine
// (smg-grpc-proto 0.4.28's vllm_engine.proto; generated code in vllmpb).
// Worker URLs are vllm://HOST:PORT.
//
// One grpc.ClientConn per worker multiplexes every request (HTTP/2
// streams). Each Generate is a server stream of token-id chunks (stream:
// true) read on its own goroutine, decoded in place into reused buffers
// (engine/remote/internal/grpcworker) and handed to the Receiver. vLLM does
// not abort a request whose stream is dropped, so Abort is the explicit
// Abort RPC.
package vllm

import (
	"context"
	"unsafe"

	"google.golang.org/grpc"

	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/engine/remote/commonpb"
	"github.com/vajra-go/vajra/engine/remote/internal/grpcworker"
	"github.com/vajra-go/vajra/engine/remote/vllm/vllmpb"
)

// Scheme is the worker URL scheme of this protocol.
const Scheme = "vllm"

// Options tune a client's connection (keepalive, back-off, the Abort RPC's
// timeout); the zero value takes the defaults.
type Options = grpcworker.Options

// Client is a vLLM worker's remote.Client and remote.Embedder. Safe for
// concurrent use.
type Client struct {
	s   *grpcworker.Session
	api vllmpb.VllmEngineClient
	gen grpcworker.Stream
}

var (
	_ remote.Client   = (*Client)(nil)
	_ remote.Embedder = (*Client)(nil)
)

// fields are vllm_engine.proto's GenerateResponse numbers.
var fields = grpcworker.FieldsOf((&vllmpb.GenerateResponse{}).ProtoReflect().Descriptor())

// Dial returns the client of the worker at url (vllm://HOST:PORT, or
// HOST:PORT). It connects in the background: a worker that is down is no
// error here, its calls fail with a retryable *remote.WorkerError until it
// is up.
func Dial(url string, o Options) (*Client, error) {
	hp, err := grpcworker.Target(Scheme, url)
	if err != nil {
		return nil, err
	}
	s, err := grpcworker.Dial(url, hp, o)
	if err != nil {
		return nil, err
	}
	c := &Client{s: s, api: vllmpb.NewVllmEngineClient(s.Conn)}
	c.gen = grpcworker.Stream{Method: vllmpb.VllmEngine_Generate_FullMethodName, Fields: &fields, Abort: c.abort}
	return c, nil
}

func init() { remote.Register(Scheme, Open) }

// Open is Dial as remote.Register takes it.
func Open(url string, o remote.DialOptions) (remote.Client, error) {
	return Dial(url, Options{ConnectTimeout: o.ConnectTimeout})
}

func (c *Client) abort(ctx context.Context, id string) error {
	_, err := c.api.Abort(ctx, &vllmpb.AbortRequest{RequestIds: []string{id}})
	return err
}

// Generate implements remote.Client: one streamed Generate RPC with every
// sampling field set explicitly.
func (c *Client) Generate(ctx context.Context, g *remote.Generate, rx remote.Receiver) (remote.Call, error) {
	req := &vllmpb.GenerateRequest{
		RequestId:      g.ID,
		Input:          &vllmpb.GenerateRequest_Tokenized{Tokenized: &vllmpb.TokenizedInput{InputIds: uint32s(g.Prompt)}},
		SamplingParams: Sampling(g),
		Stream:         true,
	}
	call, err := c.s.Generate(ctx, &c.gen, g.ID, g.Sampling.Choices(), req, rx)
	if err != nil {
		return nil, err
	}
	return call, nil
}

// uint32s views token ids as the proto's uint32s (ids are never negative;
// the request is marshalled during Generate, while g is the caller's).
func uint32s(p []int32) []uint32 {
	if len(p) == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&p[0])), len(p))
}

// Sampling returns the request's SamplingParams with every field explicit:
// proto3's zeros are not vLLM's defaults (temperature and max_tokens are
// optional for that reason; top_p and repetition_penalty 0 would read as
// unset, so their neutral 1 is sent). Stop strings are the remote engine's
// and not sent; the tokens come back undetokenized.
func Sampling(g *remote.Generate) *vllmpb.SamplingParams {
	s := g.Sampling
	temp := float32(s.Temperature)
	maxTokens := uint32(g.MaxTokens)
	topP := float32(s.TopP)
	if topP == 0 {
		topP = 1
	}
	rep := float32(s.RepetitionPenalty)
	if rep == 0 {
		rep = 1
	}
	topK := uint32(0) // vLLM: 0 considers every token
	if s.TopK > 0 {
		topK = uint32(s.TopK)
	}
	sp := &vllmpb.SamplingParams{
		Temperature:                &temp,
		TopP:                       topP,
		TopK:                       topK,
		MinP:                       float32(s.MinP),
		FrequencyPenalty:           float32(s.FrequencyPenalty),
		PresencePenalty:            float32(s.PresencePenalty),
		RepetitionPenalty:          rep,
		MaxTokens:                  &maxTokens,
		MinTokens:                  uint32(max(g.MinTokens, 0)),
		SkipSpecialTokens:          !s.KeepSpecialTokens,
		SpacesBetweenSpecialTokens: !s.NoSpecialTokenSpaces,
		IgnoreEos:                  s.IgnoreEOS,
		N:                          uint32(s.Choices()),
		IncludeStopStrInOutput:     false,
	}
	if len(s.StopTokenIDs) > 0 {
		sp.StopTokenIds = make([]uint32, len(s.StopTokenIDs))
		for i, id := range s.StopTokenIDs {
			sp.StopTokenIds[i] = uint32(id)
		}
	}
	if s.Logprobs {
		k := int32(s.TopLogprobs)
		sp.Logprobs = &k
	}
	if g.PromptLogprobs != 0 {
		// -1 (the prompt token's own logprob only) is vLLM's 0.
		k := int32(max(g.PromptLogprobs, 0))
		sp.PromptLogprobs = &k
	}
	if s.HasSeed {
		// The proto's seed is an int32: a wider seed is folded into it
		// (the same seed always gives the same int32).
		seed := int32(s.Seed ^ s.Seed>>32)
		sp.Seed = &seed
	}
	if len(s.LogitBias) > 0 {
		sp.LogitBias = make(map[int32]float32, len(s.LogitBias))
		for _, b := range s.LogitBias {
			sp.LogitBias[int32(b.TokenID)] = float32(b.Bias)
		}
	}
	// The grammar in xgrammar's dialect when there is one (remote.Constraint
	// says why), else the constraint as it came.
	switch c := &g.Constraint; {
	case c.EBNF != "":
		sp.Constraint = &vllmpb.SamplingParams_Grammar{Grammar: c.EBNF}
	case c.Kind == remote.ConstraintJSONObject:
		sp.Constraint = &vllmpb.SamplingParams_JsonObject{JsonObject: true}
	case c.Kind == remote.ConstraintJSONSchema:
		sp.Constraint = &vllmpb.SamplingParams_JsonSchema{JsonSchema: c.Value}
	case c.Kind == remote.ConstraintGrammar:
		sp.Constraint = &vllmpb.SamplingParams_Grammar{Grammar: c.Value}
	}
	return sp
}

// Info implements remote.Client (GetModelInfo).
func (c *Client) Info(ctx context.Context) (*remote.Info, error) {
	r, err := c.api.GetModelInfo(ctx, &vllmpb.GetModelInfoRequest{})
	if err != nil {
		return nil, c.s.Err("GetModelInfo", err, false)
	}
	eos := make([]int32, len(r.GetEosTokenIds()))
	copy(eos, r.GetEosTokenIds())
	return &remote.Info{
		ServedModelName:  r.GetServedModelName(),
		ModelPath:        r.GetModelPath(),
		MaxContextLength: int(r.GetMaxContextLength()),
		VocabSize:        int(r.GetVocabSize()),
		EOSTokenIDs:      eos,
		BOSTokenID:       r.GetBosTokenId(),
		Embeddings:       !r.GetIsGeneration(),
		PromptLogprobs:   true,
		Slots:            c.slots(ctx),
	}, nil
}

// slots is the worker's max running requests (GetLoads), 0 when unknown.
func (c *Client) slots(ctx context.Context) int {
	l, err := c.Load(ctx)
	if err != nil {
		return 0
	}
	return l.Capacity
}

// Health implements remote.Client (HealthCheck).
func (c *Client) Health(ctx context.Context) error {
	r, err := c.api.HealthCheck(ctx, &vllmpb.HealthCheckRequest{})
	if err != nil {
		return c.s.Err("HealthCheck", err, false)
	}
	if !r.GetHealthy() {
		return &remote.WorkerError{Worker: c.s.Worker, Status: 503, Retryable: true, Message: "unhealthy: " + r.GetMessage()}
	}
	return nil
}

// Load implements remote.Client (GetLoads, summed over the data-parallel
// ranks; KVUsage is the fullest rank's).
func (c *Client) Load(ctx context.Context) (remote.Load, error) {
	r, err := c.api.GetLoads(ctx, &vllmpb.GetLoadsRequest{})
	if err != nil {
		return remote.Load{}, c.s.Err("GetLoads", err, false)
	}
	var l remote.Load
	for _, x := range r.GetLoads() {
		l.Running += int(x.GetNumRunningReqs())
		l.Waiting += int(x.GetNumWaitingReqs())
		l.KVUsage = max(l.KVUsage, x.GetTokenUsage())
		l.Capacity += int(x.GetMaxRunningRequests())
	}
	return l, nil
}

// TokenizerFiles implements remote.Client (GetTokenizer).
func (c *Client) TokenizerFiles(ctx context.Context) (map[string][]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.api.GetTokenizer(ctx, &commonpb.GetTokenizerRequest{}, grpc.MaxCallRecvMsgSize(grpcworker.MaxTokenizerBytes))
	if err != nil {
		return nil, c.s.Err("GetTokenizer", err, false)
	}
	files, err := grpcworker.TokenizerFiles(st.Recv)
	if err != nil {
		return nil, c.s.Err("GetTokenizer", err, false)
	}
	return files, nil
}

// Embed implements remote.Embedder (Embed).
func (c *Client) Embed(ctx context.Context, id string, prompt []int32) (*remote.Embedding, error) {
	r, err := c.api.Embed(ctx, &vllmpb.EmbedRequest{RequestId: id, Tokenized: &vllmpb.TokenizedInput{InputIds: uint32s(prompt)}})
	if err != nil {
		return nil, c.s.Err("Embed", err, false)
	}
	return &remote.Embedding{Vector: r.GetEmbedding(), PromptTokens: int(r.GetPromptTokens())}, nil
}

// Close implements remote.Client: every call ends (its End has an error),
// then the connection. Not from a Receiver's method.
func (c *Client) Close() error { return c.s.Close() }
