package remote

import (
	"context"
	"errors"
	"slices"
	"time"
)

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
// llama-server's /tokenize, /props and vocabulary. The engine builds its
// Tokenizer from one such worker (WorkerTokenizer: the pieces are then
// local) and encodes prompts on any healthy one serving the same
// vocabulary (WorkerEncode), so that the worker it came from may go down.
type TokenizerSource interface {
	WorkerTokenizer(ctx context.Context) (Tokenizer, error)
	// WorkerEncode appends the worker's ids of text to dst (special-token
	// text parsed, no BOS), or fails with a *WorkerError.
	WorkerEncode(ctx context.Context, dst []int32, text string) ([]int32, error)
}

// workerEncodeTimeout bounds one worker's tokenization of a prompt.
const workerEncodeTimeout = 30 * time.Second

// anyWorkerTok is the Tokenizer of a TokenizerSource (see there) with
// encoding on any healthy worker: the one tok came from while it is up,
// else the next healthy worker whose client is a TokenizerSource and
// whose vocabulary has tok's size. A worker that cannot be reached is
// marked down and the next one asked. Safe for concurrent use.
type anyWorkerTok struct {
	Tokenizer
	e    *Engine
	from *Worker
}

// EncodeErr tokenizes text on a worker (see anyWorkerTok).
func (t *anyWorkerTok) EncodeErr(dst []int32, text string) ([]int32, error) {
	var tried [8]*Worker
	n := 0
	var last error
	for {
		w := t.pick(tried[:n])
		if w == nil {
			if last == nil {
				last = errors.New("no healthy worker can tokenize")
			}
			return dst, last
		}
		ctx, cancel := context.WithTimeout(context.Background(), workerEncodeTimeout)
		out, err := w.client.(TokenizerSource).WorkerEncode(ctx, dst, text)
		cancel()
		if err == nil {
			return out, nil
		}
		var we *WorkerError
		if !errors.As(err, &we) || we.Status != 0 || n == len(tried) {
			return dst, err
		}
		t.e.failed(w)
		tried[n] = w
		n++
		last = err
	}
}

// Encode is EncodeErr without its error (dst unchanged on failure).
func (t *anyWorkerTok) Encode(dst []int32, text string) []int32 {
	out, _ := t.EncodeErr(dst, text)
	return out
}

// pick is the worker tok came from while it is healthy, else the first
// healthy worker (not in tried) that can encode for tok.
func (t *anyWorkerTok) pick(tried []*Worker) *Worker {
	ok := func(w *Worker) bool {
		if !w.healthy.Load() || slices.Contains(tried, w) {
			return false
		}
		if _, src := w.client.(TokenizerSource); !src {
			return false
		}
		info := w.info.Load()
		return info != nil && (info.VocabSize == 0 || info.VocabSize == t.VocabSize())
	}
	if ok(t.from) && !t.from.draining.Load() {
		return t.from
	}
	for _, w := range t.e.list() {
		if ok(w) {
			return w
		}
	}
	return nil
}
