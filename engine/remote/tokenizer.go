package remote

import "context"

// Tokenizer is what the remote engine needs of a tokenizer: engine/
// tokenizer's (a Hugging Face tokenizer.json or a GGUF vocabulary, by
// --tokenizer or from the worker's files), or a worker's own (a Client
// that implements TokenizerSource, such as llama-server's /tokenize).
// Implementations are safe for concurrent use.
type Tokenizer interface {
	// Encode appends the ids of text to dst: the text of special tokens
	// becomes their ids; no BOS is added.
	Encode(dst []int32, text string) []int32
	// AppendPiece appends the raw bytes of token id (not necessarily
	// valid UTF-8 on its own) to dst. Per token: it must not allocate.
	AppendPiece(dst []byte, id int32) []byte
	// IsSpecial reports a control token (BOS, EOS, template markers),
	// whose text is not part of generated output.
	IsSpecial(id int32) bool
	// VocabSize is the number of ids.
	VocabSize() int
	// ChatTemplate is the tokenizer's Jinja chat template, "" when none.
	ChatTemplate() string
	// BOS and EOS are the ids of the beginning- and end-of-sequence
	// tokens, -1 when none; AddBOS says a prompt starts with BOS.
	BOS() int32
	EOS() int32
	AddBOS() bool
}

// TokenizerSource is a Client whose worker tokenizes for the engine (when
// no tokenizer was configured and the protocol has no tokenizer files):
// llama-server's /tokenize, /props and vocabulary.
type TokenizerSource interface {
	WorkerTokenizer(ctx context.Context) (Tokenizer, error)
}
