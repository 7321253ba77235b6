package openai

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// tokenIDChunk is what a client of vLLM's return_token_ids reads from a
// chat or completions chunk.
type tokenIDChunk struct {
	PromptTokenIDs []int `json:"prompt_token_ids"`
	Choices        []struct {
		Index          int    `json:"index"`
		Text           string `json:"text"`
		TokenIDs       *[]int `json:"token_ids"`
		PromptTokenIDs []int  `json:"prompt_token_ids"`
		FinishReason   string `json:"finish_reason"`
	} `json:"choices"`
}

// readTokenIDs decodes every data: event of a raw stream but [DONE]:
// each choice's token ids in order, and the prompt ids each choice was
// given (chat: beside choices, completions: in the choice), with how
// many chunks carried them.
func readTokenIDs(t *testing.T, out []byte) (ids map[int][]int, prompts map[int][][]int) {
	t.Helper()
	ids, prompts = map[int][]int{}, map[int][][]int{}
	for _, ev := range bytes.Split(out, []byte("\n\n")) {
		data, ok := bytes.CutPrefix(ev, []byte("data: "))
		if !ok || string(data) == "[DONE]" {
			continue
		}
		var c tokenIDChunk
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		for _, ch := range c.Choices {
			if ch.TokenIDs == nil {
				t.Errorf("a chunk of choice %d has no token_ids: %s", ch.Index, data)
				continue
			}
			ids[ch.Index] = append(ids[ch.Index], *ch.TokenIDs...)
			if c.PromptTokenIDs != nil {
				prompts[ch.Index] = append(prompts[ch.Index], c.PromptTokenIDs)
			}
			if ch.PromptTokenIDs != nil {
				prompts[ch.Index] = append(prompts[ch.Index], ch.PromptTokenIDs)
			}
		}
	}
	return ids, prompts
}

// tokenIDScript is two choices: one answers in two steps and ends on its
// end-of-sequence token (which no delta carried), the other calls a tool
// (whose deltas carry no ids) and ends with its ids in the ChoiceEnd.
func tokenIDScript() []step {
	return []step{
		{start: &engine.Start{PromptTokens: 3, N: 2, PromptTokenIDs: []int32{101, 102, 103}}},
		{delta: &engine.Delta{Choice: 0, First: true, Text: []byte("Par"), TokenIDs: []int{7, 8}}},
		{delta: &engine.Delta{Choice: 1, Kind: engine.DeltaToolCallStart, First: true, ToolCallID: "call_1", ToolName: "f"}},
		{delta: &engine.Delta{Choice: 0, Text: []byte("is"), TokenIDs: []int{9}}},
		{delta: &engine.Delta{Choice: 1, Kind: engine.DeltaToolCallArgs, Text: []byte("{}")}},
		{end: &engine.ChoiceEnd{Choice: 0, FinishReason: engine.FinishStop, StopTokenID: -1, TokenIDs: []int{2}}},
		{end: &engine.ChoiceEnd{Choice: 1, FinishReason: engine.FinishToolCalls, StopTokenID: -1, TokenIDs: []int{40, 41, 42}}},
		done(engine.Usage{PromptTokens: 3, CompletionTokens: 7}),
	}
}

func TestChatStreamTokenIDs(t *testing.T) {
	f := NewChatFormatter("chatcmpl-test123", "vajra-sim", 1767225600, ChatStreamOptions{Framing: codegen.FramingRaw, TokenIDs: true})
	out := drive(f, tokenIDScript())
	checkGolden(t, "chat_token_ids", out)
	ids, prompts := readTokenIDs(t, out)
	if !slices.Equal(ids[0], []int{7, 8, 9, 2}) || !slices.Equal(ids[1], []int{40, 41, 42}) {
		t.Errorf("token_ids per choice %v, want [7 8 9 2] and [40 41 42]", ids)
	}
	for i := range 2 {
		if len(prompts[i]) != 1 || !slices.Equal(prompts[i][0], []int{101, 102, 103}) {
			t.Errorf("choice %d: prompt_token_ids %v, want [101 102 103] on its first chunk only", i, prompts[i])
		}
	}
	// The official SDK reads the stream as before.
	stream := ssestream.NewStream[oai.ChatCompletionChunk](ssestream.NewDecoder(sseResponse(out)), nil)
	n := 0
	for stream.Next() {
		n++
	}
	if err := stream.Err(); err != nil || n != 8 {
		t.Errorf("openai-go read %d chunks, %v", n, err)
	}

	// Without return_token_ids nothing of it is written.
	f.Reset("chatcmpl-test123", "vajra-sim", 1767225600, ChatStreamOptions{Framing: codegen.FramingRaw})
	if out := drive(f, tokenIDScript()); bytes.Contains(out, []byte("token_ids")) {
		t.Errorf("token ids written unasked:\n%s", out)
	}
}

func TestCompletionStreamTokenIDs(t *testing.T) {
	for _, echo := range []bool{false, true} {
		f := NewCompletionFormatter("cmpl-test123", "vajra-sim", 1767225600,
			CompletionStreamOptions{Framing: codegen.FramingRaw, TokenIDs: true, Echo: echo, EchoPrompt: "The"})
		out := drive(f, tokenIDScript())
		if echo {
			checkGolden(t, "completion_token_ids_echo", out)
		} else {
			checkGolden(t, "completion_token_ids", out)
		}
		ids, prompts := readTokenIDs(t, out)
		// Completions has no tool-call chunks: choice 1's ids come with
		// its end.
		if !slices.Equal(ids[0], []int{7, 8, 9, 2}) || !slices.Equal(ids[1], []int{40, 41, 42}) {
			t.Errorf("echo %v: token_ids per choice %v", echo, ids)
		}
		for i := range 2 {
			if len(prompts[i]) != 1 || !slices.Equal(prompts[i][0], []int{101, 102, 103}) {
				t.Errorf("echo %v: choice %d: prompt_token_ids %v, want [101 102 103] once", echo, i, prompts[i])
			}
		}
	}
}

func TestBodiesTokenIDs(t *testing.T) {
	res := &engine.Result{
		Choices: []engine.Choice{
			{Index: 0, Text: "Paris", TokenIDs: []int{7, 8, 9, 2}, FinishReason: engine.FinishStop, StopTokenID: -1},
			{Index: 1, Text: "", TokenIDs: nil, FinishReason: engine.FinishLength, StopTokenID: -1},
		},
		Usage:        engine.Usage{PromptTokens: 3, CompletionTokens: 4},
		PromptTokens: []int32{101, 102, 103},
	}
	var chat struct {
		PromptTokenIDs []int `json:"prompt_token_ids"`
		Choices        []struct {
			TokenIDs []int `json:"token_ids"`
		} `json:"choices"`
	}
	body := AppendChatCompletion(nil, &ChatCompletionMeta{ID: "chatcmpl-x", Model: "m", Created: 1767225600, TokenIDs: true}, res)
	checkGolden(t, "chat_completion_token_ids", body)
	if err := json.Unmarshal(body, &chat); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(chat.PromptTokenIDs, []int{101, 102, 103}) || !slices.Equal(chat.Choices[0].TokenIDs, []int{7, 8, 9, 2}) ||
		chat.Choices[1].TokenIDs == nil || len(chat.Choices[1].TokenIDs) != 0 {
		t.Errorf("chat body %s", body)
	}

	var comp struct {
		Choices []struct {
			TokenIDs       []int `json:"token_ids"`
			PromptTokenIDs []int `json:"prompt_token_ids"`
		} `json:"choices"`
	}
	m := &CompletionMeta{ID: "cmpl-x", Model: "m", Created: 1767225600, TokenIDs: true,
		PromptTokenIDs: [][]int32{{101, 102, 103}, {201}}}
	body = AppendCompletion(nil, m, res)
	if err := json.Unmarshal(body, &comp); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(comp.Choices[0].PromptTokenIDs, []int{101, 102, 103}) || !slices.Equal(comp.Choices[1].PromptTokenIDs, []int{201}) ||
		!slices.Equal(comp.Choices[0].TokenIDs, []int{7, 8, 9, 2}) {
		t.Errorf("completions body %s", body)
	}
	for _, b := range [][]byte{
		AppendChatCompletion(nil, &ChatCompletionMeta{ID: "chatcmpl-x", Model: "m"}, res),
		AppendCompletion(nil, &CompletionMeta{ID: "cmpl-x", Model: "m"}, res),
	} {
		if bytes.Contains(b, []byte("token_ids")) {
			t.Errorf("token ids written unasked: %s", b)
		}
	}
}
