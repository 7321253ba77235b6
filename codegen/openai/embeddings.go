package openai

//go:generate go tool easyjson -no_std_marshalers embeddings.go

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strconv"

	"github.com/mailru/easyjson/jlexer"
	"github.com/mailru/easyjson/opt"

	"github.com/vajra-go/vajra/codegen"
)

// This file holds POST /v1/embeddings: the request schema (OpenAI's, as
// vLLM takes it), its checks, and the response encoder. Codecs for the
// structs marked easyjson:json are generated into embeddings_easyjson.go.

// MaxEmbeddingInputs is the most inputs of one request (OpenAI's limit).
const MaxEmbeddingInputs = 2048

// EmbeddingRequest is the body of POST /v1/embeddings.
//
//easyjson:json
type EmbeddingRequest struct {
	Model string `json:"model,intern"`
	// Input is a string, an array of strings, an array of token ids or an
	// array of arrays of token ids (the forms of a completions prompt).
	Input Prompt `json:"input"`
	// EncodingFormat is "float" (the default) or "base64": the vector's
	// little-endian float32 bytes, base64-encoded.
	EncodingFormat string `json:"encoding_format,intern"`
	// Dimensions asks for shorter vectors, which only a model trained for
	// it (Matryoshka) can give; refused otherwise.
	Dimensions opt.Int `json:"dimensions"`
	// Accepted and not used.
	User string `json:"user"`
	// Unknown lists the unknown top-level keys (see ChatRequest.Unknown).
	Unknown []string `json:"-"`
}

// UnmarshalUnknown implements easyjson.UnknownsUnmarshaler.
func (r *EmbeddingRequest) UnmarshalUnknown(in *jlexer.Lexer, key string) {
	recordUnknown(&r.Unknown, in, key)
}

// DecodeEmbeddingRequest decodes an embeddings body into r, which it resets
// first, and checks it: the error, when not nil, is a *ParamError naming
// the field at fault. A model without Matryoshka embeddings refuses
// dimensions (matryoshka false), as OpenAI's text-embedding-ada-002 and
// vLLM do.
func DecodeEmbeddingRequest(body []byte, r *EmbeddingRequest, matryoshka bool) error {
	unk := r.Unknown[:0]
	*r = EmbeddingRequest{Unknown: unk}
	if pe := checkText(body); pe != nil {
		return pe
	}
	in := jlexer.Lexer{Data: body}
	r.UnmarshalEasyJSON(&in)
	if err := in.Error(); err != nil {
		return decodeError(body, err)
	}
	p := &r.Input
	switch n := p.Count(); {
	case n == 0 && !p.Array:
		return &ParamError{Param: "input", Code: CodeMissing, Message: "Missing required parameter: 'input'."}
	case n == 0:
		return &ParamError{Param: "input", Code: CodeInvalidValue, Message: "'input' must not be an empty array."}
	case n > MaxEmbeddingInputs:
		return &ParamError{Param: "input", Code: CodeInvalidValue,
			Message: "'input' holds " + strconv.Itoa(n) + " inputs; at most " + strconv.Itoa(MaxEmbeddingInputs) + " per request."}
	}
	for i, s := range p.Texts {
		if s == "" {
			return &ParamError{Param: inputParam(p, i), Code: CodeInvalidValue, Message: "'" + inputParam(p, i) + "' must not be an empty string."}
		}
	}
	for i, ids := range p.Tokens {
		if len(ids) == 0 {
			return &ParamError{Param: inputParam(p, i), Code: CodeInvalidValue, Message: "'" + inputParam(p, i) + "' must not be an empty array of token ids."}
		}
		for _, id := range ids {
			if id < 0 || id > math.MaxInt32 {
				return &ParamError{Param: inputParam(p, i), Code: CodeInvalidValue, Message: "'" + inputParam(p, i) + "' holds the token id " + strconv.Itoa(id) + ", which is not a valid token id."}
			}
		}
	}
	switch r.EncodingFormat {
	case "", "float", "base64":
	default:
		return &ParamError{Param: "encoding_format", Code: CodeInvalidValue,
			Message: "Invalid value for 'encoding_format': '" + truncate(r.EncodingFormat) + "'. Supported values are: 'float' and 'base64'."}
	}
	if r.Dimensions.Defined {
		if !matryoshka {
			return &ParamError{Param: "dimensions", Code: CodeUnsupported, Message: "This model does not support specifying dimensions."}
		}
		if r.Dimensions.V < 1 {
			return &ParamError{Param: "dimensions", Code: CodeInvalidValue, Message: "'dimensions' must be at least 1."}
		}
	}
	return nil
}

// inputParam names input i in an error: "input" for a lone input,
// "input[i]" in an array.
func inputParam(p *Prompt, i int) string {
	if !p.Array || (len(p.Tokens) == 1 && len(p.Texts) == 0) {
		return "input"
	}
	return "input[" + strconv.Itoa(i) + "]"
}

// truncate bounds a client's value echoed in a message.
func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

// AppendEmbeddingResponse appends the body of an embeddings response:
// OpenAI's {"object":"list","data":[{"object":"embedding","index":i,
// "embedding":…}],"model":…,"usage":{"prompt_tokens","total_tokens"}}, each
// vector a JSON array of numbers or, with b64, the base64 of its
// little-endian float32 bytes.
func AppendEmbeddingResponse(dst []byte, model string, vectors [][]float32, b64 bool, promptTokens int) []byte {
	dst = append(dst, `{"object":"list","data":[`...)
	var raw []byte
	for i, v := range vectors {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"object":"embedding","index":`...)
		dst = strconv.AppendInt(dst, int64(i), 10)
		dst = append(dst, `,"embedding":`...)
		if b64 {
			raw = raw[:0]
			for _, x := range v {
				raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(x))
			}
			dst = append(dst, '"')
			dst = base64.StdEncoding.AppendEncode(dst, raw)
			dst = append(dst, '"')
		} else {
			dst = append(dst, '[')
			for k, x := range v {
				if k > 0 {
					dst = append(dst, ',')
				}
				dst = codegen.AppendFloat(dst, x)
			}
			dst = append(dst, ']')
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `],"model":`...)
	dst = codegen.AppendJSONStringS(dst, model)
	dst = append(dst, `,"usage":{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(promptTokens), 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(promptTokens), 10)
	return append(dst, `}}`...)
}
