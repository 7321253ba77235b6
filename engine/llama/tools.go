package llama

// Forced tool calls. tool_choice "required" or a named function is
// enforced as vLLM does it: with a grammar (grammar.ForToolChoice),
// independent of the model's own tool-call syntax and of
// --tool-call-parser; text.Forced (in pipeline.Out) turns the output into
// tool calls.

// forcedTool is how one request's choices are forced to call.
type forcedTool struct {
	name string // the named function; "" for required
}
