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
		return anthropic.AppendErrorBody(dst, anthropicType(status), message)
	}
	return openai.AppendErrorBody(dst, status, "", code, "", message)
}

// anthropicType finds the Anthropic error type of a status in the dialect's
// table.
func anthropicType(status int) string {
	for k := anthropic.KindInvalidRequest; k <= anthropic.KindOverloaded; k++ {
		if k.Status() == status {
			return k.Type()
		}
	}
	if status >= 500 {
		return anthropic.KindAPI.Type()
	}
	return anthropic.KindInvalidRequest.Type()
}
