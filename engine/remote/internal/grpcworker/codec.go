package grpcworker

import (
	"math"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the codec Codec falls back on
	"google.golang.org/grpc/mem"
)

// Codec is the gRPC codec of the worker calls: protobuf as grpc's own for
// every message but a *Response, which it decodes in place with
// Response.Decode, into the reused buffers of the call's receive loop
// (grpc's own codec resets and reallocates the message, its repeated fields
// and oneof wrappers, for every message received). Its Name is "proto", so
// the content-subtype on the wire is grpc's usual one.
type Codec struct{}

var protoCodec = encoding.GetCodecV2("proto")

func (Codec) Name() string { return "proto" }

func (Codec) Marshal(v any) (mem.BufferSlice, error) { return protoCodec.Marshal(v) }

func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	r, ok := v.(*Response)
	if !ok {
		return protoCodec.Unmarshal(data, v)
	}
	if len(data) == 1 {
		return r.Decode(data[0].ReadOnlyData())
	}
	// A message split over several buffers is copied into the response's
	// own scratch, which it keeps.
	r.scratch = r.scratch[:0]
	for _, b := range data {
		r.scratch = append(r.scratch, b.ReadOnlyData()...)
	}
	return r.Decode(r.scratch)
}

func float32frombits(u uint32) float32 { return math.Float32frombits(u) }
