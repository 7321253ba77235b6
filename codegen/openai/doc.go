// Package openai is the OpenAI dialect's wire format: request schemas with
// easyjson codecs, their validation into engine.Request, the non-streaming
// bodies, the stream Formatters, the error table and the model list.
//
// A chat completions request, in the session actor:
//
//	var req openai.ChatRequest // poolable: Decode resets it
//	if err := openai.DecodeChatRequest(body, &req); err != nil {
//		pe := err.(*openai.ParamError) // 400; pe.AppendBody(dst)
//	}
//	// req.Unknown: unknown top-level keys, to count per (endpoint, key).
//	var q engine.Request
//	if pe := req.ToEngine(&q); pe != nil { /* 400: pe.AppendBody(dst) */ }
//	q.ID, q.Arrival = ..., ...
//	if q.Stream {
//		opts := req.ChatStreamOptions()
//		opts.Framing = codegen.FramingChunked
//		q.Formatter = openai.NewChatFormatter("chatcmpl-"+id, model, created, opts)
//	}
//	// Engine.Prepare: on error e, ae := openai.FromEngineError(engine.AsError(e), "messages")
//	// → ae.Status(), ae.AppendBody(dst) (context_length_exceeded is a 400).
//	// Streaming: forward the frames; the Formatter ends the body itself
//	// (AppendEnd / AppendError write data: [DONE] and the last chunk).
//	// Non-streaming: openai.AppendChatCompletion(dst, &openai.ChatCompletionMeta{
//	//	ID: "chatcmpl-"+id, Model: model, Created: created, Logprobs: q.Sampling.Logprobs}, result)
//
// Completions are the same with CompletionRequest, DecodeCompletionRequest,
// NewCompletionFormatter (set CompletionStreamOptions.EchoPrompt to the
// prompt text when echo is on; Detokenize a token prompt) and
// AppendCompletion; the prompt parameter for FromEngineError is "prompt".
//
// Every Append function appends to a caller's buffer and returns it; none
// uses reflection. Formatters allocate nothing after NewXFormatter/Reset.
package openai
