package llamaserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/vajra-go/vajra/engine/remote"
)

// WorkerTokenizer builds a tokenizer from the worker itself, for when
// Vajra was given none: the piece of every token id (one /tokenize call
// with all ids and with_pieces), which tokens are special (a piece like
// "<|im_end|>" that /tokenize reads back as that one id only when parsing
// special tokens), BOS, EOS and add_bos from /props and /tokenize, and the
// chat template from /props. Decoding is then local and allocation-free;
// encoding a prompt asks the worker's /tokenize (one round trip per
// request, before the 200).
func (c *Client) WorkerTokenizer(ctx context.Context) (remote.Tokenizer, error) {
	info, err := c.info(ctx)
	if err != nil {
		return nil, err
	}
	n := info.VocabSize
	if n <= 0 {
		return nil, errors.New("llamaserver: the worker reports no vocabulary size (/v1/models meta.n_vocab)")
	}
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(i)
	}
	body, _ := json.Marshal(map[string]any{"content": ids, "with_pieces": true, "parse_special": true})
	b, err := c.do(ctx, http.MethodPost, "/tokenize", body)
	if err != nil {
		return nil, err
	}
	var out struct {
		Tokens []struct {
			ID    int32           `json:"id"`
			Piece json.RawMessage `json:"piece"`
		} `json:"tokens"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("llamaserver: /tokenize with_pieces: %w", err)
	}
	if len(out.Tokens) != n {
		return nil, fmt.Errorf("llamaserver: /tokenize gave %d pieces for %d ids", len(out.Tokens), n)
	}
	t := &workerTok{c: c, off: make([]uint32, n+1), special: make([]bool, n), bos: info.BOSTokenID, eos: -1,
		tmpl: info.ChatTemplate}
	if len(info.EOSTokenIDs) > 0 {
		t.eos = info.EOSTokenIDs[0]
	}
	for i, tk := range out.Tokens {
		t.off[i] = uint32(len(t.pieces))
		var s string
		if err := json.Unmarshal(tk.Piece, &s); err == nil {
			t.pieces = append(t.pieces, s...)
		} else {
			var raw []byte
			var ints []int
			if err := json.Unmarshal(tk.Piece, &ints); err != nil {
				return nil, fmt.Errorf("llamaserver: /tokenize: piece of %d: %w", i, err)
			}
			for _, v := range ints {
				raw = append(raw, byte(v))
			}
			t.pieces = append(t.pieces, raw...)
		}
	}
	t.off[n] = uint32(len(t.pieces))
	for _, id := range []int32{t.bos, t.eos} {
		if id >= 0 && int(id) < n {
			t.special[id] = true
		}
	}
	for i := 0; i < n; i++ {
		p := t.piece(int32(i))
		if len(p) < 3 || !(p[0] == '<' && p[len(p)-1] == '>' || p[0] == '[' && p[len(p)-1] == ']') {
			continue
		}
		plain, err := c.tokenize(ctx, string(p), false, false)
		if err != nil {
			return nil, err
		}
		if len(plain) != 1 || plain[0] != int32(i) {
			t.special[i] = true
		}
	}
	with, err := c.tokenize(ctx, "a", true, true)
	if err != nil {
		return nil, err
	}
	without, err := c.tokenize(ctx, "a", false, true)
	if err != nil {
		return nil, err
	}
	t.addBOS = len(with) > len(without) && t.bos >= 0 && with[0] == t.bos
	return t, nil
}

// WorkerEncode implements remote.TokenizerSource: the worker's /tokenize
// of text, special-token text parsed, no BOS.
func (c *Client) WorkerEncode(ctx context.Context, dst []int32, text string) ([]int32, error) {
	ids, err := c.tokenize(ctx, text, false, true)
	if err != nil {
		return dst, err
	}
	return append(dst, ids...), nil
}

// workerTok is a llama-server's vocabulary: pieces held locally, encoding
// by the worker.
type workerTok struct {
	c       *Client
	pieces  []byte
	off     []uint32
	special []bool
	bos     int32
	eos     int32
	addBOS  bool
	tmpl    string
}

func (t *workerTok) piece(id int32) []byte { return t.pieces[t.off[id]:t.off[id+1]] }

// Encode asks the worker; on failure it returns dst unchanged (see EncodeErr).
func (t *workerTok) Encode(dst []int32, text string) []int32 {
	out, _ := t.EncodeErr(dst, text)
	return out
}

// EncodeErr is Encode with the worker's failure.
func (t *workerTok) EncodeErr(dst []int32, text string) ([]int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30e9)
	defer cancel()
	ids, err := t.c.tokenize(ctx, text, false, true)
	if err != nil {
		return dst, err
	}
	return append(dst, ids...), nil
}

func (t *workerTok) AppendPiece(dst []byte, id int32) []byte {
	if id < 0 || int(id) >= len(t.special) {
		return dst
	}
	return append(dst, t.piece(id)...)
}

func (t *workerTok) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(t.special) && t.special[id]
}

func (t *workerTok) VocabSize() int       { return len(t.special) }
func (t *workerTok) ChatTemplate() string { return t.tmpl }
func (t *workerTok) BOS() int32           { return t.bos }
func (t *workerTok) EOS() int32           { return t.eos }
func (t *workerTok) AddBOS() bool         { return t.addBOS }
