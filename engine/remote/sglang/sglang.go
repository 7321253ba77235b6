// Package sglang is the remote.Client of an SGLang worker: the gRPC service
// SGLang serves with --grpc-mode, sglang.grpc.scheduler.SglangScheduler
// (smg-grpc-proto 0.4.28's sglang_scheduler.proto; generated code in
// sglangpb). Worker URLs are sglang://HOST:PORT.
//
// The machinery is vLLM's (engine/remote/internal/grpcworker): one
// grpc.ClientConn per worker, a server stream per request decoded in place,
// an explicit Abort RPC. It has been tested against a Go server written
// from the proto (internal/testworker), never against a real
// SGLang, which has no CPU build.
package sglang

import (
	"context"
	"strconv"
	"unsafe"

	"google.golang.org/grpc"

	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/engine/remote/commonpb"
	"github.com/vajra-go/vajra/engine/remote/internal/grpcworker"
	"github.com/vajra-go/vajra/engine/remote/sglang/sglangpb"
)

// Scheme is the worker URL scheme of this protocol.
const Scheme = "sglang"

// Options tune a client's connection; the zero value takes the defaults.
type Options = grpcworker.Options

// Client is an SGLang worker's remote.Client and remote.Embedder. Safe for
// concurrent use.
type Client struct {
	s   *grpcworker.Session
	api sglangpb.SglangSchedulerClient
	gen grpcworker.Stream
}

var (
	_ remote.Client   = (*Client)(nil)
	_ remote.Embedder = (*Client)(nil)
)

// fields are sglang_scheduler.proto's GenerateResponse numbers.
var fields = grpcworker.FieldsOf((&sglangpb.GenerateResponse{}).ProtoReflect().Descriptor())

// Dial returns the client of the worker at url (sglang://HOST:PORT, or
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
	c := &Client{s: s, api: sglangpb.NewSglangSchedulerClient(s.Conn)}
	c.gen = grpcworker.Stream{Method: sglangpb.SglangScheduler_Generate_FullMethodName, Fields: &fields, Abort: c.abort,
		ChoiceID: grpcworker.ChoiceSuffix, Prefix: true}
	return c, nil
}

func init() { remote.Register(Scheme, Open) }

// Open is Dial as remote.Register takes it.
func Open(url string, o remote.DialOptions) (remote.Client, error) {
	return Dial(url, Options{ConnectTimeout: o.ConnectTimeout})
}

func (c *Client) abort(ctx context.Context, id string) error {
	_, err := c.api.Abort(ctx, &sglangpb.AbortRequest{RequestId: id, Reason: "aborted by the client"})
	return err
}

// WireID is the request id the worker is sent for the engine's id: id and
// a dot. SGLang's scheduler aborts every request whose id begins with the
// one named, so "vajra-1" would stop "vajra-10" too; no id ends in a dot
// but these, and "vajra-1." begins none but its own and its choices'
// ("vajra-1.-0", ..., SGLang's ids of the choices of an n > 1 request).
func WireID(id string) string { return id + "." }

// Generate implements remote.Client: one streamed Generate RPC with every
// sampling field set explicitly. Its Call is a remote.ChoiceAborter: one
// choice of an n > 1 request is stopped by an Abort of its own id (see
// grpcworker.Call.AbortChoice).
func (c *Client) Generate(ctx context.Context, g *remote.Generate, rx remote.Receiver) (remote.Call, error) {
	id := WireID(g.ID)
	req := &sglangpb.GenerateRequest{
		RequestId:      id,
		Tokenized:      &sglangpb.TokenizedInput{InputIds: uint32s(g.Prompt)},
		SamplingParams: Sampling(g),
		Stream:         true,
	}
	// One top_logprobs_num serves the output and the prompt.
	if g.Sampling.Logprobs || g.PromptLogprobs != 0 {
		req.ReturnLogprob = true
		req.TopLogprobsNum = int32(max(g.Sampling.TopLogprobs, g.PromptLogprobs, 0))
	}
	req.LogprobStartLen = -1 // output tokens only
	if g.PromptLogprobs != 0 {
		req.LogprobStartLen = 0
	}
	call, err := c.s.Generate(ctx, &c.gen, id, g.Sampling.Choices(), req, rx)
	if err != nil {
		return nil, err
	}
	return call, nil
}

func uint32s(p []int32) []uint32 {
	if len(p) == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&p[0])), len(p))
}

// Sampling returns the request's SamplingParams with every field explicit
// (the proto warns that its zeros are not SGLang's defaults): top_p and
// repetition_penalty 1 and top_k -1 when off. The proto has no seed: a
// request's seed does not reach SGLang. stream_interval stays unset (the
// worker's --stream-interval). Stop strings are the remote engine's.
func Sampling(g *remote.Generate) *sglangpb.SamplingParams {
	s := g.Sampling
	maxTokens := uint32(g.MaxTokens)
	topP := float32(s.TopP)
	if topP == 0 {
		topP = 1
	}
	rep := float32(s.RepetitionPenalty)
	if rep == 0 {
		rep = 1
	}
	topK := int32(-1)
	if s.TopK > 0 {
		topK = int32(s.TopK)
	}
	sp := &sglangpb.SamplingParams{
		Temperature:                float32(s.Temperature),
		TopP:                       topP,
		TopK:                       topK,
		MinP:                       float32(s.MinP),
		FrequencyPenalty:           float32(s.FrequencyPenalty),
		PresencePenalty:            float32(s.PresencePenalty),
		RepetitionPenalty:          rep,
		MaxNewTokens:               &maxTokens,
		SkipSpecialTokens:          !s.KeepSpecialTokens,
		SpacesBetweenSpecialTokens: !s.NoSpecialTokenSpaces,
		N:                          uint32(s.Choices()),
		MinNewTokens:               uint32(max(g.MinTokens, 0)),
		IgnoreEos:                  s.IgnoreEOS,
		NoStopTrim:                 false,
	}
	if len(s.StopTokenIDs) > 0 {
		sp.StopTokenIds = make([]uint32, len(s.StopTokenIDs))
		for i, id := range s.StopTokenIDs {
			sp.StopTokenIds[i] = uint32(id)
		}
	}
	if len(s.LogitBias) > 0 {
		sp.LogitBias = make(map[string]float32, len(s.LogitBias))
		for _, b := range s.LogitBias {
			sp.LogitBias[strconv.Itoa(b.TokenID)] = float32(b.Bias)
		}
	}
	// The grammar in xgrammar's dialect when there is one (remote.Constraint
	// says why), else the constraint as it came.
	switch c := &g.Constraint; {
	case c.EBNF != "":
		sp.Constraint = &sglangpb.SamplingParams_EbnfGrammar{EbnfGrammar: c.EBNF}
	case c.Kind == remote.ConstraintJSONObject:
		// SGLang's constraint has no json_object: any object's schema.
		sp.Constraint = &sglangpb.SamplingParams_JsonSchema{JsonSchema: `{"type":"object"}`}
	case c.Kind == remote.ConstraintJSONSchema:
		sp.Constraint = &sglangpb.SamplingParams_JsonSchema{JsonSchema: c.Value}
	case c.Kind == remote.ConstraintGrammar:
		sp.Constraint = &sglangpb.SamplingParams_EbnfGrammar{EbnfGrammar: c.Value}
	}
	return sp
}

// Info implements remote.Client (GetModelInfo).
func (c *Client) Info(ctx context.Context) (*remote.Info, error) {
	r, err := c.api.GetModelInfo(ctx, &sglangpb.GetModelInfoRequest{})
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
	r, err := c.api.HealthCheck(ctx, &sglangpb.HealthCheckRequest{})
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
	r, err := c.api.GetLoads(ctx, &sglangpb.GetLoadsRequest{Include: []string{"core"}})
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
	r, err := c.api.Embed(ctx, &sglangpb.EmbedRequest{RequestId: id, Tokenized: &sglangpb.TokenizedInput{InputIds: uint32s(prompt)}})
	if err != nil {
		return nil, c.s.Err("Embed", err, false)
	}
	return &remote.Embedding{Vector: r.GetEmbedding(), PromptTokens: int(r.GetPromptTokens())}, nil
}

// Close implements remote.Client: every call ends (its End has an error),
// then the connection. Not from a Receiver's method.
func (c *Client) Close() error { return c.s.Close() }
