package grpcworker

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path"

	"github.com/vajra-go/vajra/engine/remote/commonpb"
)

// MaxTokenizerBytes bounds the tokenizer archive a worker may stream.
const MaxTokenizerBytes = 256 << 20

// TokenizerFiles assembles GetTokenizer's stream (common.proto's
// GetTokenizerChunk: the bytes of one ZIP archive in order, its SHA-256 in
// hex on the last chunk) and returns the archive's files by name.
func TokenizerFiles(recv func() (*commonpb.GetTokenizerChunk, error)) (map[string][]byte, error) {
	var buf bytes.Buffer
	var sum string
	for {
		c, err := recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if buf.Len()+len(c.GetData()) > MaxTokenizerBytes {
			return nil, fmt.Errorf("tokenizer archive over %d bytes", MaxTokenizerBytes)
		}
		buf.Write(c.GetData())
		if c.GetSha256() != "" {
			sum = c.GetSha256()
		}
	}
	if buf.Len() == 0 {
		return nil, fmt.Errorf("the worker sent an empty tokenizer archive")
	}
	if sum != "" {
		got := sha256.Sum256(buf.Bytes())
		if hex.EncodeToString(got[:]) != sum {
			return nil, fmt.Errorf("tokenizer archive: sha256 %x, the worker said %s", got, sum)
		}
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		return nil, fmt.Errorf("tokenizer archive: %w", err)
	}
	files := make(map[string][]byte, len(zr.File))
	var total int64
	for _, f := range zr.File {
		if f.FileInfo().IsDir() {
			continue
		}
		name := path.Base(f.Name)
		total += int64(f.UncompressedSize64)
		if total > MaxTokenizerBytes {
			return nil, fmt.Errorf("tokenizer archive expands past %d bytes", MaxTokenizerBytes)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("tokenizer archive: %s: %w", f.Name, err)
		}
		b, err := io.ReadAll(io.LimitReader(rc, MaxTokenizerBytes+1))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("tokenizer archive: %s: %w", f.Name, err)
		}
		files[name] = b
	}
	return files, nil
}
