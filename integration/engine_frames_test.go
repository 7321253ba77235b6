package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
)

// An engine that formats its own frames (a native engine with formatters of
// its own, the design's "engine-formatted chunks") plugs in: it writes every
// byte of the stream from Request.StreamInfo, and the session does the rest
// (ids, the Responses store's save, errors of its own) without a Formatter.

// selfFramed is an engine that writes its own pre-framed bytes. It takes the
// Formatter away from the request in Start (so any later use of it by the
// session would crash the session and fail the test) and builds each frame
// by hand from req.StreamInfo, never with codegen. It answers every request
// with the same pieces, one per step. For chat it also drives the dialect's
// Go Formatter with the same output and checks that both wrote the same
// bytes: the two kinds of engine are interchangeable.
type selfFramed struct {
	t      *testing.T
	pieces []string
}

// selfFramedPrompt is the prompt length selfFramed reports for any request.
const selfFramedPrompt = 7

func (e *selfFramed) Prepare(req *engine.Request) error {
	req.PromptTokens = make([]int32, selfFramedPrompt)
	return nil
}

func (e *selfFramed) Start(req *engine.Request, sink engine.Sink) (engine.Session, error) {
	si, stream, f := req.StreamInfo, req.Stream, req.Formatter
	req.Formatter = nil
	res := &engine.Result{
		Choices: []engine.Choice{{Text: strings.Join(e.pieces, ""), FinishReason: engine.FinishStop, StopTokenID: -1}},
		Usage:   engine.Usage{PromptTokens: selfFramedPrompt, CompletionTokens: len(e.pieces)},
	}
	go func() {
		switch {
		case !stream:
			sink.Deliver(nil, res)
		case si.Dialect == engine.DialectChat:
			e.chat(&si, f, sink, res)
		case si.Dialect == engine.DialectResponses:
			e.responses(&si, sink, res)
		default:
			e.t.Errorf("selfFramed: stream of dialect %d not served", si.Dialect)
			sink.Deliver(nil, &engine.Result{Err: &engine.Error{Kind: engine.KindInternal, Message: "unsupported"}})
		}
	}()
	return selfFramedSession{}, nil
}

func (e *selfFramed) Tokenize(string) []int   { return nil }
func (e *selfFramed) Detokenize([]int) string { return "" }
func (e *selfFramed) Stats() engine.Stats     { return engine.Stats{Healthy: true} }
func (e *selfFramed) Close() error            { return nil }

type selfFramedSession struct{}

func (selfFramedSession) Abort() {}

// frame wraps one SSE event in its transport frame: an HTTP/1.1 chunk
// (RFC 9112 §7.1: hex size, CRLF, data, CRLF) when chunked.
func frame(chunked bool, event string) string {
	if !chunked {
		return event
	}
	return fmt.Sprintf("%x\r\n%s\r\n", len(event), event)
}

// lastChunk ends a chunked body.
func lastChunk(chunked bool) string {
	if !chunked {
		return ""
	}
	return "0\r\n\r\n"
}

// jsonString renders s as a JSON string.
func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// chat streams e.pieces as chat completion chunks, then the finish chunk,
// the usage chunk when asked for, data: [DONE] and the end of the body,
// which come with the final Result.
func (e *selfFramed) chat(si *engine.StreamInfo, f engine.Formatter, sink engine.Sink, res *engine.Result) {
	head := fmt.Sprintf(`data: {"id":%s,"object":"chat.completion.chunk","created":%d,"model":%s,"choices":[`,
		jsonString(si.ID), si.Created, jsonString(si.Model))
	var sent strings.Builder
	var goFrames []byte // what the dialect's Go Formatter writes for the same output
	for i, p := range e.pieces {
		role := ""
		if i == 0 {
			role = `"role":"assistant",`
		}
		fr := frame(si.Chunked, head+`{"index":0,"delta":{`+role+`"content":`+jsonString(p)+`},"logprobs":null,"finish_reason":null}]}`+"\n\n")
		sent.WriteString(fr)
		goFrames = f.AppendDelta(goFrames, &engine.Delta{Kind: engine.DeltaText, First: i == 0, Text: []byte(p), TokenIDs: []int{i}})
		sink.Deliver([]byte(fr), nil)
	}
	last := frame(si.Chunked, head+`{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}`+"\n\n")
	if si.IncludeUsage {
		u := &res.Usage
		last += frame(si.Chunked, head+fmt.Sprintf(`],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,`+
			`"prompt_tokens_details":{"cached_tokens":%d},"completion_tokens_details":{"reasoning_tokens":%d}}}`+"\n\n",
			u.PromptTokens, u.CompletionTokens, u.TotalTokens(), u.CachedTokens, u.ReasoningTokens))
	}
	last += frame(si.Chunked, "data: [DONE]\n\n") + lastChunk(si.Chunked)
	sent.WriteString(last)
	goFrames = f.AppendChoiceEnd(goFrames, &engine.ChoiceEnd{FinishReason: engine.FinishStop, StopTokenID: -1, Usage: &res.Usage})
	goFrames = f.AppendEnd(goFrames, res)
	if sent.String() != string(goFrames) {
		e.t.Errorf("hand-written chat frames differ from the Go Formatter's:\n%q\n%q", sent.String(), goFrames)
	}
	sink.Deliver([]byte(last), res)
}

// responses streams e.pieces as Responses API events: response.created and
// .in_progress, one message item with its text deltas, and
// response.completed with the final object, numbered from FirstSequence,
// the item named by engine.ItemID.
func (e *selfFramed) responses(si *engine.StreamInfo, sink engine.Sink, res *engine.Result) {
	seq := si.FirstSequence
	event := func(typ, members string) string {
		ev := fmt.Sprintf("event: %s\ndata: {\"type\":%q,%s,\"sequence_number\":%d}\n\n", typ, typ, members, seq)
		seq++
		return frame(si.Chunked, ev)
	}
	itemID := jsonString(engine.ItemID(engine.ItemMessage, si.ID, 0))
	object := func(status, output, usage string) string {
		return fmt.Sprintf(`{"id":%s,"object":"response","created_at":%d,"status":%q,"model":%s,"output":[%s],"usage":%s}`,
			jsonString(si.ID), si.Created, status, jsonString(si.Model), output, usage)
	}
	text := res.Choices[0].Text
	part := func(text string) string {
		return `{"type":"output_text","annotations":[],"logprobs":[],"text":` + jsonString(text) + `}`
	}
	item := func(status, content string) string {
		return `{"id":` + itemID + `,"type":"message","status":"` + status + `","content":[` + content + `],"role":"assistant"}`
	}
	ref := `"item_id":` + itemID + `,"output_index":0,"content_index":0`

	opening := event("response.created", `"response":`+object("in_progress", "", "null")) +
		event("response.in_progress", `"response":`+object("in_progress", "", "null")) +
		event("response.output_item.added", `"output_index":0,"item":`+item("in_progress", "")) +
		event("response.content_part.added", ref+`,"part":`+part(""))
	sink.Deliver([]byte(opening), nil)
	for _, p := range e.pieces {
		sink.Deliver([]byte(event("response.output_text.delta", ref+`,"delta":`+jsonString(p)+`,"logprobs":[]`)), nil)
	}
	u := &res.Usage
	usage := fmt.Sprintf(`{"input_tokens":%d,"input_tokens_details":{"cached_tokens":0},"output_tokens":%d,`+
		`"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}`, u.PromptTokens, u.CompletionTokens, u.TotalTokens())
	last := event("response.output_text.done", ref+`,"text":`+jsonString(text)+`,"logprobs":[]`) +
		event("response.content_part.done", ref+`,"part":`+part(text)) +
		event("response.output_item.done", `"output_index":0,"item":`+item("completed", part(text))) +
		event("response.completed", `"response":`+object("completed", item("completed", part(text)), usage)) +
		lastChunk(si.Chunked)
	sink.Deliver([]byte(last), res)
}

// startEngineServer runs a real server over loopback with e as its engine.
func startEngineServer(t *testing.T, e engine.Engine) string {
	t.Helper()
	cfg := vajra.DefaultConfig()
	cfg.Port = 0
	cfg.Loops = 2
	cfg.Engine = e
	_, base := runServer(t, cfg)
	return base
}

var selfFramedPieces = []string{"The", " sea", " is", " wide", "."}

// TestSelfFramedEngineChat: openai-go streams a chat completion (with the
// usage chunk) from an engine that writes its own frames, and the session
// answers a non-streamed request from the same engine's Result alone.
func TestSelfFramedEngineChat(t *testing.T) {
	base := startEngineServer(t, &selfFramed{t: t, pieces: selfFramedPieces})
	client := newClient(base)
	ctx := context.Background()
	want := strings.Join(selfFramedPieces, "")

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         vajra.DefaultModelName,
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		if c := stream.Current(); !acc.AddChunk(c) {
			t.Fatalf("accumulator refused chunk %s", c.RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != want || acc.Choices[0].FinishReason != "stop" {
		t.Fatalf("accumulated %+v, want %q", acc.Choices, want)
	}
	if !strings.HasPrefix(acc.ID, "chatcmpl-") || acc.Model != vajra.DefaultModelName || acc.Created == 0 {
		t.Errorf("id %q, model %q, created %d", acc.ID, acc.Model, acc.Created)
	}
	if u := acc.Usage; u.PromptTokens != selfFramedPrompt || u.CompletionTokens != int64(len(selfFramedPieces)) {
		t.Errorf("usage %+v", u)
	}

	res, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    vajra.DefaultModelName,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Choices) != 1 || res.Choices[0].Message.Content != want || res.Usage.PromptTokens != selfFramedPrompt {
		t.Fatalf("non-streamed %s", res.RawJSON())
	}
}

// TestSelfFramedEngineResponsesStored: a streamed Responses API response
// with store (the default) from an engine that writes its own frames is
// found by GET right after the stream ended, with the streamed ids, text and
// usage. Nothing but the session could have saved it: the engine writes
// bytes only, and the Formatter was taken away before the first frame.
func TestSelfFramedEngineResponsesStored(t *testing.T) {
	base := startEngineServer(t, &selfFramed{t: t, pieces: selfFramedPieces})
	client := newClient(base)
	ctx := context.Background()
	want := strings.Join(selfFramedPieces, "")

	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput(question),
	})
	var final responses.Response
	var created float64
	var itemID string
	var text strings.Builder
	seq := int64(0)
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != seq {
			t.Fatalf("sequence_number %d, want %d", ev.SequenceNumber, seq)
		}
		seq++
		switch ev.Type {
		case "response.created":
			created = ev.Response.CreatedAt
		case "response.output_item.added":
			itemID = ev.Item.ID
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != want || final.OutputText() != want || !strings.HasPrefix(final.ID, "resp_") || created == 0 {
		t.Fatalf("streamed %q, final %s", text.String(), final.RawJSON())
	}

	got, err := client.Responses.Get(ctx, final.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatalf("GET right after the stream: %v", err)
	}
	if got.ID != final.ID || got.Status != "completed" || got.CreatedAt != created || got.Model != vajra.DefaultModelName {
		t.Errorf("stored id %q status %q created_at %v model %q; streamed %q, created_at %v",
			got.ID, got.Status, got.CreatedAt, got.Model, final.ID, created)
	}
	if got.OutputText() != want || len(got.Output) != 1 || got.Output[0].ID != itemID {
		t.Errorf("stored output %s, want text %q in item %q", got.RawJSON(), want, itemID)
	}
	u := got.Usage
	if u.InputTokens != selfFramedPrompt || u.OutputTokens != int64(len(selfFramedPieces)) || u.TotalTokens != u.InputTokens+u.OutputTokens {
		t.Errorf("stored usage %+v", u)
	}
}
