package v032

import (
	"encoding/binary"
	"math"

	"github.com/tinylib/msgp/msgp"
)

// This file writes the engine's side of the protocol, as vLLM's encoder
// does: the engines written in Go that test the front end (fakes of
// misbehaving engines, benchmarks) use it.

// OutputsMsg is an EngineCoreOutputs to write.
type OutputsMsg struct {
	EngineIndex int
	Outputs     []OutputMsg
	Stats       *Stats
	Timestamp   float64
	// Utility answers a call: Failure, or Result (an encoded msgpack value).
	Utility *UtilityOutput
}

// OutputMsg is one EngineCoreOutput to write.
type OutputMsg struct {
	RequestID string
	TokenIDs  []int32
	// Logprobs, when Rows > 0, written inline (ext type 3) when each array
	// is under 256 bytes and as extra frames otherwise, as vLLM does.
	Logprobs     Logprobs
	FinishReason int8 // NoFinish while the request goes on
	StopToken    int64
	// Prefill stats, when HasPrefill.
	HasPrefill   bool
	PromptTokens int
	CachedTokens int
}

// AppendOutputs writes m into b and its large arrays into extra frames,
// appended to aux; it returns both.
func AppendOutputs(b []byte, aux [][]byte, m *OutputsMsg) ([]byte, [][]byte) {
	n := 4
	if m.Utility != nil {
		n = 5
	}
	b = msgp.AppendArrayHeader(b, uint32(n))
	b = appendInt(b, int64(m.EngineIndex))
	b = msgp.AppendArrayHeader(b, uint32(len(m.Outputs)))
	for i := range m.Outputs {
		b, aux = appendOutput(b, aux, &m.Outputs[i])
	}
	if m.Stats != nil {
		s := m.Stats
		prefix := s.PrefixQueries != 0 || s.PrefixHits != 0 || s.PrefixRequests != 0
		if prefix {
			b = msgp.AppendMapHeader(b, 5)
		} else {
			b = msgp.AppendMapHeader(b, 4)
		}
		b = appendInt(msgp.AppendString(b, "num_running_reqs"), int64(s.Running))
		b = appendInt(msgp.AppendString(b, "num_waiting_reqs"), int64(s.Waiting))
		b = appendInt(msgp.AppendString(b, "step_counter"), int64(s.StepCounter))
		b = msgp.AppendFloat64(msgp.AppendString(b, "kv_cache_usage"), s.KVCacheUsage)
		if prefix {
			b = msgp.AppendMapHeader(msgp.AppendString(b, "prefix_cache_stats"), 4)
			b = msgp.AppendBool(msgp.AppendString(b, "reset"), s.PrefixReset)
			b = appendInt(msgp.AppendString(b, "requests"), int64(s.PrefixRequests))
			b = appendInt(msgp.AppendString(b, "queries"), int64(s.PrefixQueries))
			b = appendInt(msgp.AppendString(b, "hits"), int64(s.PrefixHits))
		}
	} else {
		b = msgp.AppendNil(b)
	}
	b = msgp.AppendFloat64(b, m.Timestamp)
	if u := m.Utility; u != nil {
		b = msgp.AppendArrayHeader(b, 3)
		b = appendInt(b, u.CallID)
		if u.Failure != nil {
			b = msgp.AppendStringFromBytes(b, u.Failure)
			b = msgp.AppendNil(b)
		} else {
			b = msgp.AppendNil(b)
			b = msgp.AppendArrayHeader(b, 2)
			b = msgp.AppendNil(b)
			if u.Result == nil {
				b = msgp.AppendNil(b)
			} else {
				b = append(b, u.Result...)
			}
		}
	}
	return b, aux
}

func appendOutput(b []byte, aux [][]byte, o *OutputMsg) ([]byte, [][]byte) {
	n := 2
	switch {
	case o.HasPrefill:
		n = 12
	case o.StopToken >= 0:
		n = 7
	case o.FinishReason != NoFinish:
		n = 6
	case o.Logprobs.Rows > 0:
		n = 3
	}
	b = msgp.AppendArrayHeader(b, uint32(n))
	b = msgp.AppendString(b, o.RequestID)
	b = appendInts(b, o.TokenIDs)
	if n == 2 {
		return b, aux
	}
	if o.Logprobs.Rows > 0 {
		b, aux = appendLogprobs(b, aux, &o.Logprobs)
	} else {
		b = msgp.AppendNil(b)
	}
	if n == 3 {
		return b, aux
	}
	b = msgp.AppendNil(b) // new_prompt_logprobs_tensors
	b = msgp.AppendNil(b) // pooling_output
	if o.FinishReason != NoFinish {
		b = appendInt(b, int64(o.FinishReason))
	} else {
		b = msgp.AppendNil(b)
	}
	if n == 6 {
		return b, aux
	}
	if o.StopToken >= 0 {
		b = appendInt(b, o.StopToken)
	} else {
		b = msgp.AppendNil(b)
	}
	if n == 7 {
		return b, aux
	}
	for i := 7; i < 11; i++ { // events, kv/ec transfer params, trace headers
		b = msgp.AppendNil(b)
	}
	b = msgp.AppendMapHeader(b, 2)
	b = appendInt(msgp.AppendString(b, "num_prompt_tokens"), int64(o.PromptTokens))
	b = appendInt(msgp.AppendString(b, "num_cached_tokens"), int64(o.CachedTokens))
	return b, aux
}

func appendLogprobs(b []byte, aux [][]byte, l *Logprobs) ([]byte, [][]byte) {
	b = msgp.AppendArrayHeader(b, 4)
	ids := make([]byte, 0, 4*len(l.TokenIDs))
	for _, v := range l.TokenIDs {
		ids = binary.LittleEndian.AppendUint32(ids, uint32(v))
	}
	lps := make([]byte, 0, 4*len(l.Logprobs))
	for _, v := range l.Logprobs {
		lps = binary.LittleEndian.AppendUint32(lps, math.Float32bits(v))
	}
	ranks := make([]byte, 0, 4*len(l.Ranks))
	for _, v := range l.Ranks {
		ranks = binary.LittleEndian.AppendUint32(ranks, uint32(v))
	}
	b, aux = appendNdarray(b, aux, "<i4", []int{l.Rows, l.Cols}, ids)
	b, aux = appendNdarray(b, aux, "<f4", []int{l.Rows, l.Cols}, lps)
	b, aux = appendNdarray(b, aux, "<i4", []int{l.Rows}, ranks)
	return msgp.AppendNil(b), aux
}

// appendNdarray writes [dtype, shape, data] as serial_utils does for an
// ndarray: data under 256 bytes inline as ext type 3, else the index of an
// extra frame (frame 0 being the message itself).
func appendNdarray(b []byte, aux [][]byte, dtype string, shape []int, data []byte) ([]byte, [][]byte) {
	b = msgp.AppendArrayHeader(b, 3)
	b = msgp.AppendString(b, dtype)
	b = msgp.AppendArrayHeader(b, uint32(len(shape)))
	for _, d := range shape {
		b = appendInt(b, int64(d))
	}
	if len(data) < 256 {
		return appendExt(b, extRawView, data), aux
	}
	aux = append(aux, data)
	return appendInt(b, int64(len(aux))), aux
}

// appendExt writes an extension value as msgspec does (fixext for 1, 2, 4,
// 8 and 16 bytes).
func appendExt(b []byte, typ int8, data []byte) []byte {
	switch n := len(data); {
	case n == 1:
		b = append(b, 0xd4)
	case n == 2:
		b = append(b, 0xd5)
	case n == 4:
		b = append(b, 0xd6)
	case n == 8:
		b = append(b, 0xd7)
	case n == 16:
		b = append(b, 0xd8)
	case n < 256:
		b = append(b, 0xc7, byte(n))
	case n < 1<<16:
		b = append(b, 0xc8)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0xc9)
		b = binary.BigEndian.AppendUint32(b, uint32(n))
	}
	b = append(b, byte(typ))
	return append(b, data...)
}
