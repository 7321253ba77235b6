package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Dialect is an API whose streams the instrument speaks.
type Dialect string

// The dialects. Each has a path (under the base path), a request body and a
// rule for what counts as one token (see WIRE.md).
const (
	DialectChat        Dialect = "chat"        // POST /v1/chat/completions: non-empty delta.content
	DialectCompletions Dialect = "completions" // POST /v1/completions: non-empty choices[].text
	DialectResponses   Dialect = "responses"   // POST /v1/responses: response.output_text.delta
	DialectMessages    Dialect = "messages"    // POST /v1/messages: content_block_delta text_delta/thinking_delta
	DialectRealtime    Dialect = "realtime"    // GET /v1/realtime (WebSocket): response.output_text.delta
	// DialectEmbeddings is POST /v1/embeddings: never streamed, no output
	// tokens; a request is its latency (the prompt is the one input).
	DialectEmbeddings Dialect = "embeddings"
)

// Dialects lists every dialect, for flag help.
var Dialects = []Dialect{DialectChat, DialectCompletions, DialectResponses, DialectMessages, DialectRealtime, DialectEmbeddings}

// path returns the request path under the base path.
func (d Dialect) path() string {
	switch d {
	case DialectChat:
		return "/chat/completions"
	case DialectCompletions:
		return "/completions"
	case DialectResponses:
		return "/responses"
	case DialectMessages:
		return "/messages"
	case DialectRealtime:
		return "/realtime"
	case DialectEmbeddings:
		return "/embeddings"
	}
	return ""
}

func parseDialect(s string) (Dialect, error) {
	for _, d := range Dialects {
		if string(d) == s {
			return d, nil
		}
	}
	return "", fmt.Errorf("bench: unknown dialect %q (want one of %v)", s, Dialects)
}

// promptWords are cycled to build prompts: common short words, about one
// token each in the usual BPE vocabularies.
var promptWords = strings.Fields(`time person year way day thing man world life hand part child eye
woman place work week case point number group problem fact home water room mother area money story
month lot right study book job word side kind head house friend hour game line end member law car city
name team minute idea kid body back parent face others level office door health art war history party`)

// BuildPrompt returns a prompt of about n tokens: n words, one token each.
func BuildPrompt(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(promptWords[i%len(promptWords)])
	}
	return b.String()
}

// requestBody returns the JSON body of one request of dialect d.
func requestBody(d Dialect, model, prompt string, maxTokens int, stream bool) []byte {
	return requestBodyStored(d, model, prompt, maxTokens, stream, false, "")
}

// requestBodyStored is requestBody with the Responses API's store and
// previous_response_id (prev, when not empty).
func requestBodyStored(d Dialect, model, prompt string, maxTokens int, stream, store bool, prev string) []byte {
	msgs := []map[string]any{{"role": "user", "content": prompt}}
	var m map[string]any
	switch d {
	case DialectChat:
		m = map[string]any{"model": model, "messages": msgs, "max_tokens": maxTokens, "stream": stream, "ignore_eos": true}
		if stream {
			m["stream_options"] = map[string]any{"include_usage": true}
		}
	case DialectCompletions:
		m = map[string]any{"model": model, "prompt": prompt, "max_tokens": maxTokens, "stream": stream, "ignore_eos": true}
	case DialectResponses:
		m = map[string]any{"model": model, "input": prompt, "max_output_tokens": maxTokens, "stream": stream, "ignore_eos": true, "store": store}
		if prev != "" {
			m["previous_response_id"] = prev
		}
	case DialectMessages:
		m = map[string]any{"model": model, "messages": msgs, "max_tokens": maxTokens, "stream": stream, "ignore_eos": true}
	case DialectEmbeddings:
		m = map[string]any{"model": model, "input": prompt, "encoding_format": "float"}
	}
	b, _ := json.Marshal(m)
	return b
}

// requestFor is cfg's request body for prompt (store and prev as
// requestBodyStored's): the dialect's body with -top-logprobs and
// -extra-body applied.
func requestFor(cfg *Config, prompt string, store bool, prev string) []byte {
	body := requestBodyStored(cfg.Dialect, cfg.Model, prompt, cfg.MaxTokens, cfg.Stream, store, prev)
	return withFields(cfg.Dialect, body, cfg.TopLogprobs, cfg.ExtraBody)
}

// jsonObject reports whether s is one JSON object.
func jsonObject(s string) bool {
	var m map[string]any
	return json.Unmarshal([]byte(s), &m) == nil && m != nil
}

// withFields adds to body, decoded and encoded once: logprobs with top
// alternatives when top > 0 and body is a Chat Completions body
// (-top-logprobs), then the fields of the JSON object extra (-extra-body,
// validated), which win. With neither, body is returned as it is.
func withFields(d Dialect, body []byte, top int, extra string) []byte {
	lp := top > 0 && d == DialectChat
	if !lp && extra == "" {
		return body
	}
	var m, x map[string]any
	if json.Unmarshal(body, &m) != nil || (extra != "" && json.Unmarshal([]byte(extra), &x) != nil) {
		return body
	}
	if lp {
		m["logprobs"], m["top_logprobs"] = true, top
	}
	for k, v := range x {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return b
}

// realtimeMessages returns the two client events of one Realtime request:
// conversation.item.create with a user text item, then response.create.
func realtimeMessages(prompt string, maxTokens int, beta bool) (item, create []byte) {
	item, _ = json.Marshal(map[string]any{
		"type": "conversation.item.create",
		"item": map[string]any{"type": "message", "role": "user",
			"content": []map[string]any{{"type": "input_text", "text": prompt}}},
	})
	resp := map[string]any{"max_output_tokens": maxTokens, "output_modalities": []string{"text"}}
	if beta {
		resp = map[string]any{"max_response_output_tokens": maxTokens, "modalities": []string{"text"}}
	}
	create, _ = json.Marshal(map[string]any{"type": "response.create", "response": resp})
	return item, create
}

// eventKind is what an event means to the instrument.
type eventKind uint8

const (
	evOther    eventKind = iota
	evToken              // one token
	evTerminal           // the stream's normal end
	evError              // an in-stream error (the stream may continue to its end)
	evFailed             // an in-stream error that also ends the stream
	evStart              // the response started (Realtime: response.created)
)

// Byte patterns searched in event data. A JSON key with its quotes cannot
// occur inside a JSON string value (the quotes would be escaped there), so a
// substring search for `"key":` finds only real keys.
var (
	patDone          = []byte("[DONE]")
	patErrorObj      = []byte(`"error":{`)
	patContent       = []byte(`"content":"`)
	patText          = []byte(`"text":"`)
	patEmptyContent  = []byte(`"content":""`)
	patEmptyText     = []byte(`"text":""`)
	patDelta         = []byte(`"delta":"`)
	patThinking      = []byte(`"thinking":"`)
	patTextDelta     = []byte(`"text_delta"`)
	patThinkingDelta = []byte(`"thinking_delta"`)
	patType          = []byte(`"type":"`)
	patUsageObj      = []byte(`"usage":{`)
	patCompletionTok = []byte(`"completion_tokens":`)
	patOutputTok     = []byte(`"output_tokens":`)
	patStatusFailed  = []byte(`"status":"failed"`)
	patStatusCancel  = []byte(`"status":"cancelled"`)
)

// nonEmptyString reports whether the JSON string value starting right after
// pat in data is non-empty.
func nonEmptyString(data, pat []byte) bool {
	i := bytes.Index(data, pat)
	if i < 0 {
		return false
	}
	j := i + len(pat)
	return j < len(data) && data[j] != '"'
}

// emptyText reports whether a chat or completions chunk carries a
// choice's empty content or text (for Config.EveryChunk).
func emptyText(d Dialect, data []byte) bool {
	switch d {
	case DialectChat:
		return bytes.Contains(data, patEmptyContent)
	case DialectCompletions:
		return bytes.Contains(data, patEmptyText)
	}
	return false
}

// eventType returns the event's type: the SSE `event:` name, or else the
// first "type" value of the data (the top-level one in every dialect, which
// all put "type" first).
func eventType(name, data []byte) []byte {
	if len(name) > 0 {
		return name
	}
	i := bytes.Index(data, patType)
	if i < 0 {
		return nil
	}
	v := data[i+len(patType):]
	if j := bytes.IndexByte(v, '"'); j >= 0 {
		return v[:j]
	}
	return nil
}

// classify says what one event of dialect d means, without decoding JSON.
func classify(d Dialect, name, data []byte) eventKind {
	switch d {
	case DialectChat, DialectCompletions:
		if bytes.Equal(data, patDone) {
			return evTerminal
		}
		// Tokens first: one scan on the hot path. A chunk with an error
		// object carries no delta content (WIRE.md: never an error key in a
		// normal chunk).
		pat := patContent
		if d == DialectCompletions {
			pat = patText
		}
		if nonEmptyString(data, pat) {
			return evToken
		}
		if bytes.Contains(data, patErrorObj) {
			return evError
		}
	case DialectResponses:
		switch string(eventType(name, data)) {
		case "response.output_text.delta":
			if nonEmptyString(data, patDelta) {
				return evToken
			}
		case "response.completed", "response.incomplete":
			return evTerminal
		case "response.failed":
			return evFailed
		case "error":
			return evError
		}
	case DialectMessages:
		switch string(eventType(name, data)) {
		case "content_block_delta":
			if bytes.Contains(data, patTextDelta) && nonEmptyString(data, patText) ||
				bytes.Contains(data, patThinkingDelta) && nonEmptyString(data, patThinking) {
				return evToken
			}
		case "message_stop":
			return evTerminal
		case "error":
			return evError
		}
	case DialectRealtime:
		switch string(eventType(nil, data)) {
		case "response.output_text.delta", "response.text.delta":
			if nonEmptyString(data, patDelta) {
				return evToken
			}
		case "response.created":
			return evStart
		case "response.done":
			if bytes.Contains(data, patStatusFailed) || bytes.Contains(data, patStatusCancel) {
				return evFailed
			}
			return evTerminal
		case "error":
			return evError
		}
	}
	return evOther
}

// usageTokens returns the output token count a usage block in data reports,
// or -1: completion_tokens (chat, completions) or output_tokens (the others).
func usageTokens(data []byte) int {
	i := bytes.Index(data, patCompletionTok)
	k := len(patCompletionTok)
	if i < 0 {
		i = bytes.Index(data, patOutputTok)
		k = len(patOutputTok)
	}
	if i < 0 {
		return -1
	}
	j := i + k
	for j < len(data) && data[j] == ' ' {
		j++
	}
	n, digits := 0, 0
	for ; j < len(data) && data[j] >= '0' && data[j] <= '9' && digits < 12; j++ {
		n = n*10 + int(data[j]-'0')
		digits++
	}
	if digits == 0 {
		return -1
	}
	return n
}

var patID = []byte(`"id":"`)

// appendFirstID appends the value of the first "id" member in data: a
// Responses object's own id, in a body or in the response of a terminal
// event (whose first object member with an id is the response).
func appendFirstID(dst, data []byte) []byte {
	i := bytes.Index(data, patID)
	if i < 0 {
		return dst
	}
	v := data[i+len(patID):]
	if j := bytes.IndexByte(v, '"'); j >= 0 {
		return append(dst, v[:j]...)
	}
	return dst
}
