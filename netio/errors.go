package netio

import (
	"github.com/vajra-go/vajra/codegen/anthropic"
	"github.com/vajra-go/vajra/codegen/openai"
)

// appendErrorBody appends an error body in the route's dialect: OpenAI's
// {"error":{...}} or Anthropic's {"type":"error","error":{...}}. The error
// type comes from each dialect's one table, by status.
func appendErrorBody(dst []byte, d dialect, status int, code, message string) []byte {
	if d == dialectAnthropic {
		return anthropic.AppendErrorBody(dst, anthropic.TypeForStatus(status), message)
	}
	return openai.AppendErrorBody(dst, status, "", code, "", message)
}
