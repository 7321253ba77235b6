package pipeline_test

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/pipeline"
	"github.com/vajra-go/vajra/engine/text/chattemplate"
	"github.com/vajra-go/vajra/engine/tokenizer"
	"github.com/vajra-go/vajra/internal/fixture"
)

// tokModel is a pipeline.Model over a real tokenizer.
type tokModel struct{ tok *tokenizer.Tokenizer }

func (m tokModel) VocabSize() int                       { return m.tok.VocabSize() }
func (m tokModel) MaxLen() int                          { return 4096 }
func (m tokModel) Template(bool) *chattemplate.Template { return nil }
func (m tokModel) AddBOS() bool                         { return false }
func (m tokModel) BOSText() string                      { return "" }
func (m tokModel) CheckGrammar(string) error            { return nil }
func (m tokModel) Tokenize(dst []int32, s string, _ bool) ([]int32, error) {
	return m.tok.Encode(dst, s), nil
}

// TestBadWordsAsVLLM: bad_words become the token sequences vLLM's front
// end makes of them (SamplingParams.update_from_tokenizer, vLLM 0.32.0,
// with the Llama 3 tokenizer of `make tokenizers`; the ids below are what
// it gave): each word with its leading spaces removed, then after a
// space when that is another first token of as many tokens.
func TestBadWordsAsVLLM(t *testing.T) {
	p, err := fixture.Find("", filepath.Join(".tokenizers", "llama3", "package", "models", "tokenizer.json"),
		"the Llama 3 tokenizer is missing: run `make tokenizers`")
	tj := fixture.Need(t, "VAJRA_REQUIRE_TOKENIZERS", p, err)
	tok, err := tokenizer.Load(filepath.Dir(tj))
	if err != nil {
		t.Fatal(err)
	}
	m := tokModel{tok}
	want := map[string][][]int32{
		"Paris":       {{60704}, {12366}},
		" London":     {{40672}, {7295}},
		"hello world": {{15339, 1917}, {24748, 1917}},
		"sea":         {{37541}, {9581}},
		"Écris":       {{27887, 5192, 285}, {29124, 5192, 285}},
		"don't":       {{15357, 956}, {1541, 956}},
		"  spaced":    {{2203, 4535}},
		"12345":       {{4513, 1774}},
	}
	for w, ids := range want {
		req := engine.Request{PromptTokens: []int32{1, 2}, VLLM: &engine.VLLMExtensions{BadWords: []string{w}}}
		var pp pipeline.Prepared
		if err := pipeline.Prepare(m, &req, pipeline.Limits{MaxN: 1, MaxStop: 4}, &pp); err != nil {
			t.Fatalf("%q: %v", w, err)
		}
		if !reflect.DeepEqual(pp.BadWords, ids) {
			t.Errorf("%q: %v, vLLM %v", w, pp.BadWords, ids)
		}
	}
	var e *engine.Error
	req := engine.Request{PromptTokens: []int32{1}, VLLM: &engine.VLLMExtensions{BadWords: []string{"   "}}}
	if err := pipeline.Prepare(m, &req, pipeline.Limits{MaxN: 1, MaxStop: 4}, new(pipeline.Prepared)); !errors.As(err, &e) || e.Param != "bad_words" {
		t.Errorf("a blank bad word: %v", err)
	}
	many := make([]string, 70)
	for i := range many {
		many[i] = "word" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	req = engine.Request{PromptTokens: []int32{1}, VLLM: &engine.VLLMExtensions{BadWords: many}}
	if err := pipeline.Prepare(m, &req, pipeline.Limits{MaxN: 1, MaxStop: 4}, new(pipeline.Prepared)); !errors.As(err, &e) || e.Param != "bad_words" {
		t.Errorf("140 bad-word sequences: %v; want vLLM's limit of %d", err, pipeline.MaxBadWords)
	}
	req = engine.Request{PromptTokens: []int32{1}, VLLM: &engine.VLLMExtensions{AllowedTokenIDs: []int{5, 1 << 20}}}
	if err := pipeline.Prepare(m, &req, pipeline.Limits{MaxN: 1, MaxStop: 4}, new(pipeline.Prepared)); !errors.As(err, &e) || e.Param != "allowed_token_ids" {
		t.Errorf("an allowed id outside the vocabulary: %v", err)
	}
	req = engine.Request{PromptTokens: []int32{1}, VLLM: &engine.VLLMExtensions{AllowedTokenIDs: []int{}}}
	if err := pipeline.Prepare(m, &req, pipeline.Limits{MaxN: 1, MaxStop: 4}, new(pipeline.Prepared)); !errors.As(err, &e) || e.Param != "allowed_token_ids" {
		t.Errorf("no allowed id: %v", err)
	}
}
