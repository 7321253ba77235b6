package openai

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeEmbeddingRequest(t *testing.T) {
	for _, tc := range []struct {
		body, param string
		texts, toks int
	}{
		{`{"model":"m","input":"hi"}`, "", 1, 0},
		{`{"model":"m","input":["a","b"],"encoding_format":"base64"}`, "", 2, 0},
		{`{"model":"m","input":[1,2,3]}`, "", 0, 1},
		{`{"model":"m","input":[[1],[2,3]]}`, "", 0, 2},
		{`{"model":"m"}`, "input", 0, 0},
		{`{"model":"m","input":null}`, "input", 0, 0},
		{`{"model":"m","input":[]}`, "input", 0, 0},
		{`{"model":"m","input":["a",""]}`, "input[1]", 0, 0},
		{`{"model":"m","input":[[1],[]]}`, "input[1]", 0, 0},
		{`{"model":"m","input":[-1]}`, "input", 0, 0},
		{`{"model":"m","input":{"a":1}}`, "input", 0, 0},
		{`{"model":"m","input":"x","encoding_format":"int8"}`, "encoding_format", 0, 0},
		{`{"model":"m","input":"x","dimensions":8}`, "dimensions", 0, 0},
		{`{"model":"m","input":[` + strings.Repeat(`"a",`, MaxEmbeddingInputs) + `"a"]}`, "input", 0, 0},
	} {
		var r EmbeddingRequest
		err := DecodeEmbeddingRequest([]byte(tc.body), &r, false)
		if tc.param == "" {
			if err != nil || len(r.Input.Texts) != tc.texts || len(r.Input.Tokens) != tc.toks {
				t.Errorf("%.60s: %v, %d texts, %d token inputs", tc.body, err, len(r.Input.Texts), len(r.Input.Tokens))
			}
			continue
		}
		pe, ok := err.(*ParamError)
		if !ok || pe.Param != tc.param {
			t.Errorf("%.60s: %v, want a 400 on %s", tc.body, err, tc.param)
		}
	}
	var r EmbeddingRequest
	if err := DecodeEmbeddingRequest([]byte(`{"model":"m","input":"x","dimensions":8}`), &r, true); err != nil || r.Dimensions.V != 8 {
		t.Fatalf("dimensions on a Matryoshka model: %v", err)
	}
}

func TestAppendEmbeddingResponse(t *testing.T) {
	body := AppendEmbeddingResponse(nil, `m"1`, [][]float32{{0.5, -0.25}, {1, 0}}, false, 7)
	var got struct {
		Object string `json:"object"`
		Data   []struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
		Model string `json:"model"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if got.Object != "list" || got.Model != `m"1` || len(got.Data) != 2 || got.Data[1].Index != 1 || got.Data[0].Embedding[1] != -0.25 ||
		got.Data[0].Object != "embedding" || got.Usage.PromptTokens != 7 || got.Usage.TotalTokens != 7 {
		t.Fatalf("%s", body)
	}
	b64 := AppendEmbeddingResponse(nil, "m", [][]float32{{1}}, true, 1)
	if !strings.Contains(string(b64), `"embedding":"AACAPw=="`) { // 1.0f little-endian
		t.Fatalf("%s", b64)
	}
}
