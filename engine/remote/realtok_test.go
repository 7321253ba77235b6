package remote

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/text"
	"github.com/vajra-go/vajra/engine/tokenizer"
)

// Special tokens and the parsers with real tokenizers (make tokenizers;
// skipped when missing, failed with VAJRA_REQUIRE_TOKENIZERS set). Llama
// 3.1 and Mistral vocabularies are not among the packages: Llama 3.1's is
// Llama 3's with id 128010 named <|python_tag|> (and 128008 <|eom_id|>),
// and the Mistral one here is Llama 2's SentencePiece vocabulary with
// Mistral's [TOOL_CALLS] and [ARGS] control tokens added.

// realTokenizerFiles reads the tokenizer files of .tokenizers/<name>.
func realTokenizerFiles(t *testing.T, name string) map[string][]byte {
	t.Helper()
	dir := filepath.Join("..", "..", ".tokenizers", name, "package", "models")
	files := map[string][]byte{}
	for _, f := range []string{tokenizer.FileTokenizer, tokenizer.FileTokenizerConfig, tokenizer.FileSpecialTokensMap, tokenizer.FileGenerationConfig} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
			files[f] = b
		}
	}
	if files[tokenizer.FileTokenizer] == nil {
		if os.Getenv("VAJRA_REQUIRE_TOKENIZERS") != "" {
			t.Fatalf("tokenizer %s missing: run make tokenizers", name)
		}
		t.Skipf("tokenizer %s missing: run make tokenizers (VAJRA_REQUIRE_TOKENIZERS=1 makes this fail)", name)
	}
	return files
}

// patchAdded edits tokenizer.json's added tokens: rename maps an id to a
// new content; add appends special tokens at the given ids.
func patchAdded(t *testing.T, files map[string][]byte, rename map[int]string, add map[int]string) {
	t.Helper()
	var tj map[string]any
	if err := json.Unmarshal(files[tokenizer.FileTokenizer], &tj); err != nil {
		t.Fatal(err)
	}
	added := tj["added_tokens"].([]any)
	for _, a := range added {
		m := a.(map[string]any)
		if s, ok := rename[int(m["id"].(float64))]; ok {
			m["content"] = s
		}
	}
	for id, s := range add {
		added = append(added, map[string]any{"id": id, "content": s, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true})
	}
	tj["added_tokens"] = added
	b, err := json.Marshal(tj)
	if err != nil {
		t.Fatal(err)
	}
	files[tokenizer.FileTokenizer] = b
}

func realEngine(t *testing.T, files map[string][]byte, cfg Config) (*Engine, *fakeClient, Tokenizer) {
	t.Helper()
	tk, err := tokenizer.FromFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tokenizer = Local(tk)
	e, f := newFakeCtx(t, cfg, false, 8192)
	return e, f, cfg.Tokenizer
}

func mustID(t *testing.T, tok Tokenizer, s string) int32 {
	t.Helper()
	ids := tok.Encode(nil, s)
	if len(ids) != 1 {
		t.Fatalf("%q is %d tokens", s, len(ids))
	}
	return ids[0]
}

func checkCall(t *testing.T, what string, rec *deltaRec, ch engine.Choice, name, args string) {
	t.Helper()
	if len(ch.ToolCalls) != 1 || ch.ToolCalls[0].Name != name || ch.ToolCalls[0].Arguments != args || ch.FinishReason != engine.FinishToolCalls {
		t.Fatalf("%s: choice %+v", what, ch)
	}
	if len(rec.names) != 1 || rec.names[0] != name || rec.args[0].String() != args || rec.nargs < 2 {
		var got []string
		for i := range rec.args {
			got = append(got, rec.args[i].String())
		}
		t.Fatalf("%s: streamed %q(%q) in %d deltas", what, rec.names, got, rec.nargs)
	}
}

// TestRealLlama31PythonTag: <|python_tag|> is a control token; with tools
// it reaches llama3_json, without it is left out, and kept with
// skip_special_tokens=false.
func TestRealLlama31PythonTag(t *testing.T) {
	files := realTokenizerFiles(t, "llama3")
	patchAdded(t, files, map[int]string{128010: "<|python_tag|>", 128008: "<|eom_id|>"}, nil)
	e, f, tok := realEngine(t, files, Config{Config: engine.Config{ToolCallParser: "llama3_json"}})
	tag := mustID(t, tok, "<|python_tag|>")
	if m := e.model.Load(); !tok.IsSpecial(tag) || m.kind[tag] != text.TokenToolMarker || m.kind[128009] != text.TokenSpecial {
		t.Fatalf("<|python_tag|> %d special %v kind %d", tag, tok.IsSpecial(tag), m.kind[tag])
	}
	body := `{"name": "get", "parameters": {"city": "Paris", "n": 3}}`
	out := append(append([]int32{tag}, tok.Encode(nil, body)...), tok.EOS())
	rec, ch := runTokens(t, e, f, true, false, out)
	checkCall(t, "tools", rec, ch, "get", `{"city": "Paris", "n": 3}`)
	if _, ch = runTokens(t, e, f, false, false, out); ch.Text != body {
		t.Fatalf("no tools: %q", ch.Text)
	}
	if _, ch = runTokens(t, e, f, false, true, out); ch.Text != "<|python_tag|>"+body {
		t.Fatalf("skip_special_tokens=false: %q", ch.Text)
	}
	// A python_tag that opens no JSON call is not content either.
	plain := append(append([]int32{tag}, tok.Encode(nil, "print(1)")...), tok.EOS())
	if _, ch = runTokens(t, e, f, true, false, plain); ch.Text != "print(1)" || len(ch.ToolCalls) != 0 {
		t.Fatalf("python_tag code: %+v", ch)
	}
}

// TestRealMistralToolCalls: [TOOL_CALLS] and [ARGS] as control tokens of
// a SentencePiece vocabulary reach the mistral parser.
func TestRealMistralToolCalls(t *testing.T) {
	files := realTokenizerFiles(t, "llama2")
	patchAdded(t, files, nil, map[int]string{32000: "[TOOL_CALLS]", 32001: "[ARGS]"})
	e, f, tok := realEngine(t, files, Config{Config: engine.Config{ToolCallParser: "mistral"}})
	bot, args := mustID(t, tok, "[TOOL_CALLS]"), mustID(t, tok, "[ARGS]")
	if m := e.model.Load(); m.kind[bot] != text.TokenToolMarker || m.kind[args] != text.TokenToolMarker {
		t.Fatalf("kinds %d %d", m.kind[bot], m.kind[args])
	}
	out := append(append(append(append([]int32{bot}, tok.Encode(nil, "get")...), args), tok.Encode(nil, `{"city": "Rome"}`)...), 2) // </s>
	rec, ch := runTokens(t, e, f, true, false, out)
	checkCall(t, "v11", rec, ch, "get", `{"city": "Rome"}`)
	if _, ch = runTokens(t, e, f, false, false, out); len(ch.ToolCalls) != 0 || ch.Text == "" ||
		json.Valid([]byte(ch.Text)) || ch.Text[0] == '[' {
		t.Fatalf("no tools: %+v", ch)
	}
}

// TestRealQwen3: <think> and <tool_call> are not special in Qwen3 (text,
// always seen); <|im_end|> ends the output and is never content.
func TestRealQwen3(t *testing.T) {
	files := realTokenizerFiles(t, "qwen3")
	e, f, tok := realEngine(t, files, Config{Config: engine.Config{ToolCallParser: "hermes", ReasoningParser: "qwen3"}})
	m := e.model.Load()
	think, call, end := mustID(t, tok, "<think>"), mustID(t, tok, "<tool_call>"), mustID(t, tok, "<|im_end|>")
	if m.kind[think] != text.TokenText || m.kind[call] != text.TokenText || m.kind[end] != text.TokenSpecial {
		t.Fatalf("kinds %d %d %d", m.kind[think], m.kind[call], m.kind[end])
	}
	out := append(tok.Encode(nil, "<think>hmm</think>ok<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"), end)
	rec, ch := runTokens(t, e, f, true, false, out)
	checkCall(t, "hermes", rec, ch, "get", `{"city": "Oslo"}`)
	if ch.Reasoning != "hmm" || ch.Text != "ok" {
		t.Fatalf("reasoning %q content %q", ch.Reasoning, ch.Text)
	}
}

// TestRealGemma3Control: Gemma 3's <start_of_turn> is a control token:
// left out by default, its text with skip_special_tokens=false.
func TestRealGemma3Control(t *testing.T) {
	files := realTokenizerFiles(t, "gemma3")
	e, f, tok := realEngine(t, files, Config{})
	sot := mustID(t, tok, "<start_of_turn>")
	out := append(append(tok.Encode(nil, "Hi"), sot), tok.Encode(nil, "there")...)
	out = append(out, tok.EOS())
	if _, ch := runTokens(t, e, f, false, false, out); ch.Text != "Hithere" {
		t.Fatalf("default: %q", ch.Text)
	}
	if _, ch := runTokens(t, e, f, false, true, out); ch.Text != "Hi<start_of_turn>there" {
		t.Fatalf("skip_special_tokens=false: %q", ch.Text)
	}
}

// TestRealAddSpecialTokens: vLLM's add_special_tokens on Gemma 3, whose
// tokenizer begins prompts with <bos> and whose chat template writes it. Completions add it by default and not with false; chat gets
// the template's one by default, none more with false, and a second with
// true, as vLLM's tokenizer call adds one on top of the template's.
func TestRealAddSpecialTokens(t *testing.T) {
	files := realTokenizerFiles(t, "gemma3")
	e, _, tok := realEngine(t, files, Config{})
	bos := tok.BOS()
	if !tok.AddBOS() {
		t.Fatal("Gemma 3's tokenizer adds no BOS")
	}
	prepare := func(req *engine.Request, st engine.SpecialTokens) []int32 {
		t.Helper()
		req.SpecialTokens = st
		if err := e.Prepare(req); err != nil {
			t.Fatal(err)
		}
		return req.PromptTokens
	}
	text := tok.Encode(nil, "The sea is")
	for _, c := range []struct {
		st   engine.SpecialTokens
		want []int32
	}{
		{engine.SpecialTokensDefault, append([]int32{bos}, text...)},
		{engine.SpecialTokensAdd, append([]int32{bos}, text...)},
		{engine.SpecialTokensNone, text},
	} {
		if got := prepare(&engine.Request{Prompt: "The sea is", Sampling: engine.Sampling{MaxTokens: 4}}, c.st); !slices.Equal(got, c.want) {
			t.Errorf("completions, special tokens %d: %v, want %v", c.st, got, c.want)
		}
	}
	chat := func(st engine.SpecialTokens) []int32 {
		return prepare(&engine.Request{Messages: []engine.Message{{Role: "user", Content: "Hi"}}, Sampling: engine.Sampling{MaxTokens: 4}}, st)
	}
	def, none, add := chat(engine.SpecialTokensDefault), chat(engine.SpecialTokensNone), chat(engine.SpecialTokensAdd)
	if len(def) < 2 || def[0] != bos || def[1] == bos || !slices.Equal(none, def) {
		t.Errorf("chat: default %v, add_special_tokens false %v; want the template's one BOS in both", def[:min(3, len(def))], none[:min(3, len(none))])
	}
	if !slices.Equal(add, append([]int32{bos}, def...)) {
		t.Errorf("chat, add_special_tokens true: %v, want a second BOS before %v", add[:min(3, len(add))], def[:min(3, len(def))])
	}
}
