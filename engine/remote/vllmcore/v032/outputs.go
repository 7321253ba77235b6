package v032

import (
	"encoding/binary"
	"math"

	"github.com/tinylib/msgp/msgp"
)

// Outputs is one EngineCoreOutputs message, decoded in place: every []byte
// in it is a view into the received frames and every slice is reused by
// the next Decode. Zero value ready; not safe for concurrent use.
type Outputs struct {
	EngineIndex int
	Outputs     []Output
	// Stats is the engine's SchedulerStats, when HasStats.
	Stats     Stats
	HasStats  bool
	Timestamp float64
	// Utility is the answer to a utility call, when HasUtility.
	Utility    UtilityOutput
	HasUtility bool
	// Finished lists request ids the engine finished on its own (aborts
	// it was told of, in the data-parallel case).
	Finished [][]byte
	// WaveComplete and StartWave are the data-parallel wave fields, -1
	// when absent.
	WaveComplete int
	StartWave    int

	n int // outputs in use
}

// Output is one request's EngineCoreOutput.
type Output struct {
	RequestID []byte
	TokenIDs  []int32
	// Logprobs of the new tokens (new_logprobs), when Logprobs.Rows > 0.
	Logprobs Logprobs
	// PromptLogprobs (new_prompt_logprobs_tensors), when Rows > 0.
	PromptLogprobs Logprobs
	FinishReason   int8
	// StopReason is the stop token id that ended the request (StopToken
	// >= 0), or the stop string (StopString), when FinishReason is
	// FinishStop for a reason other than EOS.
	StopToken  int64
	StopString []byte
	// Prefill counts, when HasPrefill (the request's first output):
	// prompt tokens, and how many of them the prefix cache held.
	HasPrefill    bool
	PromptTokens  int
	CachedTokens  int
	NumNaNsLogits int
}

// Logprobs is LogprobsLists or LogprobsTensors flattened: Rows positions,
// Cols entries each (the sampled or scored token first, then the top
// alternatives), and the sampled token's rank per row.
type Logprobs struct {
	Rows, Cols int
	TokenIDs   []int32
	Logprobs   []float32
	Ranks      []int32

	arrs [3]Array // scratch, so that decoding does not allocate
}

// Stats is the part of SchedulerStats a front end reads.
type Stats struct {
	Running        int
	Waiting        int
	SkippedWaiting int
	StepCounter    int
	CurrentWave    int
	KVCacheUsage   float64
	// Prefix cache counters of this step (PrefixCacheStats).
	PrefixRequests int
	PrefixQueries  int
	PrefixHits     int
	PrefixReset    bool
}

// UtilityOutput answers a utility call: Failure is the error message when
// the call failed; Result the msgpack value it returned.
type UtilityOutput struct {
	CallID  int64
	Failure []byte
	Result  []byte
}

// Decode reads frames[0] as EngineCoreOutputs; arrays sent out of line are
// read from frames[1:]. It allocates nothing once o's slices have grown to
// the message's size.
func (o *Outputs) Decode(frames [][]byte) error {
	if len(frames) == 0 {
		return bad("no frames")
	}
	b := frames[0]
	o.EngineIndex, o.HasStats, o.Timestamp, o.HasUtility = 0, false, 0, false
	o.Finished = o.Finished[:0]
	o.WaveComplete, o.StartWave = -1, -1
	o.n = 0
	n, b, err := readArray(b)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if isNil(b) {
			b = b[1:]
			continue
		}
		var v int64
		switch i {
		case 0:
			v, b, err = readInt(b)
			o.EngineIndex = int(v)
		case 1:
			b, err = o.outputs(b, frames)
		case 2:
			o.HasStats = true
			b, err = o.Stats.decode(b)
		case 3:
			o.Timestamp, b, err = readFloat(b)
		case 4:
			o.HasUtility = true
			b, err = o.Utility.decode(b)
		case 5:
			var m int
			if m, b, err = readArray(b); err != nil {
				break
			}
			for ; m > 0 && err == nil; m-- {
				var s []byte
				s, b, err = readStr(b)
				o.Finished = append(o.Finished, s)
			}
		case 6:
			v, b, err = readInt(b)
			o.WaveComplete = int(v)
		case 7:
			v, b, err = readInt(b)
			o.StartWave = int(v)
		default: // weight_version and fields of later releases
			b, err = skip(b)
		}
		if err != nil {
			return err
		}
	}
	o.Outputs = o.Outputs[:o.n]
	return nil
}

func (o *Outputs) outputs(b []byte, frames [][]byte) ([]byte, error) {
	n, b, err := readArray(b)
	if err != nil {
		return b, err
	}
	for ; n > 0; n-- {
		if o.n == len(o.Outputs) {
			if o.n < cap(o.Outputs) {
				o.Outputs = o.Outputs[:o.n+1]
			} else {
				o.Outputs = append(o.Outputs, Output{})
			}
		}
		out := &o.Outputs[o.n]
		o.n++
		if b, err = out.decode(b, frames); err != nil {
			return b, err
		}
	}
	return b, nil
}

func (out *Output) decode(b []byte, frames [][]byte) ([]byte, error) {
	out.RequestID = nil
	out.TokenIDs = out.TokenIDs[:0]
	out.Logprobs.reset()
	out.PromptLogprobs.reset()
	out.FinishReason = NoFinish
	out.StopToken, out.StopString = -1, nil
	out.HasPrefill, out.PromptTokens, out.CachedTokens, out.NumNaNsLogits = false, 0, 0, 0
	n, b, err := readArray(b)
	if err != nil {
		return b, err
	}
	if n < 2 {
		return b, bad("EngineCoreOutput of %d fields", n)
	}
	for i := 0; i < n; i++ {
		if isNil(b) && i != 0 {
			b = b[1:]
			continue
		}
		var v int64
		switch i {
		case 0:
			out.RequestID, b, err = readStr(b)
		case 1:
			var m int
			if m, b, err = readArray(b); err != nil {
				break
			}
			for ; m > 0 && err == nil; m-- {
				v, b, err = readInt(b)
				out.TokenIDs = append(out.TokenIDs, int32(v))
			}
		case 2:
			b, err = out.Logprobs.decode(b, frames)
		case 3:
			b, err = out.PromptLogprobs.decode(b, frames)
		case 5:
			v, b, err = readInt(b)
			if err == nil && (v < 0 || v > int64(FinishRepetition)) {
				err = bad("finish reason %d", v)
			}
			out.FinishReason = int8(v)
		case 6:
			if msgp.NextType(b) == msgp.StrType {
				out.StopString, b, err = readStr(b)
			} else {
				out.StopToken, b, err = readInt(b)
			}
		case 11:
			b, err = out.prefill(b)
		case 13:
			v, b, err = readInt(b)
			out.NumNaNsLogits = int(v)
		default:
			b, err = skip(b)
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

// prefill reads PrefillStats (a dataclass: a map).
func (out *Output) prefill(b []byte) ([]byte, error) {
	n, b, err := readMap(b)
	if err != nil {
		return b, err
	}
	out.HasPrefill = true
	for ; n > 0; n-- {
		var k []byte
		if k, b, err = readStr(b); err != nil {
			return b, err
		}
		var v int64
		switch string(k) {
		case "num_prompt_tokens":
			v, b, err = readInt(b)
			out.PromptTokens = int(v)
		case "num_cached_tokens":
			v, b, err = readInt(b)
			out.CachedTokens = int(v)
		default:
			b, err = skip(b)
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

func (l *Logprobs) reset() {
	l.Rows, l.Cols = 0, 0
	l.TokenIDs, l.Logprobs, l.Ranks = l.TokenIDs[:0], l.Logprobs[:0], l.Ranks[:0]
}

// decode reads [token_ids, logprobs, ranks, cu_num_generated_tokens, ...]
// (a NamedTuple: an array), each of the first three an ndarray or tensor.
func (l *Logprobs) decode(b []byte, frames [][]byte) ([]byte, error) {
	n, b, err := readArray(b)
	if err != nil {
		return b, err
	}
	if n < 3 {
		return b, bad("logprobs of %d fields", n)
	}
	ids, lps, ranks := &l.arrs[0], &l.arrs[1], &l.arrs[2]
	if b, err = ids.decode(b, frames); err != nil {
		return b, err
	}
	if b, err = lps.decode(b, frames); err != nil {
		return b, err
	}
	if b, err = ranks.decode(b, frames); err != nil {
		return b, err
	}
	for i := 3; i < n; i++ {
		if b, err = skip(b); err != nil {
			return b, err
		}
	}
	rows, cols := ids.Shape[0], 1
	if ids.NDim == 2 {
		cols = ids.Shape[1]
	}
	if ids.NDim < 1 || ids.NDim > 2 || lps.Shape != ids.Shape || lps.NDim != ids.NDim || ranks.NDim != 1 || ranks.Shape[0] != rows {
		return b, bad("logprobs arrays of shapes %v, %v, %v", ids.Shape[:ids.NDim], lps.Shape[:lps.NDim], ranks.Shape[:ranks.NDim])
	}
	l.Rows, l.Cols = rows, cols
	if l.TokenIDs, err = ids.AppendInts(l.TokenIDs[:0]); err != nil {
		return b, err
	}
	if l.Logprobs, err = lps.AppendFloats(l.Logprobs[:0]); err != nil {
		return b, err
	}
	if l.Ranks, err = ranks.AppendInts(l.Ranks[:0]); err != nil {
		return b, err
	}
	return b, nil
}

// Array is an ndarray or tensor as vLLM's encoder writes it: [dtype,
// shape, data], data inline (ext type 3) or the index of an extra frame.
type Array struct {
	// DType is numpy's ("<i4", "<f4") or torch's ("int32", "float32").
	DType []byte
	Shape [4]int
	NDim  int
	Data  []byte
}

// extRawView is serial_utils.CUSTOM_TYPE_RAW_VIEW.
const extRawView = 3

func (a *Array) decode(b []byte, frames [][]byte) ([]byte, error) {
	n, b, err := readArray(b)
	if err != nil {
		return b, err
	}
	if n != 3 {
		return b, bad("array of %d fields (want dtype, shape, data)", n)
	}
	if a.DType, b, err = readStr(b); err != nil {
		return b, err
	}
	var nd int
	if nd, b, err = readArray(b); err != nil {
		return b, err
	}
	if nd > len(a.Shape) {
		return b, bad("array of %d dimensions", nd)
	}
	a.NDim = nd
	a.Shape = [4]int{}
	for i := 0; i < nd; i++ {
		var v int64
		if v, b, err = readInt(b); err != nil {
			return b, err
		}
		if v < 0 || v > 1<<31 {
			return b, bad("array dimension %d", v)
		}
		a.Shape[i] = int(v)
	}
	switch t := msgp.NextType(b); {
	case isExt(b):
		var typ int8
		typ, a.Data, b, err = readExt(b)
		if err == nil && typ != extRawView {
			err = bad("array data of extension type %d", typ)
		}
	case t == msgp.IntType || t == msgp.UintType:
		var v int64
		v, b, err = readInt(b)
		if err == nil && (v < 1 || v >= int64(len(frames))) {
			err = bad("array data in frame %d of %d", v, len(frames))
		}
		if err == nil {
			a.Data = frames[v]
		}
	case t == msgp.BinType:
		a.Data, b, err = msgp.ReadBytesZC(b)
	default:
		err = bad("array data of type %s", t)
	}
	if err != nil {
		return b, err
	}
	count := 1
	for i := 0; i < nd; i++ {
		count *= a.Shape[i]
	}
	if w := a.width(); w == 0 || len(a.Data) != count*w {
		return b, bad("array %s%v of %d bytes", a.DType, a.Shape[:nd], len(a.Data))
	}
	return b, nil
}

func isExt(b []byte) bool {
	return len(b) > 0 && (b[0] >= 0xd4 && b[0] <= 0xd8 || b[0] >= 0xc7 && b[0] <= 0xc9)
}

// readExt reads an extension value in place.
func readExt(b []byte) (int8, []byte, []byte, error) {
	if len(b) < 2 {
		return 0, nil, b, bad("short extension")
	}
	var size, hdr int
	switch b[0] {
	case 0xd4:
		size, hdr = 1, 1
	case 0xd5:
		size, hdr = 2, 1
	case 0xd6:
		size, hdr = 4, 1
	case 0xd7:
		size, hdr = 8, 1
	case 0xd8:
		size, hdr = 16, 1
	case 0xc7:
		size, hdr = int(b[1]), 2
	case 0xc8:
		if len(b) < 3 {
			return 0, nil, b, bad("short extension")
		}
		size, hdr = int(binary.BigEndian.Uint16(b[1:])), 3
	case 0xc9:
		if len(b) < 5 {
			return 0, nil, b, bad("short extension")
		}
		size, hdr = int(binary.BigEndian.Uint32(b[1:])), 5
	default:
		return 0, nil, b, bad("not an extension")
	}
	if len(b) < hdr+1+size {
		return 0, nil, b, bad("extension of %d bytes truncated", size)
	}
	return int8(b[hdr]), b[hdr+1 : hdr+1+size], b[hdr+1+size:], nil
}

// width is the element size of a's dtype, 0 when unknown.
func (a *Array) width() int {
	switch string(a.DType) {
	case "<i4", "int32", "<f4", "float32", "<u4", "uint32":
		return 4
	case "<i8", "int64", "<f8", "float64":
		return 8
	}
	return 0
}

// AppendInts appends a's elements, integers, as int32.
func (a *Array) AppendInts(dst []int32) ([]int32, error) {
	d := a.Data
	switch string(a.DType) {
	case "<i4", "int32", "<u4", "uint32":
		for i := 0; i+4 <= len(d); i += 4 {
			dst = append(dst, int32(binary.LittleEndian.Uint32(d[i:])))
		}
	case "<i8", "int64":
		for i := 0; i+8 <= len(d); i += 8 {
			dst = append(dst, int32(int64(binary.LittleEndian.Uint64(d[i:]))))
		}
	default:
		return dst, bad("integer array of dtype %s", a.DType)
	}
	return dst, nil
}

// AppendFloats appends a's elements, floats, as float32.
func (a *Array) AppendFloats(dst []float32) ([]float32, error) {
	d := a.Data
	switch string(a.DType) {
	case "<f4", "float32":
		for i := 0; i+4 <= len(d); i += 4 {
			dst = append(dst, math.Float32frombits(binary.LittleEndian.Uint32(d[i:])))
		}
	case "<f8", "float64":
		for i := 0; i+8 <= len(d); i += 8 {
			dst = append(dst, float32(math.Float64frombits(binary.LittleEndian.Uint64(d[i:]))))
		}
	default:
		return dst, bad("float array of dtype %s", a.DType)
	}
	return dst, nil
}

func (s *Stats) decode(b []byte) ([]byte, error) {
	*s = Stats{}
	n, b, err := readMap(b)
	if err != nil {
		return b, err
	}
	for ; n > 0; n-- {
		var k []byte
		if k, b, err = readStr(b); err != nil {
			return b, err
		}
		var ip *int
		switch string(k) {
		case "num_running_reqs":
			ip = &s.Running
		case "num_waiting_reqs":
			ip = &s.Waiting
		case "num_skipped_waiting_reqs":
			ip = &s.SkippedWaiting
		case "step_counter":
			ip = &s.StepCounter
		case "current_wave":
			ip = &s.CurrentWave
		case "kv_cache_usage":
			s.KVCacheUsage, b, err = readFloat(b)
		case "prefix_cache_stats":
			b, err = s.prefix(b)
		default:
			b, err = skip(b)
		}
		if ip != nil {
			var v int64
			v, b, err = readInt(b)
			*ip = int(v)
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

func (s *Stats) prefix(b []byte) ([]byte, error) {
	if isNil(b) {
		return b[1:], nil
	}
	n, b, err := readMap(b)
	if err != nil {
		return b, err
	}
	for ; n > 0; n-- {
		var k []byte
		if k, b, err = readStr(b); err != nil {
			return b, err
		}
		var v int64
		switch string(k) {
		case "requests":
			v, b, err = readInt(b)
			s.PrefixRequests = int(v)
		case "queries":
			v, b, err = readInt(b)
			s.PrefixQueries = int(v)
		case "hits":
			v, b, err = readInt(b)
			s.PrefixHits = int(v)
		case "reset":
			s.PrefixReset, b, err = msgp.ReadBoolBytes(b)
		default:
			b, err = skip(b)
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

// decode reads UtilityOutput: [call_id, failure_message, result], result
// a UtilityResult written as [type_info, value].
func (u *UtilityOutput) decode(b []byte) ([]byte, error) {
	u.CallID, u.Failure, u.Result = 0, nil, nil
	n, b, err := readArray(b)
	if err != nil {
		return b, err
	}
	if n < 1 {
		return b, bad("utility output of %d fields", n)
	}
	if u.CallID, b, err = readInt(b); err != nil {
		return b, err
	}
	for i := 1; i < n; i++ {
		switch {
		case isNil(b):
			b = b[1:]
		case i == 1:
			u.Failure, b, err = readStr(b)
		case i == 2:
			var m int
			if m, b, err = readArray(b); err != nil {
				return b, err
			}
			if m != 2 {
				return b, bad("utility result of %d fields", m)
			}
			if b, err = skip(b); err != nil {
				return b, err
			}
			start := b
			if b, err = skip(b); err != nil {
				return b, err
			}
			u.Result = start[:len(start)-len(b)]
		default:
			b, err = skip(b)
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}
