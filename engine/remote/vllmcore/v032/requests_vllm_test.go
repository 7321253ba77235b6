package v032

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/vajra-go/vajra/internal/vllmserver"
)

// TestRequestsDecodedByVLLM: the EngineCoreRequests AppendRequest writes,
// decoded by vLLM 0.32's own msgspec decoder (testdata/decode_requests.py
// in .vllm's Python), hold every field as set: the sampling parameters
// with their defaults left out, the private fields the front end fills,
// each structured-output kind, priority, the rank, the external id, the
// session id.
// Skips without .vllm (make vllm); fails with VAJRA_REQUIRE_VLLM set.
func TestRequestsDecodedByVLLM(t *testing.T) {
	if testing.Short() {
		t.Skip("imports vLLM (seconds)")
	}
	bin := vllmserver.Need(t)
	full := NewSampling()
	full.N, full.PresencePenalty, full.FrequencyPenalty, full.RepetitionPenalty = 2, 0.5, -0.25, 1.2
	full.Temperature, full.TopP, full.TopK, full.MinP = 0.7, 0.9, 40, 0.05
	full.Seed, full.HasSeed = -3, true
	full.StopTokenIDs, full.IgnoreEOS, full.MaxTokens, full.MinTokens = []int32{13, 11}, true, 300, 4
	full.Logprobs, full.PromptLogprobs, full.EOSTokenID = 3, 0, 128009
	full.AllStopTokenIDs = []int32{11, 13, 128001, 128009}
	full.LogitBiasIDs, full.LogitBiasValues = []int32{9906, 100}, []float64{-100, 2.5}
	full.AllowedTokenIDs = []int32{5, 6, 7}
	full.BadWordsTokenIDs = [][]int32{{60704}, {15339, 1917}}
	full.StructKind, full.StructValue, full.StructBackend = StructGrammar, `root ::= "a" | "b"`, "xgrammar"
	full.SkipReadingPrefixCache = true
	greedy := NewSampling()
	greedy.Temperature, greedy.MaxTokens, greedy.EOSTokenID, greedy.AllStopTokenIDs = 0, 5, 2, []int32{2}
	kind := func(k int, v string, choices []string) *Sampling {
		s := NewSampling()
		s.StructKind, s.StructValue, s.StructChoices, s.StructBackend = k, v, choices, "xgrammar"
		return &s
	}
	xargs := kind(StructNone, "", nil)
	xargs.StructBackend = ""
	xargs.ExtraArgs = []byte(`{"mode":"strict","k":3,"w":-0.5,"big":12345678901,"ids":[1,"two",3.25],"e":1e3}`)
	reqs := []Request{
		{ID: "greedy", Prompt: []int32{1, 2, 3}, Sampling: &greedy, ArrivalTime: 1.5, DataParallelRank: -1},
		{ID: "full", Prompt: []int32{128000, 9906}, Sampling: &full, ArrivalTime: 1e9, CacheSalt: "salt",
			DataParallelRank: 1, ClientIndex: 2, CurrentWave: 3, Priority: -2, ExternalID: "ext"},
		{ID: "priority", Prompt: []int32{7}, Sampling: &greedy, DataParallelRank: 0, Priority: 5},
		{ID: "session", Prompt: []int32{7}, Sampling: &greedy, DataParallelRank: -1, SessionID: "conv-42"},
		{ID: "xargs", Prompt: []int32{7}, Sampling: xargs, DataParallelRank: -1},
		{ID: "regex", Prompt: []int32{7}, Sampling: kind(StructRegex, `\d+`, nil), DataParallelRank: -1},
		{ID: "choice", Prompt: []int32{7}, Sampling: kind(StructChoice, "", []string{"yes", "no"}), DataParallelRank: -1},
		{ID: "json", Prompt: []int32{7}, Sampling: kind(StructJSON, `{"type":"object"}`, nil), DataParallelRank: -1},
		{ID: "json_object", Prompt: []int32{7}, Sampling: kind(StructJSONObject, "", nil), DataParallelRank: -1},
	}
	dir := t.TempDir()
	args := []string{filepath.Join("testdata", "decode_requests.py")}
	for i := range reqs {
		p := filepath.Join(dir, strconv.Itoa(i)+".msgpack")
		if err := os.WriteFile(p, AppendRequest(nil, &reqs[i]), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a stall detector
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "python"), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("vLLM's decoder: %v\n%s", err, stderr.Bytes())
	}
	var got []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		got = append(got, m)
	}
	if len(got) != len(reqs) {
		t.Fatalf("vLLM decoded %d requests of %d:\n%s\n%s", len(got), len(reqs), out, stderr.Bytes())
	}
	// What vLLM must have read, field by field (JSON numbers are float64).
	defaults := map[string]any{"n": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0, "repetition_penalty": 1.0,
		"temperature": 1.0, "top_p": 1.0, "top_k": 0.0, "min_p": 0.0, "seed": nil, "stop_token_ids": []any{}, "ignore_eos": false,
		"max_tokens": 16.0, "min_tokens": 0.0, "logprobs": nil, "prompt_logprobs": nil, "eos_token_id": nil,
		"all_stop_token_ids": []any{}, "logit_bias": map[string]any{}, "allowed_token_ids": nil, "bad_words_token_ids": nil,
		"skip_reading_prefix_cache": false, "extra_args": nil, "structured_outputs": nil, "cache_salt": nil, "client_index": 0.0,
		"current_wave": 0.0, "priority": 0.0, "external_req_id": nil, "abort_immediately": false, "session_id": nil}
	so := func(k, v string, choice []any) map[string]any {
		m := map[string]any{"json": nil, "regex": nil, "choice": nil, "grammar": nil, "json_object": nil, "structural_tag": nil, "backend": "xgrammar"}
		switch {
		case k == "choice":
			m[k] = choice
		case k == "json_object":
			m[k] = true
		default:
			m[k] = v
		}
		return m
	}
	want := []map[string]any{
		{"request_id": "greedy", "prompt_token_ids": []any{1.0, 2.0, 3.0}, "arrival_time": 1.5, "data_parallel_rank": nil,
			"temperature": 0.0, "max_tokens": 5.0, "eos_token_id": 2.0, "all_stop_token_ids": []any{2.0}},
		{"request_id": "full", "prompt_token_ids": []any{128000.0, 9906.0}, "arrival_time": 1e9, "cache_salt": "salt",
			"data_parallel_rank": 1.0, "client_index": 2.0, "current_wave": 3.0, "priority": -2.0, "external_req_id": "ext",
			"n": 2.0, "presence_penalty": 0.5, "frequency_penalty": -0.25, "repetition_penalty": 1.2, "temperature": 0.7,
			"top_p": 0.9, "top_k": 40.0, "min_p": 0.05, "seed": -3.0, "stop_token_ids": []any{13.0, 11.0}, "ignore_eos": true,
			"max_tokens": 300.0, "min_tokens": 4.0, "logprobs": 3.0, "prompt_logprobs": 0.0, "eos_token_id": 128009.0,
			"all_stop_token_ids": []any{11.0, 13.0, 128001.0, 128009.0}, "logit_bias": map[string]any{"9906": -100.0, "100": 2.5},
			"allowed_token_ids": []any{5.0, 6.0, 7.0}, "bad_words_token_ids": []any{[]any{60704.0}, []any{15339.0, 1917.0}},
			"skip_reading_prefix_cache": true, "structured_outputs": so("grammar", `root ::= "a" | "b"`, nil)},
		{"request_id": "priority", "prompt_token_ids": []any{7.0}, "arrival_time": 0.0, "data_parallel_rank": 0.0, "priority": 5.0,
			"temperature": 0.0, "max_tokens": 5.0, "eos_token_id": 2.0, "all_stop_token_ids": []any{2.0}},
		{"request_id": "session", "session_id": "conv-42",
			"temperature": 0.0, "max_tokens": 5.0, "eos_token_id": 2.0, "all_stop_token_ids": []any{2.0}},
		{"request_id": "xargs", "extra_args": map[string]any{"mode": "strict", "k": 3.0, "w": -0.5, "big": 12345678901.0,
			"ids": []any{1.0, "two", 3.25}, "e": 1000.0}},
		{"request_id": "regex", "structured_outputs": so("regex", `\d+`, nil)},
		{"request_id": "choice", "structured_outputs": so("choice", "", []any{"yes", "no"})},
		{"request_id": "json", "structured_outputs": so("json", `{"type":"object"}`, nil)},
		{"request_id": "json_object", "structured_outputs": so("json_object", "", nil)},
	}
	for i, w := range want {
		for k, v := range defaults {
			if _, ok := w[k]; !ok {
				w[k] = v
			}
		}
		if _, ok := w["prompt_token_ids"]; !ok {
			w["prompt_token_ids"], w["arrival_time"], w["data_parallel_rank"] = []any{7.0}, 0.0, nil
		}
		for k, v := range w {
			if g := got[i][k]; !reflect.DeepEqual(g, v) {
				t.Errorf("%s: vLLM read %s = %#v, want %#v", w["request_id"], k, g, v)
			}
		}
	}
}
