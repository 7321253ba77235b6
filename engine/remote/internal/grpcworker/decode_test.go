package grpcworker

import (
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/vajra-go/vajra/engine/remote/sglang/sglangpb"
	"github.com/vajra-go/vajra/engine/remote/vllm/vllmpb"
)

var vllmFields = FieldsOf((&vllmpb.GenerateResponse{}).ProtoReflect().Descriptor())

// TestFieldsOf: the numbers come from the generated descriptors, the
// .proto files' own (vLLM's and SGLang's differ), and a descriptor that
// lacks a field the decoder reads is refused at once.
func TestFieldsOf(t *testing.T) {
	sg := FieldsOf((&sglangpb.GenerateResponse{}).ProtoReflect().Descriptor())
	if vllmFields.Chunk != 1 || vllmFields.ChunkIndex != 7 || vllmFields.DoneMatchedToken != 10 || vllmFields.InValue != 1 ||
		sg.Chunk != 2 || sg.ChunkInputLogprobs != 7 || sg.DoneIndex != 11 || sg.DoneMatchedToken != 8 {
		t.Fatalf("vllm %+v\nsglang %+v", vllmFields, sg)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("FieldsOf of a message without the fields did not panic")
		}
	}()
	FieldsOf((&vllmpb.TopLogProbs{}).ProtoReflect().Descriptor())
}

func vllmChunk() *vllmpb.GenerateResponse {
	return &vllmpb.GenerateResponse{Response: &vllmpb.GenerateResponse_Chunk{Chunk: &vllmpb.GenerateStreamChunk{
		TokenIds: []uint32{11, 300000}, PromptTokens: 7, CompletionTokens: 2, CachedTokens: 3, Index: 1,
		OutputLogprobs: &vllmpb.OutputLogProbs{
			TokenLogprobs: []float32{-0.5, -1.25}, TokenIds: []uint32{11, 300000},
			TopLogprobs: []*vllmpb.TopLogProbs{
				{Values: []float32{-0.5, -2}, TokenIds: []uint32{11, 12}},
				{Values: []float32{-1.25, -3}, TokenIds: []uint32{300000, 5}},
			},
		},
	}}}
}

// TestDecodeMatchesGenerated decodes what the generated code marshals.
func TestDecodeMatchesGenerated(t *testing.T) {
	b, err := proto.Marshal(vllmChunk())
	if err != nil {
		t.Fatal(err)
	}
	r := NewResponse(&vllmFields)
	if err := r.Decode(b); err != nil {
		t.Fatal(err)
	}
	if r.Kind != KindChunk || r.Index != 1 || len(r.TokenIDs) != 2 || r.TokenIDs[1] != 300000 || r.PromptTokens != 7 ||
		r.Cached != 3 || r.CompletionTokens != 2 || len(r.Logprobs) != 2 || r.Logprobs[1] != -1.25 || len(r.Top) != 2 ||
		r.Top[1][0].TokenID != 300000 || r.Top[1][1].Logprob != -3 || r.PromptLogprobs != nil {
		t.Fatalf("decoded %+v", r)
	}
	lp := float32(-0.75)
	done := &vllmpb.GenerateResponse{Response: &vllmpb.GenerateResponse_Complete{Complete: &vllmpb.GenerateComplete{
		OutputIds: []uint32{9}, FinishReason: "stop", PromptTokens: 4, CompletionTokens: 1, CachedTokens: 2, Index: 0,
		MatchedStop: &vllmpb.GenerateComplete_MatchedTokenId{MatchedTokenId: 9},
		InputLogprobs: &vllmpb.InputLogProbs{
			TokenLogprobs: []*vllmpb.InputTokenLogProb{{}, {Value: &lp}}, TokenIds: []uint32{1, 2},
			TopLogprobs: []*vllmpb.TopLogProbs{{}, {Values: []float32{-0.75}, TokenIds: []uint32{2}}},
		},
	}}}
	b, _ = proto.Marshal(done)
	if err := r.Decode(b); err != nil {
		t.Fatal(err)
	}
	if r.Kind != KindComplete || r.FinishReason != "stop" || r.MatchedTokenID != 9 || r.PromptTokens != 4 || len(r.TokenIDs) != 1 ||
		len(r.Logprobs) != 0 || len(r.Top) != 0 || len(r.PromptLogprobs) != 2 || r.PromptLogprobs[0].Logprob != 0 ||
		r.PromptLogprobs[0].Top != nil || r.PromptLogprobs[1].Logprob != -0.75 || r.PromptLogprobs[1].Top[0].TokenID != 2 {
		t.Fatalf("decoded %+v", r)
	}
	// SGLang's numbers, with its request_id and reasoning_tokens skipped.
	sgl := FieldsOf((&sglangpb.GenerateResponse{}).ProtoReflect().Descriptor())
	b, _ = proto.Marshal(&sglangpb.GenerateResponse{RequestId: "x", Response: &sglangpb.GenerateResponse_Chunk{Chunk: &sglangpb.GenerateStreamChunk{
		TokenIds: []uint32{5, 6}, ReasoningTokens: 3, Index: 2, HiddenStates: []float32{1, 2}}}})
	r = NewResponse(&sgl)
	if err := r.Decode(b); err != nil || r.Kind != KindChunk || r.Index != 2 || len(r.TokenIDs) != 2 || r.TokenIDs[0] != 5 {
		t.Fatalf("sglang decoded %+v %v", r, err)
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	r := NewResponse(&vllmFields)
	b, _ := proto.Marshal(vllmChunk())
	for i := 1; i < len(b); i++ {
		r.Decode(b[:i]) // must not panic; a truncated message errs or decodes less
	}
	if err := r.Decode([]byte{0x0a, 0x7f}); err == nil {
		t.Error("a length past the end: nil error")
	}
}

// TestDecodeAllocs: the codec's decode of a chunk with logprobs allocates
// nothing once the response's buffers have grown.
func TestDecodeAllocs(t *testing.T) {
	b, _ := proto.Marshal(vllmChunk())
	r := NewResponse(&vllmFields)
	var c Codec
	one := mem.BufferSlice{mem.SliceBuffer(b)}
	split := mem.BufferSlice{mem.SliceBuffer(b[:5]), mem.SliceBuffer(b[5:])}
	for _, data := range []mem.BufferSlice{one, split} {
		if err := c.Unmarshal(data, r); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(1000, func() { c.Unmarshal(data, r) }); n != 0 {
			t.Errorf("%d buffers: %v allocations per decode, want 0", len(data), n)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	buf, _ := proto.Marshal(vllmChunk())
	data := mem.BufferSlice{mem.SliceBuffer(buf)}
	b.Run("inplace", func(b *testing.B) {
		r := NewResponse(&vllmFields)
		var c Codec
		b.ReportAllocs()
		for b.Loop() {
			c.Unmarshal(data, r)
		}
	})
	b.Run("proto", func(b *testing.B) {
		var m vllmpb.GenerateResponse
		b.ReportAllocs()
		for b.Loop() {
			protoCodec.Unmarshal(data, &m)
		}
	})
}
