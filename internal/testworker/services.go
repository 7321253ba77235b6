package testworker

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sort"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/vajra-go/vajra/engine/remote/commonpb"
	"github.com/vajra-go/vajra/engine/remote/sglang/sglangpb"
	"github.com/vajra-go/vajra/engine/remote/vllm/vllmpb"
)

func statusErr(c codes.Code, msg string) error { return status.Error(c, msg) }

// VLLMRequests returns the GenerateRequests the vLLM service received.
func (w *Worker) VLLMRequests() []*vllmpb.GenerateRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*vllmpb.GenerateRequest, len(w.vllm))
	for i, r := range w.vllm {
		out[i] = r.(*vllmpb.GenerateRequest)
	}
	return out
}

// SGLangRequests returns the GenerateRequests the SGLang service received.
func (w *Worker) SGLangRequests() []*sglangpb.GenerateRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*sglangpb.GenerateRequest, len(w.sglang))
	for i, r := range w.sglang {
		out[i] = r.(*sglangpb.GenerateRequest)
	}
	return out
}

func (w *Worker) record(list *[]any, m proto.Message) {
	w.mu.Lock()
	*list = append(*list, proto.Clone(m))
	w.mu.Unlock()
}

// tokenizerZip is the Tokenizer files as GetTokenizer streams them: one
// ZIP archive in chunks of at most 64 KiB, its SHA-256 on the last.
func (w *Worker) tokenizerChunks(send func(*commonpb.GetTokenizerChunk) error) error {
	if len(w.cfg.Tokenizer) == 0 {
		return status.Error(codes.FailedPrecondition, "no tokenizer")
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	names := make([]string, 0, len(w.cfg.Tokenizer))
	for n := range w.cfg.Tokenizer {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f, err := zw.Create(n)
		if err != nil {
			return err
		}
		f.Write(w.cfg.Tokenizer[n])
	}
	if err := zw.Close(); err != nil {
		return err
	}
	data := buf.Bytes()
	sum := sha256.Sum256(data)
	const chunk = 64 << 10
	for off := 0; off < len(data); off += chunk {
		end := min(off+chunk, len(data))
		c := &commonpb.GetTokenizerChunk{Data: data[off:end]}
		if end == len(data) {
			c.Sha256 = hex.EncodeToString(sum[:])
		}
		if err := send(c); err != nil {
			return err
		}
	}
	return nil
}

func u32(v []int32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = uint32(x)
	}
	return out
}

// ---- vLLM

type vllmService struct {
	vllmpb.UnimplementedVllmEngineServer
	w *Worker
}

func (s *vllmService) Generate(req *vllmpb.GenerateRequest, st grpc.ServerStreamingServer[vllmpb.GenerateResponse]) error {
	w := s.w
	w.record(&w.vllm, req)
	sp := req.GetSamplingParams()
	r := &request{id: req.GetRequestId(), prompt: req.GetTokenized().GetInputIds(), n: int(max(sp.GetN(), 1)),
		maxTokens: 16, stop: map[int32]bool{}, logprobs: -1, promptLogprobs: -1}
	if sp.MaxTokens != nil {
		r.maxTokens = int(sp.GetMaxTokens())
	}
	for _, t := range sp.GetStopTokenIds() {
		r.stop[int32(t)] = true
	}
	if sp.Logprobs != nil {
		r.logprobs = int(sp.GetLogprobs())
	}
	if sp.PromptLogprobs != nil {
		r.promptLogprobs = int(sp.GetPromptLogprobs())
	}
	return w.generate(st.Context(), r, vllmSender{st})
}

type vllmSender struct {
	st grpc.ServerStreamingServer[vllmpb.GenerateResponse]
}

func outputLogprobs(r *request, d chunkData) *vllmpb.OutputLogProbs {
	if r.logprobs < 0 || len(d.tokens) == 0 {
		return nil
	}
	lp := &vllmpb.OutputLogProbs{}
	for i, t := range d.tokens {
		v := Logprob(d.choice, d.step0+i)
		lp.TokenLogprobs = append(lp.TokenLogprobs, v)
		lp.TokenIds = append(lp.TokenIds, uint32(t))
		if r.logprobs > 0 {
			top := &vllmpb.TopLogProbs{}
			for k := range r.logprobs {
				top.Values = append(top.Values, v-float32(k))
				top.TokenIds = append(top.TokenIds, uint32(t)+uint32(k))
			}
			lp.TopLogprobs = append(lp.TopLogprobs, top)
		}
	}
	return lp
}

func inputLogprobs(r *request) *vllmpb.InputLogProbs {
	if r.promptLogprobs < 0 {
		return nil
	}
	lp := &vllmpb.InputLogProbs{}
	for i, t := range r.prompt {
		e := &vllmpb.InputTokenLogProb{}
		top := &vllmpb.TopLogProbs{}
		if i > 0 {
			v := PromptLogprob(i)
			e.Value = &v
			for k := range r.promptLogprobs {
				top.Values = append(top.Values, v-float32(k))
				top.TokenIds = append(top.TokenIds, t+uint32(k))
			}
		}
		lp.TokenLogprobs = append(lp.TokenLogprobs, e)
		lp.TokenIds = append(lp.TokenIds, t)
		if r.promptLogprobs > 0 {
			lp.TopLogprobs = append(lp.TopLogprobs, top)
		}
	}
	return lp
}

func (s vllmSender) chunk(r *request, d chunkData, first bool) error {
	c := &vllmpb.GenerateStreamChunk{
		TokenIds: u32(d.tokens), PromptTokens: uint32(len(r.prompt)), CompletionTokens: uint32(len(d.tokens)),
		CachedTokens: uint32(len(r.prompt) / 2), OutputLogprobs: outputLogprobs(r, d), Index: uint32(d.choice),
	}
	if first {
		c.InputLogprobs = inputLogprobs(r)
	}
	return s.st.Send(&vllmpb.GenerateResponse{Response: &vllmpb.GenerateResponse_Chunk{Chunk: c}})
}

func (s vllmSender) complete(r *request, choice int, last chunkData, reason string, matched int32, completion int) error {
	// As vLLM's servicer: output_ids repeat the last chunk's tokens.
	c := &vllmpb.GenerateComplete{
		OutputIds: u32(last.tokens), FinishReason: reason, PromptTokens: uint32(len(r.prompt)),
		CompletionTokens: uint32(len(last.tokens)), CachedTokens: uint32(len(r.prompt) / 2), Index: uint32(choice),
	}
	if matched >= 0 {
		c.MatchedStop = &vllmpb.GenerateComplete_MatchedTokenId{MatchedTokenId: uint32(matched)}
	}
	return s.st.Send(&vllmpb.GenerateResponse{Response: &vllmpb.GenerateResponse_Complete{Complete: c}})
}

func (s *vllmService) Abort(_ context.Context, req *vllmpb.AbortRequest) (*vllmpb.AbortResponse, error) {
	for _, id := range req.GetRequestIds() {
		s.w.abort(id)
	}
	return &vllmpb.AbortResponse{}, nil
}

func (s *vllmService) HealthCheck(context.Context, *vllmpb.HealthCheckRequest) (*vllmpb.HealthCheckResponse, error) {
	return &vllmpb.HealthCheckResponse{Healthy: true, Message: "Health"}, nil
}

func (s *vllmService) GetModelInfo(context.Context, *vllmpb.GetModelInfoRequest) (*vllmpb.GetModelInfoResponse, error) {
	c := s.w.cfg
	return &vllmpb.GetModelInfoResponse{
		ModelPath: "/models/" + c.ServedName, IsGeneration: !c.Embedding, MaxContextLength: uint32(c.ContextLength),
		VocabSize: 128256, ServedModelName: c.ServedName, EosTokenIds: c.EOS, BosTokenId: 1,
	}, nil
}

func (s *vllmService) GetLoads(context.Context, *vllmpb.GetLoadsRequest) (*vllmpb.GetLoadsResponse, error) {
	return &vllmpb.GetLoadsResponse{DpRankCount: 1, Loads: []*vllmpb.SchedulerLoad{{
		NumRunningReqs: int32(s.w.Running()), TokenUsage: 0.25, MaxRunningRequests: 64,
	}}}, nil
}

func (s *vllmService) GetTokenizer(_ *commonpb.GetTokenizerRequest, st grpc.ServerStreamingServer[commonpb.GetTokenizerChunk]) error {
	return s.w.tokenizerChunks(st.Send)
}

// EmbedVector is the test worker's vLLM embedding of ids (not
// normalised): element k sums the ids at positions i with i%4 == k.
func EmbedVector(ids []uint32) []float32 {
	v := make([]float32, 4)
	for i, t := range ids {
		v[i%4] += float32(t)
	}
	return v
}

func (s *vllmService) Embed(_ context.Context, req *vllmpb.EmbedRequest) (*vllmpb.EmbedResponse, error) {
	defer s.w.embedStart(req.GetRequestId())()
	if c := s.w.cfg.EmbedRefuse; c != 0 {
		return nil, statusErr(c, "refused by the test worker")
	}
	ids := req.GetTokenized().GetInputIds()
	return &vllmpb.EmbedResponse{Embedding: EmbedVector(ids), PromptTokens: uint32(len(ids)), EmbeddingDim: 4}, nil
}

// ---- SGLang

type sglangService struct {
	sglangpb.UnimplementedSglangSchedulerServer
	w *Worker
}

func (s *sglangService) Generate(req *sglangpb.GenerateRequest, st grpc.ServerStreamingServer[sglangpb.GenerateResponse]) error {
	w := s.w
	w.record(&w.sglang, req)
	sp := req.GetSamplingParams()
	r := &request{id: req.GetRequestId(), prompt: req.GetTokenized().GetInputIds(), n: int(max(sp.GetN(), 1)),
		maxTokens: 16, stop: map[int32]bool{}, logprobs: -1, promptLogprobs: -1, sglang: true}
	if sp.MaxNewTokens != nil {
		r.maxTokens = int(sp.GetMaxNewTokens())
	}
	for _, t := range sp.GetStopTokenIds() {
		r.stop[int32(t)] = true
	}
	if req.GetReturnLogprob() {
		r.logprobs = int(req.GetTopLogprobsNum())
		if req.GetLogprobStartLen() >= 0 {
			r.promptLogprobs = int(req.GetTopLogprobsNum())
		}
	}
	return w.generate(st.Context(), r, sglangSender{st})
}

type sglangSender struct {
	st grpc.ServerStreamingServer[sglangpb.GenerateResponse]
}

// The logprob messages have the same shape in both protos.
func sglOutput(l *vllmpb.OutputLogProbs) *sglangpb.OutputLogProbs {
	if l == nil {
		return nil
	}
	out := &sglangpb.OutputLogProbs{TokenLogprobs: l.TokenLogprobs, TokenIds: l.TokenIds}
	for _, t := range l.TopLogprobs {
		out.TopLogprobs = append(out.TopLogprobs, &sglangpb.TopLogProbs{Values: t.Values, TokenIds: t.TokenIds})
	}
	return out
}

func sglInput(l *vllmpb.InputLogProbs) *sglangpb.InputLogProbs {
	if l == nil {
		return nil
	}
	out := &sglangpb.InputLogProbs{TokenIds: l.TokenIds}
	for _, e := range l.TokenLogprobs {
		out.TokenLogprobs = append(out.TokenLogprobs, &sglangpb.InputTokenLogProb{Value: e.Value})
	}
	for _, t := range l.TopLogprobs {
		out.TopLogprobs = append(out.TopLogprobs, &sglangpb.TopLogProbs{Values: t.Values, TokenIds: t.TokenIds})
	}
	return out
}

func (s sglangSender) chunk(r *request, d chunkData, first bool) error {
	c := &sglangpb.GenerateStreamChunk{
		TokenIds: u32(d.tokens), PromptTokens: uint32(len(r.prompt)), CompletionTokens: uint32(d.step0 + len(d.tokens)),
		CachedTokens: uint32(len(r.prompt) / 2), OutputLogprobs: sglOutput(outputLogprobs(r, d)), Index: uint32(d.choice),
	}
	if first {
		c.InputLogprobs = sglInput(inputLogprobs(r))
	}
	return s.st.Send(&sglangpb.GenerateResponse{RequestId: r.id, Response: &sglangpb.GenerateResponse_Chunk{Chunk: c}})
}

func (s sglangSender) complete(r *request, choice int, last chunkData, reason string, matched int32, completion int) error {
	// As SGLang's servicer: the complete repeats the last output's tokens,
	// with the cumulative count.
	c := &sglangpb.GenerateComplete{
		OutputIds: u32(last.tokens), FinishReason: reason, PromptTokens: uint32(len(r.prompt)),
		CompletionTokens: uint32(completion), CachedTokens: uint32(len(r.prompt) / 2), Index: uint32(choice),
	}
	if matched >= 0 {
		c.MatchedStop = &sglangpb.GenerateComplete_MatchedTokenId{MatchedTokenId: uint32(matched)}
	}
	return s.st.Send(&sglangpb.GenerateResponse{RequestId: r.id, Response: &sglangpb.GenerateResponse_Complete{Complete: c}})
}

func (s *sglangService) Abort(_ context.Context, req *sglangpb.AbortRequest) (*sglangpb.AbortResponse, error) {
	s.w.abortSGLang(req.GetRequestId())
	return &sglangpb.AbortResponse{Success: true}, nil
}

func (s *sglangService) HealthCheck(context.Context, *sglangpb.HealthCheckRequest) (*sglangpb.HealthCheckResponse, error) {
	return &sglangpb.HealthCheckResponse{Healthy: true}, nil
}

func (s *sglangService) GetModelInfo(context.Context, *sglangpb.GetModelInfoRequest) (*sglangpb.GetModelInfoResponse, error) {
	c := s.w.cfg
	return &sglangpb.GetModelInfoResponse{
		ModelPath: "/models/" + c.ServedName, IsGeneration: !c.Embedding, MaxContextLength: int32(c.ContextLength),
		VocabSize: 128256, ServedModelName: c.ServedName, EosTokenIds: c.EOS, BosTokenId: 1,
	}, nil
}

func (s *sglangService) GetLoads(context.Context, *sglangpb.GetLoadsRequest) (*sglangpb.GetLoadsResponse, error) {
	return &sglangpb.GetLoadsResponse{DpRankCount: 1, Loads: []*sglangpb.SchedulerLoad{{
		NumRunningReqs: int32(s.w.Running()), TokenUsage: 0.5, MaxRunningRequests: 32,
	}}}, nil
}

func (s *sglangService) GetTokenizer(_ *commonpb.GetTokenizerRequest, st grpc.ServerStreamingServer[commonpb.GetTokenizerChunk]) error {
	return s.w.tokenizerChunks(st.Send)
}

func (s *sglangService) Embed(_ context.Context, req *sglangpb.EmbedRequest) (*sglangpb.EmbedResponse, error) {
	defer s.w.embedStart(req.GetRequestId())()
	ids := req.GetTokenized().GetInputIds()
	return &sglangpb.EmbedResponse{Embedding: []float32{float32(len(ids))}, PromptTokens: uint32(len(ids)), EmbeddingDim: 1}, nil
}
