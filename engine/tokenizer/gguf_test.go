package tokenizer

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/vajra-go/vajra/engine/llama/tinymodel"
	"github.com/vajra-go/vajra/internal/llamaserver"
)

func tinyModel(t testing.TB) (string, *Tokenizer) {
	t.Helper()
	path, err := tinymodel.TempFile(t.TempDir(), tinymodel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Load(path)
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	return path, tok
}

// TestGGUFLlamaCpp loads a tiny model's GGUF (byte-level "gpt2" vocabulary,
// qwen2 pre-tokenizer) and checks Encode against the ids llama.cpp gave for
// the same texts with parse_special on (engine/llama/tinymodel's recorded
// testdata/llamacpp_tokens.json), and the special tokens' metadata.
func TestGGUFLlamaCpp(t *testing.T) {
	_, tok := tinyModel(t)
	b, err := os.ReadFile(filepath.Join("..", "llama", "tinymodel", "testdata", "llamacpp_tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Text string  `json:"text"`
		IDs  []int32 `json:"ids"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 10 {
		t.Fatalf("%d cases", len(cases))
	}
	for _, c := range cases {
		if got := tok.Encode(nil, c.Text); !slices.Equal(got, c.IDs) {
			t.Errorf("Encode(%.40q):\n got %v\nwant %v", c.Text, got, c.IDs)
		}
		if got := tok.Decode(nil, c.IDs, false); string(got) != c.Text {
			t.Errorf("Decode(Encode(%.40q)) = %q", c.Text, got)
		}
	}
	if s, id, ok := tok.EOS(); !ok || s != "<|im_end|>" || id != tinymodel.TokenIMEnd {
		t.Errorf("EOS() = %q, %d, %v", s, id, ok)
	}
	if s, id, ok := tok.BOS(); !ok || s != "<|endoftext|>" || id != tinymodel.TokenEndOfText {
		t.Errorf("BOS() = %q, %d, %v", s, id, ok)
	}
	if tok.AddBOS() {
		t.Error("AddBOS() = true; the tiny model says add_bos_token false")
	}
	if !tok.IsSpecial(tinymodel.TokenIMStart) || tok.IsSpecial(tinymodel.TokenThink) {
		t.Error("control tokens are special, user-defined ones are not")
	}
	if tok.ChatTemplate() == "" {
		t.Error("no chat template")
	}
	if got := tok.VocabSize(); got != len(tinymodel.DefaultVocab().Tokens) {
		t.Errorf("VocabSize() = %d, want %d", got, len(tinymodel.DefaultVocab().Tokens))
	}
}

// TestGGUFCorpus compares Encode on the tiny model with tinymodel's own
// encoder (itself checked against llama.cpp) on the whole golden corpus.
func TestGGUFCorpus(t *testing.T) {
	_, tok := tinyModel(t)
	v := tinymodel.DefaultVocab()
	corpus := readJSONLines[string](t, filepath.Join("testdata", "corpus.jsonl.gz"))
	bad := 0
	for _, s := range corpus {
		want := v.Encode(s, true)
		if got := tok.Encode(nil, s); !slices.Equal(got, want) {
			if bad++; bad <= 5 {
				t.Errorf("Encode(%.60q):\n got %v\nwant %v", s, got, want)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d strings differ", bad, len(corpus))
	}
}

// TestGGUFLlamaServer asks a real llama-server (make llama-server) running
// the tiny model to tokenize 1,000 corpus strings and compares the ids.
func TestGGUFLlamaServer(t *testing.T) {
	path, tok := tinyModel(t)
	srv := llamaserver.Start(t, path, "-c", "512", "-np", "1")
	corpus := readJSONLines[string](t, filepath.Join("testdata", "corpus.jsonl.gz"))
	client := &http.Client{Timeout: 10 * time.Second}
	bad := 0
	for i, s := range corpus[:1000] {
		body, _ := json.Marshal(map[string]any{"content": s, "add_special": false, "parse_special": true})
		resp, err := client.Post(srv.URL()+"/tokenize", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("string %d: %v", i, err)
		}
		var out struct {
			Tokens []int32 `json:"tokens"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("string %d: %v", i, err)
		}
		if got := tok.Encode(nil, s); !slices.Equal(got, out.Tokens) {
			if bad++; bad <= 5 {
				t.Errorf("Encode(%.60q):\n got %v\nllama-server %v", s, got, out.Tokens)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of 1000 strings differ from llama-server", bad)
	}
}
