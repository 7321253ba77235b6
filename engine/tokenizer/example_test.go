package tokenizer_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/vajra-go/vajra/engine/llama/tinymodel"
	"github.com/vajra-go/vajra/engine/tokenizer"
)

// A tokenizer loads from a GGUF file (here a tiny model's) as from a
// tokenizer.json; Encode matches special-token text, Decode gives the text
// back.
func Example() {
	dir, _ := os.MkdirTemp("", "tok")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tiny.gguf")
	if err := tinymodel.WriteFile(path, tinymodel.Config{}); err != nil {
		panic(err)
	}
	tok, err := tokenizer.Load(path)
	if err != nil {
		panic(err)
	}
	ids := tok.Encode(nil, "<|im_start|>user\nHello world<|im_end|>")
	fmt.Println(ids[0] == tinymodel.TokenIMStart, tok.IsSpecial(ids[0]))
	fmt.Printf("%q\n", tok.Decode(nil, ids, true))
	var piece []byte
	for _, id := range ids[1:] {
		piece = tok.AppendPiece(piece, id)
	}
	fmt.Printf("%q\n", piece)
	// Output:
	// true true
	// "user\nHello world"
	// "user\nHello world<|im_end|>"
}
