package soak

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/realtime"
)

// The Realtime API (openai-go's client.Realtime.Connect): a conversation
// of two responses then a close, a response cancelled, a socket dropped
// mid-response, and a transcription.

// rtScenario is a Realtime scenario of the mix.
func rtScenario(name string, weight int) scenario {
	return scenario{name, weight, func(ctx context.Context, w *worker) error { return w.sdk.realtime(ctx, w.r, name) }}
}

// rtRecv reads events until one of type typ; the events before it are
// checked by see (nil: ignored).
func rtRecv(ctx context.Context, conn *realtime.RealtimeConnection, typ string, see func(realtime.RealtimeServerEventUnion) error) (realtime.RealtimeServerEventUnion, error) {
	for range 100000 {
		ev, err := conn.Recv(ctx)
		if err != nil {
			return ev, err
		}
		if ev.Type == "error" {
			return ev, fmt.Errorf("error event: %.300s", ev.RawJSON())
		}
		if ev.Type == typ {
			return ev, nil
		}
		if see != nil {
			if err := see(ev); err != nil {
				return ev, err
			}
		}
	}
	return realtime.RealtimeServerEventUnion{}, fmt.Errorf("%w: no %s", errEmpty, typ)
}

// realtime runs one Realtime socket of the named kind.
func (s *sdkClients) realtime(ctx context.Context, r *rand.Rand, kind string) error {
	q := option.WithQuery("model", s.model)
	if kind == "sdk_realtime_transcribe" {
		q = option.WithQuery("intent", "transcription")
	}
	conn, err := s.openai.Realtime.Connect(ctx, realtime.RealtimeConnectionOptions{}, q)
	if err != nil {
		return err
	}
	defer conn.Abort()
	if _, err := rtRecv(ctx, conn, "session.created", nil); err != nil {
		return err
	}
	if kind == "sdk_realtime_transcribe" {
		return transcribe(ctx, conn, r)
	}
	item := realtime.RealtimeClientEventUnionParam{OfConversationItemCreate: &realtime.ConversationItemCreateEventParam{
		Item: realtime.ConversationItemUnionParam{OfRealtimeUserMessageItem: &realtime.RealtimeConversationItemUserMessageParam{
			Content: []realtime.RealtimeConversationItemUserMessageContentParam{{Type: "input_text", Text: param.NewOpt(prompt)}},
		}},
	}}
	create := func() realtime.RealtimeClientEventUnionParam {
		p := realtime.RealtimeResponseCreateParams{OutputModalities: []string{"text"}}
		p.MaxOutputTokens.OfInt = param.NewOpt(int64(4 + r.IntN(60)))
		return realtime.RealtimeClientEventUnionParam{OfResponseCreate: &realtime.ResponseCreateEventParam{Response: p}}
	}
	rounds := 2
	if kind != "sdk_realtime" {
		rounds = 1
	}
	for range rounds {
		if err := conn.Send(ctx, item); err != nil {
			return err
		}
		if err := conn.Send(ctx, create()); err != nil {
			return err
		}
		var text string
		sawDelta := false
		onDelta := func(ev realtime.RealtimeServerEventUnion) error {
			if ev.Type == "response.output_text.delta" {
				text += ev.OfResponseTextDeltaEvent.Delta
				sawDelta = true
			}
			return nil
		}
		if kind != "sdk_realtime" {
			// Wait for the first delta, then cancel or drop the socket.
			if _, err := rtRecv(ctx, conn, "response.output_text.delta", nil); err != nil {
				return err
			}
			if kind == "cut_realtime" {
				return nil // the deferred Abort drops the socket mid-response
			}
			if err := conn.Send(ctx, realtime.RealtimeClientEventUnionParam{OfResponseCancel: &realtime.ResponseCancelEventParam{}}); err != nil {
				return err
			}
			sawDelta = true
		}
		done, err := rtRecv(ctx, conn, "response.done", onDelta)
		if err != nil {
			return err
		}
		res := done.OfResponseDoneEvent.Response
		switch {
		case !sawDelta || res.Usage.OutputTokens == 0:
			return fmt.Errorf("%w: %.300s", errEmpty, done.RawJSON())
		case kind == "sdk_realtime" && (res.Status == "cancelled" || res.Status == "failed" ||
			res.Output[0].AsRealtimeConversationItemAssistantMessage().Content[0].Text != text):
			return fmt.Errorf("%w: text %q: %.300s", errEmpty, text, done.RawJSON())
		case kind == "cancel_realtime" && res.Status != "cancelled" && res.Status != "completed" && res.Status != "incomplete":
			return fmt.Errorf("cancelled response: %.300s", done.RawJSON())
		}
	}
	return conn.Close()
}

// transcribe commits half a second to two seconds of audio and checks its
// transcript is whole.
func transcribe(ctx context.Context, conn *realtime.RealtimeConnection, r *rand.Rand) error {
	pcm := make([]byte, 2*(12000+r.IntN(36000)))
	for i := range pcm {
		pcm[i] = byte(r.Uint32())
	}
	if err := conn.Send(ctx, realtime.RealtimeClientEventUnionParam{OfInputAudioBufferAppend: &realtime.InputAudioBufferAppendEventParam{
		Audio: base64.StdEncoding.EncodeToString(pcm)}}); err != nil {
		return err
	}
	if err := conn.Send(ctx, realtime.RealtimeClientEventUnionParam{OfInputAudioBufferCommit: &realtime.InputAudioBufferCommitEventParam{}}); err != nil {
		return err
	}
	var text strings.Builder
	ev, err := rtRecv(ctx, conn, "conversation.item.input_audio_transcription.completed", func(ev realtime.RealtimeServerEventUnion) error {
		if ev.Type == "conversation.item.input_audio_transcription.delta" {
			text.WriteString(ev.OfConversationItemInputAudioTranscriptionDeltaEvent.Delta)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if c := ev.OfConversationItemInputAudioTranscriptionCompletedEvent; c.Transcript == "" || c.Transcript != text.String() {
		return fmt.Errorf("%w: transcript %q, deltas %q", errEmpty, c.Transcript, text.String())
	}
	return conn.Close()
}
