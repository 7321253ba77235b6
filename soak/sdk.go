package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// The well-formed traffic: the official SDKs, every dialect, streamed and
// not, over one shared keep-alive transport.

// sdkClients are the SDK clients of a run and the transport they share
// (closed at the end, so that its idle connections go too).
type sdkClients struct {
	transport *http.Transport
	openai    openai.Client
	anthropic anthropic.Client
	model     string
}

func newSDKClients(base, model string, conns int) *sdkClients {
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute}
	hc := &http.Client{Transport: tr}
	return &sdkClients{
		transport: tr,
		openai: openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("soak"),
			option.WithMaxRetries(0), option.WithHTTPClient(hc)),
		anthropic: anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey("soak"),
			aoption.WithMaxRetries(0), aoption.WithHTTPClient(hc)),
		model: model,
	}
}

// errEmpty is a well-formed request answered without text.
var errEmpty = errors.New("answered without text")

// sdkRequest runs one request of the named kind and checks the answer is
// whole: text, a finish reason, usage.
func (s *sdkClients) sdkRequest(ctx context.Context, r *rand.Rand, kind string) error {
	n := int64(4 + r.IntN(60))
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}
	switch kind {
	case "sdk_chat":
		res, err := s.openai.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: s.model, Messages: msgs, MaxTokens: openai.Int(n),
		}, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			return err
		}
		if len(res.Choices) != 1 || res.Choices[0].Message.Content == "" || res.Usage.CompletionTokens != n {
			return fmt.Errorf("%w: %.300s", errEmpty, res.RawJSON())
		}
	case "sdk_chat_stream":
		st := s.openai.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model: s.model, Messages: msgs, MaxTokens: openai.Int(n),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		}, option.WithJSONSet("ignore_eos", true))
		var acc openai.ChatCompletionAccumulator
		for st.Next() {
			acc.AddChunk(st.Current())
		}
		if err := st.Err(); err != nil {
			return err
		}
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" || acc.Choices[0].FinishReason != "length" || acc.Usage.CompletionTokens != n {
			return fmt.Errorf("%w: %.300s", errEmpty, acc.RawJSON())
		}
	case "sdk_completions":
		res, err := s.openai.Completions.New(ctx, openai.CompletionNewParams{
			Model: openai.CompletionNewParamsModel(s.model), Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
			MaxTokens: openai.Int(n),
		}, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			return err
		}
		if len(res.Choices) != 1 || res.Choices[0].Text == "" || res.Usage.CompletionTokens != n {
			return fmt.Errorf("%w: %.300s", errEmpty, res.RawJSON())
		}
	case "sdk_completions_stream":
		st := s.openai.Completions.NewStreaming(ctx, openai.CompletionNewParams{
			Model: openai.CompletionNewParamsModel(s.model), Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
			MaxTokens: openai.Int(n),
		}, option.WithJSONSet("ignore_eos", true))
		var text, finish string
		for st.Next() {
			c := st.Current()
			for _, ch := range c.Choices {
				text += ch.Text
				if ch.FinishReason != "" {
					finish = string(ch.FinishReason)
				}
			}
		}
		if err := st.Err(); err != nil {
			return err
		}
		if text == "" || finish != "length" {
			return fmt.Errorf("%w: text %q finish %q", errEmpty, text, finish)
		}
	case "sdk_responses":
		res, err := s.openai.Responses.New(ctx, responses.ResponseNewParams{
			Model: s.model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)},
			MaxOutputTokens: openai.Int(n), Store: openai.Bool(false),
		})
		if err != nil {
			return err
		}
		if res.OutputText() == "" || res.Usage.OutputTokens == 0 {
			return fmt.Errorf("%w: %.300s", errEmpty, res.RawJSON())
		}
	case "sdk_responses_stream":
		// Stored, then read back and deleted: the store returns to empty.
		st := s.openai.Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model: s.model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)},
			MaxOutputTokens: openai.Int(n),
		})
		var final responses.Response
		for st.Next() {
			ev := st.Current()
			if ev.Type == "response.completed" || ev.Type == "response.incomplete" {
				final = ev.Response
			}
		}
		if err := st.Err(); err != nil {
			return err
		}
		if final.ID == "" || final.OutputText() == "" {
			return fmt.Errorf("%w: final %.300s", errEmpty, final.RawJSON())
		}
		got, err := s.openai.Responses.Get(ctx, final.ID, responses.ResponseGetParams{})
		if err != nil {
			return fmt.Errorf("GET the stored response: %w", err)
		}
		if got.OutputText() != final.OutputText() {
			return fmt.Errorf("stored text %q, streamed %q", got.OutputText(), final.OutputText())
		}
		if err := s.openai.Responses.Delete(ctx, final.ID); err != nil {
			return fmt.Errorf("DELETE the stored response: %w", err)
		}
	case "sdk_messages":
		res, err := s.anthropic.Messages.New(ctx, anthropic.MessageNewParams{
			Model: anthropic.Model(s.model), MaxTokens: n,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
		})
		if err != nil {
			return err
		}
		if len(res.Content) == 0 || res.Content[0].Text == "" || res.StopReason == "" {
			return fmt.Errorf("%w: %.300s", errEmpty, res.RawJSON())
		}
	case "sdk_messages_stream":
		st := s.anthropic.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
			Model: anthropic.Model(s.model), MaxTokens: n,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
		})
		var acc anthropic.Message
		last := ""
		for st.Next() {
			ev := st.Current()
			if err := acc.Accumulate(ev); err != nil {
				return fmt.Errorf("accumulate %s: %w", ev.RawJSON(), err)
			}
			last = ev.Type
		}
		if err := st.Err(); err != nil {
			return err
		}
		if last != "message_stop" || len(acc.Content) == 0 || acc.StopReason == "" {
			return fmt.Errorf("%w: last event %q, %.300s", errEmpty, last, acc.RawJSON())
		}
	default:
		return fmt.Errorf("soak: no SDK request %q", kind)
	}
	return nil
}
