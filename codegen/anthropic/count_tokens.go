package anthropic

import (
	"github.com/mailru/easyjson/jlexer"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// CountTokensRequest is the body of POST /v1/messages/count_tokens: the
// fields of a Messages request without max_tokens (which is ignored if
// sent). It shares MessagesRequest's generated decoder.
type CountTokensRequest struct {
	MessagesRequest
}

// DecodeCountTokensRequest decodes the body of POST
// /v1/messages/count_tokens into r, like DecodeMessagesRequest.
func DecodeCountTokensRequest(body []byte, r *CountTokensRequest) error {
	if e := checkText(body); e != nil {
		return e
	}
	in := jlexer.Lexer{Data: body}
	r.MessagesRequest.UnmarshalEasyJSON(&in)
	return in.Error()
}

// ToEngine validates r and fills dst like MessagesRequest.ToEngine, without
// requiring max_tokens. The server then calls Engine.Prepare(dst) and
// answers AppendCountTokens(len(dst.PromptTokens)); it never starts dst.
func (r *CountTokensRequest) ToEngine(dst *engine.Request) *Error {
	return r.toEngine(dst, false)
}

// AppendCountTokens appends the count_tokens body, {"input_tokens":n}.
func AppendCountTokens(dst []byte, n int) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = codegen.AppendInt(dst, int64(n))
	return append(dst, '}')
}
