package remote

import (
	"github.com/vajra-go/vajra/engine/tokenizer"
)

// Local is the remote engine's Tokenizer over engine/tokenizer's (a Hugging
// Face tokenizer.json, a model folder or a GGUF file: --tokenizer, or the
// files a worker sends). Safe for concurrent use.
func Local(t *tokenizer.Tokenizer) Tokenizer { return localTok{t} }

// LoadTokenizer loads --tokenizer PATH (see tokenizer.Load).
func LoadTokenizer(path string) (Tokenizer, error) {
	t, err := tokenizer.Load(path)
	if err != nil {
		return nil, err
	}
	return Local(t), nil
}

// TokenizerFromFiles builds a Tokenizer from a worker's files (see
// tokenizer.FromFiles); the default of Config.TokenizerFromFiles.
func TokenizerFromFiles(files map[string][]byte) (Tokenizer, error) {
	t, err := tokenizer.FromFiles(files)
	if err != nil {
		return nil, err
	}
	return Local(t), nil
}

type localTok struct{ *tokenizer.Tokenizer }

func (l localTok) BOS() int32 {
	if _, id, ok := l.Tokenizer.BOS(); ok {
		return id
	}
	return -1
}

func (l localTok) EOS() int32 {
	if _, id, ok := l.Tokenizer.EOS(); ok {
		return id
	}
	return -1
}

// toolTemplate is the tokenizer's "tool_use" chat template, "" when none.
func (l localTok) toolTemplate() string { return l.NamedTemplates()["tool_use"] }
