package grpcworker

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/remote"
)

// Fields are the field numbers of one protocol's GenerateResponse and the
// messages in it. vLLM's and SGLang's have the same shape under different
// numbers, so one decoder reads both. FieldsOf reads them from the
// generated code's descriptors: the numbers are written once, in the
// .proto files.
type Fields struct {
	// GenerateResponse's oneof.
	Chunk, Complete protowire.Number
	// GenerateStreamChunk.
	ChunkTokenIDs, ChunkPrompt, ChunkCompletion, ChunkCached, ChunkOutputLogprobs, ChunkInputLogprobs, ChunkIndex protowire.Number
	// GenerateComplete.
	DoneOutputIDs, DoneFinish, DonePrompt, DoneCompletion, DoneCached, DoneOutputLogprobs, DoneInputLogprobs, DoneIndex, DoneMatchedToken, DoneMatchedStr protowire.Number
	// OutputLogProbs: token_logprobs, top_logprobs.
	OutLogprobs, OutTop protowire.Number
	// TopLogProbs: values, token_ids.
	TopValues, TopIDs protowire.Number
	// InputLogProbs: token_logprobs (InputTokenLogProb, whose value is
	// InValue), token_ids, top_logprobs.
	InLogprobs, InIDs, InTop, InValue protowire.Number
}

// FieldsOf reads the numbers of Fields by name from resp, a protocol's
// generated GenerateResponse descriptor (e.g.
// (&vllmpb.GenerateResponse{}).ProtoReflect().Descriptor()). It panics
// when a field is missing: the generated code and this decoder disagree,
// a programming error that the protocols' tests catch at init.
func FieldsOf(resp protoreflect.MessageDescriptor) Fields {
	field := func(m protoreflect.MessageDescriptor, name string) protoreflect.FieldDescriptor {
		fd := m.Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			panic("grpcworker: " + string(m.FullName()) + " has no field " + name)
		}
		return fd
	}
	num := func(m protoreflect.MessageDescriptor, name string) protowire.Number { return field(m, name).Number() }
	msg := func(m protoreflect.MessageDescriptor, name string) protoreflect.MessageDescriptor {
		md := field(m, name).Message()
		if md == nil {
			panic("grpcworker: " + string(m.FullName()) + "." + name + " is not a message")
		}
		return md
	}
	chunk, done := msg(resp, "chunk"), msg(resp, "complete")
	out, in := msg(chunk, "output_logprobs"), msg(chunk, "input_logprobs")
	top, inTok := msg(out, "top_logprobs"), msg(in, "token_logprobs")
	return Fields{
		Chunk: num(resp, "chunk"), Complete: num(resp, "complete"),
		ChunkTokenIDs: num(chunk, "token_ids"), ChunkPrompt: num(chunk, "prompt_tokens"), ChunkCompletion: num(chunk, "completion_tokens"),
		ChunkCached: num(chunk, "cached_tokens"), ChunkOutputLogprobs: num(chunk, "output_logprobs"),
		ChunkInputLogprobs: num(chunk, "input_logprobs"), ChunkIndex: num(chunk, "index"),
		DoneOutputIDs: num(done, "output_ids"), DoneFinish: num(done, "finish_reason"), DonePrompt: num(done, "prompt_tokens"),
		DoneCompletion: num(done, "completion_tokens"), DoneCached: num(done, "cached_tokens"),
		DoneOutputLogprobs: num(done, "output_logprobs"), DoneInputLogprobs: num(done, "input_logprobs"),
		DoneIndex: num(done, "index"), DoneMatchedToken: num(done, "matched_token_id"), DoneMatchedStr: num(done, "matched_stop_str"),
		OutLogprobs: num(out, "token_logprobs"), OutTop: num(out, "top_logprobs"),
		TopValues: num(top, "values"), TopIDs: num(top, "token_ids"),
		InLogprobs: num(in, "token_logprobs"), InIDs: num(in, "token_ids"), InTop: num(in, "top_logprobs"),
		InValue: num(inTok, "value"),
	}
}

// Kind says what one decoded response held.
type Kind uint8

const (
	KindNone Kind = iota
	KindChunk
	KindComplete
)

// Response is one GenerateResponse decoded into reused buffers: the
// receive loop's message. Decoding allocates nothing once the buffers have
// grown to the stream's chunk size, but for prompt logprobs (the first
// chunk of an echo request only).
type Response struct {
	f *Fields

	Kind  Kind
	Index int
	// TokenIDs is a chunk's token_ids or a complete's output_ids.
	TokenIDs                               []int32
	PromptTokens, CompletionTokens, Cached int
	// Logprobs and Top are the output logprobs (OutputLogProbs), one
	// entry per position; Top[i] is valid for i < len(Logprobs) only.
	Logprobs []float32
	Top      [][]remote.TopLogprob
	// PromptLogprobs (InputLogProbs), freshly allocated when present.
	PromptLogprobs []engine.TokenLogprob
	// A complete's finish.
	FinishReason   string
	MatchedTokenID int32 // -1 when none

	// scratch for a message that arrives in several buffers, and for the
	// two arrays of one TopLogProbs.
	scratch []byte
	vals    []float32
	ids     []int32
	tops    int
}

// NewResponse returns a Response that decodes by f.
func NewResponse(f *Fields) *Response { return &Response{f: f, MatchedTokenID: -1} }

var errBadMessage = errors.New("malformed GenerateResponse")

func (r *Response) reset() {
	r.Kind = KindNone
	r.Index = 0
	r.TokenIDs = r.TokenIDs[:0]
	r.PromptTokens, r.CompletionTokens, r.Cached = 0, 0, 0
	r.Logprobs = r.Logprobs[:0]
	r.tops = 0
	r.PromptLogprobs = nil
	r.FinishReason = ""
	r.MatchedTokenID = -1
}

// Decode parses one GenerateResponse. Unknown fields are skipped.
func (r *Response) Decode(b []byte) error {
	r.reset()
	f := r.f
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errBadMessage
		}
		b = b[n:]
		if typ == protowire.BytesType && (num == f.Chunk || num == f.Complete) {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errBadMessage
			}
			b = b[n:]
			var err error
			if num == f.Chunk {
				r.Kind = KindChunk
				err = r.chunk(v)
			} else {
				r.Kind = KindComplete
				err = r.complete(v)
			}
			if err != nil {
				return err
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return errBadMessage
		}
		b = b[n:]
	}
	r.Top = r.Top[:r.tops]
	return nil
}

func (r *Response) chunk(b []byte) error {
	f := r.f
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errBadMessage
		}
		b = b[n:]
		var err error
		switch {
		case num == f.ChunkTokenIDs:
			r.TokenIDs, n = appendVarints(r.TokenIDs, typ, b)
		case num == f.ChunkPrompt && typ == protowire.VarintType:
			n = consumeInt(&r.PromptTokens, b)
		case num == f.ChunkCompletion && typ == protowire.VarintType:
			n = consumeInt(&r.CompletionTokens, b)
		case num == f.ChunkCached && typ == protowire.VarintType:
			n = consumeInt(&r.Cached, b)
		case num == f.ChunkIndex && typ == protowire.VarintType:
			n = consumeInt(&r.Index, b)
		case num == f.ChunkOutputLogprobs && typ == protowire.BytesType:
			n, err = r.sub(b, r.outputLogprobs)
		case num == f.ChunkInputLogprobs && typ == protowire.BytesType:
			n, err = r.sub(b, r.inputLogprobs)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if err != nil {
			return err
		}
		if n < 0 {
			return errBadMessage
		}
		b = b[n:]
	}
	return nil
}

func (r *Response) complete(b []byte) error {
	f := r.f
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errBadMessage
		}
		b = b[n:]
		var err error
		switch {
		case num == f.DoneOutputIDs:
			r.TokenIDs, n = appendVarints(r.TokenIDs, typ, b)
		case num == f.DoneFinish && typ == protowire.BytesType:
			var v []byte
			v, n = protowire.ConsumeBytes(b)
			r.FinishReason = finishReason(v)
		case num == f.DonePrompt && typ == protowire.VarintType:
			n = consumeInt(&r.PromptTokens, b)
		case num == f.DoneCompletion && typ == protowire.VarintType:
			n = consumeInt(&r.CompletionTokens, b)
		case num == f.DoneCached && typ == protowire.VarintType:
			n = consumeInt(&r.Cached, b)
		case num == f.DoneIndex && typ == protowire.VarintType:
			n = consumeInt(&r.Index, b)
		case num == f.DoneMatchedToken && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			r.MatchedTokenID = int32(v)
		case num == f.DoneOutputLogprobs && typ == protowire.BytesType:
			n, err = r.sub(b, r.outputLogprobs)
		case num == f.DoneInputLogprobs && typ == protowire.BytesType:
			n, err = r.sub(b, r.inputLogprobs)
		default:
			// matched_stop_str among them: stop strings are the remote
			// engine's own, never sent to the worker.
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if err != nil {
			return err
		}
		if n < 0 {
			return errBadMessage
		}
		b = b[n:]
	}
	return nil
}

// sub decodes the length-delimited message at b with fn and returns the
// bytes it took.
func (r *Response) sub(b []byte, fn func([]byte) error) (int, error) {
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return n, nil
	}
	return n, fn(v)
}

// outputLogprobs reads OutputLogProbs: token_logprobs (packed float),
// token_ids, top_logprobs (TopLogProbs: values, token_ids).
func (r *Response) outputLogprobs(b []byte) error {
	f := r.f
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errBadMessage
		}
		b = b[n:]
		switch {
		case num == f.OutLogprobs:
			r.Logprobs, n = appendFloats(r.Logprobs, typ, b)
		case num == f.OutTop && typ == protowire.BytesType:
			var v []byte
			v, n = protowire.ConsumeBytes(b)
			if n >= 0 {
				if err := r.topRow(v); err != nil {
					return err
				}
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return errBadMessage
		}
		b = b[n:]
	}
	return nil
}

// topRow appends one TopLogProbs to Top, reusing the row that was there.
func (r *Response) topRow(b []byte) error {
	vals, ids, err := r.topArrays(b)
	if err != nil {
		return err
	}
	if r.tops == len(r.Top) {
		r.Top = append(r.Top, nil)
	}
	row := r.Top[r.tops][:0]
	for i := range min(len(vals), len(ids)) {
		row = append(row, remote.TopLogprob{TokenID: ids[i], Logprob: vals[i]})
	}
	r.Top[r.tops] = row
	r.tops++
	return nil
}

func (r *Response) topArrays(b []byte) ([]float32, []int32, error) {
	f := r.f
	r.vals, r.ids = r.vals[:0], r.ids[:0]
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, nil, errBadMessage
		}
		b = b[n:]
		switch num {
		case f.TopValues:
			r.vals, n = appendFloats(r.vals, typ, b)
		case f.TopIDs:
			r.ids, n = appendVarints(r.ids, typ, b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return nil, nil, errBadMessage
		}
		b = b[n:]
	}
	return r.vals, r.ids, nil
}

// inputLogprobs reads InputLogProbs: token_logprobs (InputTokenLogProb:
// optional float value; the first has none), token_ids, top_logprobs.
// Rare (echo with logprobs): it allocates.
func (r *Response) inputLogprobs(b []byte) error {
	f := r.f
	var lps []float32
	var ids []int32
	var tops [][]engine.TopLogprob
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errBadMessage
		}
		b = b[n:]
		switch {
		case num == f.InLogprobs && typ == protowire.BytesType:
			var v []byte
			v, n = protowire.ConsumeBytes(b)
			var lp float32
			for len(v) > 0 {
				fn, ft, m := protowire.ConsumeTag(v)
				if m < 0 {
					return errBadMessage
				}
				v = v[m:]
				if fn == f.InValue && ft == protowire.Fixed32Type {
					var u uint32
					u, m = protowire.ConsumeFixed32(v)
					lp = float32frombits(u)
				} else {
					m = protowire.ConsumeFieldValue(fn, ft, v)
				}
				if m < 0 {
					return errBadMessage
				}
				v = v[m:]
			}
			lps = append(lps, lp)
		case num == f.InIDs:
			ids, n = appendVarints(ids, typ, b)
		case num == f.InTop && typ == protowire.BytesType:
			var v []byte
			v, n = protowire.ConsumeBytes(b)
			if n >= 0 {
				vals, tids, err := r.topArrays(v)
				if err != nil {
					return err
				}
				row := make([]engine.TopLogprob, min(len(vals), len(tids)))
				for i := range row {
					row[i] = engine.TopLogprob{TokenID: int(tids[i]), Logprob: vals[i]}
				}
				tops = append(tops, row)
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return errBadMessage
		}
		b = b[n:]
	}
	out := make([]engine.TokenLogprob, len(ids))
	for i := range out {
		out[i].TokenID = int(ids[i])
		if i < len(lps) {
			out[i].Logprob = lps[i]
		}
		if i < len(tops) && len(tops[i]) > 0 {
			out[i].Top = tops[i]
		}
	}
	r.PromptLogprobs = out
	return nil
}

func consumeInt(dst *int, b []byte) int {
	v, n := protowire.ConsumeVarint(b)
	*dst = int(v)
	return n
}

// appendVarints appends a repeated uint32, packed or not.
func appendVarints(dst []int32, typ protowire.Type, b []byte) ([]int32, int) {
	switch typ {
	case protowire.VarintType:
		v, n := protowire.ConsumeVarint(b)
		return append(dst, int32(v)), n
	case protowire.BytesType:
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return dst, n
		}
		for len(v) > 0 {
			x, m := protowire.ConsumeVarint(v)
			if m < 0 {
				return dst, m
			}
			dst = append(dst, int32(x))
			v = v[m:]
		}
		return dst, n
	}
	return dst, -1
}

// appendFloats appends a repeated float, packed or not.
func appendFloats(dst []float32, typ protowire.Type, b []byte) ([]float32, int) {
	switch typ {
	case protowire.Fixed32Type:
		v, n := protowire.ConsumeFixed32(b)
		return append(dst, float32frombits(v)), n
	case protowire.BytesType:
		v, n := protowire.ConsumeBytes(b)
		if n < 0 || len(v)%4 != 0 {
			return dst, -1
		}
		for len(v) > 0 {
			x, _ := protowire.ConsumeFixed32(v)
			dst = append(dst, float32frombits(x))
			v = v[4:]
		}
		return dst, n
	}
	return dst, -1
}

// finishReason interns the worker's finish reason.
func finishReason(b []byte) string {
	switch string(b) {
	case "stop":
		return "stop"
	case "length":
		return "length"
	case "abort":
		return "abort"
	case "error":
		return "error"
	case "":
		return ""
	}
	return string(b)
}
