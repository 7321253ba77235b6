// Package v032 is the message layer of vLLM 0.32.x's engine-core protocol:
// the msgpack layouts of the handshake, of EngineCoreRequest and its
// SamplingParams, of aborts and utility calls, and of EngineCoreOutputs,
// as vllm/v1/engine/__init__.py, vllm/sampling_params.py and
// vllm/v1/serial_utils.py of the 0.32.0 release define them. Every layout
// of that release lives in this package, so that the next release is a new
// package beside it rather than an edit.
//
// msgspec writes array_like structs with omit_defaults, so a positional
// array ends at its last field that is not at its default; this package
// writes the same bytes (the golden tests hold it to vLLM's own encoder)
// and reads arrays of any length: missing trailing fields take their
// defaults and fields appended after the known ones are skipped, as
// msgspec itself does.
//
// Encoding appends to a caller's buffer and decoding reads in place with
// tinylib/msgp's primitives into a reused Outputs: the output path
// allocates nothing once its buffers have grown.
package v032

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tinylib/msgp/msgp"
)

// Version is the release line this package speaks: a registration whose
// vllm_version starts with it ("0.32.0", "0.32.1+cpu") is accepted.
const Version = "0.32"

// ErrMessage reports an engine message this package cannot read: a wrong
// type, a truncated array, a dtype or shape it does not know.
var ErrMessage = errors.New("vllmcore/v032: malformed engine message")

// Request types: the first frame of a message to the engine.
const (
	TypeAdd       byte = 0x00
	TypeAbort     byte = 0x01
	TypeStartWave byte = 0x02
	TypeUtility   byte = 0x03
)

// EngineCoreDead is the single-frame message an engine sends on its output
// socket when its loop fails.
const EngineCoreDead = "ENGINE_CORE_DEAD"

// Finish reasons as EngineCoreOutput carries them (FinishReason, an
// IntEnum); NoFinish when the request goes on.
const (
	NoFinish         int8 = -1
	FinishStop       int8 = 0
	FinishLength     int8 = 1
	FinishAbort      int8 = 2
	FinishError      int8 = 3
	FinishRepetition int8 = 4
)

// FinishReasonString is vLLM's name of a finish reason.
func FinishReasonString(r int8) string {
	switch r {
	case FinishStop:
		return "stop"
	case FinishLength:
		return "length"
	case FinishAbort:
		return "abort"
	case FinishError:
		return "error"
	case FinishRepetition:
		return "repetition"
	}
	return ""
}

func bad(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMessage}, a...)...)
}

// appendInt writes i as msgspec does: the smallest unsigned form for
// non-negative values, the smallest signed one otherwise.
func appendInt(b []byte, i int64) []byte {
	if i >= 0 {
		return msgp.AppendUint64(b, uint64(i))
	}
	return msgp.AppendInt64(b, i)
}

// readInt reads any msgpack integer (and accepts a float with no
// fraction, which Python's JSON-ish values may carry).
func readInt(b []byte) (int64, []byte, error) {
	switch msgp.NextType(b) {
	case msgp.IntType:
		return msgp.ReadInt64Bytes(b)
	case msgp.UintType:
		u, o, err := msgp.ReadUint64Bytes(b)
		if err == nil && u > 1<<63-1 {
			return 0, b, bad("integer %d overflows int64", u)
		}
		return int64(u), o, err
	}
	return 0, b, bad("want an integer, have %s", msgp.NextType(b))
}

// readFloat reads a float or an integer as float64.
func readFloat(b []byte) (float64, []byte, error) {
	switch msgp.NextType(b) {
	case msgp.Float64Type, msgp.Float32Type:
		return msgp.ReadFloat64Bytes(b)
	case msgp.IntType, msgp.UintType:
		i, o, err := readInt(b)
		return float64(i), o, err
	}
	return 0, b, bad("want a number, have %s", msgp.NextType(b))
}

func isNil(b []byte) bool { return len(b) > 0 && b[0] == 0xc0 }

// skip skips one value, refusing a truncated one.
func skip(b []byte) ([]byte, error) {
	o, err := msgp.Skip(b)
	if err != nil {
		return b, bad("%v", err)
	}
	return o, nil
}

// readArray reads an array header; nil reads as an empty array.
func readArray(b []byte) (int, []byte, error) {
	if isNil(b) {
		return 0, b[1:], nil
	}
	n, o, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return 0, b, bad("%v", err)
	}
	if int(n) > len(o) {
		return 0, b, bad("array of %d elements in %d bytes", n, len(o))
	}
	return int(n), o, nil
}

func readMap(b []byte) (int, []byte, error) {
	n, o, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		return 0, b, bad("%v", err)
	}
	if int(n)*2 > len(o) {
		return 0, b, bad("map of %d entries in %d bytes", n, len(o))
	}
	return int(n), o, nil
}

func readStr(b []byte) ([]byte, []byte, error) {
	s, o, err := msgp.ReadStringZC(b)
	if err != nil {
		return nil, b, bad("%v", err)
	}
	return s, o, nil
}

// ReadyResponse is the registration an engine sends first on the request
// socket (EngineCoreReadyResponse): its configuration after start-up.
type ReadyResponse struct {
	MaxModelLen           int
	NumGPUBlocks          int
	BlockSize             int
	DType                 string
	VLLMVersion           string
	WorldSize             int
	DataParallelSize      int
	TensorParallelSize    int
	PipelineParallelSize  int
	DataParallelRank      int
	MaxNumSeqs            int
	MaxNumBatchedTokens   int
	InstanceID            string
	SupportsLoRA          bool
	KVCacheSizeTokens     int
	EnableSleepMode       bool
	DPStatsAddress        string
	KVCacheMaxConcurrency float64
}

// DecodeReady reads a registration. Unknown keys are skipped; it allocates
// (once per engine).
func DecodeReady(b []byte) (*ReadyResponse, error) {
	n, b, err := readMap(b)
	if err != nil {
		return nil, err
	}
	r := &ReadyResponse{}
	for ; n > 0; n-- {
		var k []byte
		if k, b, err = readStr(b); err != nil {
			return nil, err
		}
		if isNil(b) {
			b = b[1:]
			continue
		}
		var ip *int
		var sp *string
		var bp *bool
		switch string(k) {
		case "max_model_len":
			ip = &r.MaxModelLen
		case "num_gpu_blocks":
			ip = &r.NumGPUBlocks
		case "block_size":
			ip = &r.BlockSize
		case "dtype":
			sp = &r.DType
		case "vllm_version":
			sp = &r.VLLMVersion
		case "world_size":
			ip = &r.WorldSize
		case "data_parallel_size":
			ip = &r.DataParallelSize
		case "tensor_parallel_size":
			ip = &r.TensorParallelSize
		case "pipeline_parallel_size":
			ip = &r.PipelineParallelSize
		case "data_parallel_rank":
			ip = &r.DataParallelRank
		case "max_num_seqs":
			ip = &r.MaxNumSeqs
		case "max_num_batched_tokens":
			ip = &r.MaxNumBatchedTokens
		case "instance_id":
			sp = &r.InstanceID
		case "supports_lora":
			bp = &r.SupportsLoRA
		case "kv_cache_size_tokens":
			ip = &r.KVCacheSizeTokens
		case "enable_sleep_mode":
			bp = &r.EnableSleepMode
		case "dp_stats_address":
			sp = &r.DPStatsAddress
		case "kv_cache_max_concurrency":
			r.KVCacheMaxConcurrency, b, err = readFloat(b)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			continue
		}
		switch {
		case ip != nil:
			var v int64
			v, b, err = readInt(b)
			*ip = int(v)
		case sp != nil:
			var s []byte
			s, b, err = readStr(b)
			*sp = string(s)
		case bp != nil:
			*bp, b, err = msgp.ReadBoolBytes(b)
		default:
			b, err = skip(b)
		}
		if err != nil {
			return nil, bad("registration %s: %v", k, err)
		}
	}
	if r.VLLMVersion == "" {
		return nil, bad("registration without vllm_version")
	}
	return r, nil
}

// Compatible says whether an engine of version v speaks this package's
// layouts.
func Compatible(v string) bool {
	return v == Version || strings.HasPrefix(v, Version+".") || strings.HasPrefix(v, Version+"+")
}

// Hello is an engine's status message on the handshake socket (HELLO
// first, READY once it runs).
type Hello struct {
	Status   string
	Local    bool
	Headless bool
}

// DecodeHello reads a status message.
func DecodeHello(b []byte) (Hello, error) {
	var h Hello
	n, b, err := readMap(b)
	if err != nil {
		return h, err
	}
	for ; n > 0; n-- {
		var k []byte
		if k, b, err = readStr(b); err != nil {
			return h, err
		}
		switch string(k) {
		case "status":
			var s []byte
			s, b, err = readStr(b)
			h.Status = string(s)
		case "local":
			h.Local, b, err = msgp.ReadBoolBytes(b)
		case "headless":
			h.Headless, b, err = msgp.ReadBoolBytes(b)
		default:
			b, err = skip(b)
		}
		if err != nil {
			return h, bad("handshake %s: %v", k, err)
		}
	}
	if h.Status == "" {
		return h, bad("handshake message without status")
	}
	return h, nil
}

// AppendInit writes the front end's answer to HELLO
// (EngineHandshakeMetadata): the request and output addresses the engine
// connects to, and an empty parallel config (no DP coordinator).
func AppendInit(b []byte, input, output string) []byte {
	b = msgp.AppendMapHeader(b, 2)
	b = msgp.AppendString(b, "addresses")
	b = msgp.AppendMapHeader(b, 5)
	b = msgp.AppendString(b, "inputs")
	b = msgp.AppendArrayHeader(b, 1)
	b = msgp.AppendString(b, input)
	b = msgp.AppendString(b, "outputs")
	b = msgp.AppendArrayHeader(b, 1)
	b = msgp.AppendString(b, output)
	b = msgp.AppendString(b, "coordinator_input")
	b = msgp.AppendNil(b)
	b = msgp.AppendString(b, "coordinator_output")
	b = msgp.AppendNil(b)
	b = msgp.AppendString(b, "frontend_stats_publish_address")
	b = msgp.AppendNil(b)
	b = msgp.AppendString(b, "parallel_config")
	b = msgp.AppendMapHeader(b, 0)
	return b
}

// AppendAbort writes an abort's payload: the request ids.
func AppendAbort(b []byte, ids ...string) []byte {
	b = msgp.AppendArrayHeader(b, uint32(len(ids)))
	for _, id := range ids {
		b = msgp.AppendString(b, id)
	}
	return b
}

// AppendUtility writes a utility call's payload: [client_index, call_id,
// method, args]; args are already-encoded msgpack values.
func AppendUtility(b []byte, clientIndex int, callID int64, method string, args ...[]byte) []byte {
	b = msgp.AppendArrayHeader(b, 4)
	b = appendInt(b, int64(clientIndex))
	b = appendInt(b, callID)
	b = msgp.AppendString(b, method)
	b = msgp.AppendArrayHeader(b, uint32(len(args)))
	for _, a := range args {
		b = append(b, a...)
	}
	return b
}
