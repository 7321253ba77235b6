package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// The Responses API over WebSocket (openai-go's client.Responses.Connect):
// a socket that chains two unstored responses and closes, and one dropped
// mid-response.

// wsResponses runs one socket. Without cut: a response, then one chained
// to it with previous_response_id (the connection-local chain: both are
// unstored, so the store returns to empty), each read with FinalResponse,
// then a clean close. With cut: the socket is dropped (TCP) after the
// first delta.
func (s *sdkClients) wsResponses(ctx context.Context, r *rand.Rand, cut bool) error {
	conn, err := s.openai.Responses.Connect(ctx, responses.ResponseConnectionOptions{})
	if err != nil {
		return err
	}
	defer conn.Abort()
	create := func(input, previous string) responses.ResponsesClientEventResponseCreateParam {
		c := responses.ResponsesClientEventResponseCreateParam{
			Model:           s.model,
			Input:           responses.ResponsesClientEventResponseCreateInputUnionParam{OfString: openai.String(input)},
			MaxOutputTokens: openai.Int(int64(4 + r.IntN(60))),
			Store:           openai.Bool(false),
		}
		if previous != "" {
			c.PreviousResponseID = openai.String(previous)
		}
		return c
	}
	if err := conn.Create(ctx, create(prompt, "")); err != nil {
		return err
	}
	if cut {
		for range 10000 {
			ev, err := conn.Recv(ctx)
			if err != nil {
				return err
			}
			if strings.HasSuffix(ev.Type, ".delta") {
				return nil // the deferred Abort drops the socket mid-response
			}
			if ev.Type == "response.completed" || ev.Type == "response.incomplete" {
				return nil // ended before a delta: nothing to cut
			}
		}
		return fmt.Errorf("%w: no delta", errEmpty)
	}
	first, err := conn.FinalResponse(ctx)
	if err != nil {
		return err
	}
	if first.OutputText() == "" || first.Usage.OutputTokens == 0 {
		return fmt.Errorf("%w: %.300s", errEmpty, first.RawJSON())
	}
	if err := conn.Create(ctx, create("Go on.", first.ID)); err != nil {
		return err
	}
	second, err := conn.FinalResponse(ctx)
	if err != nil {
		return err
	}
	if second.PreviousResponseID != first.ID || second.OutputText() == "" {
		return fmt.Errorf("%w: chained %.300s", errEmpty, second.RawJSON())
	}
	return conn.Close()
}
