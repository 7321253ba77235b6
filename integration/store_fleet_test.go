package integration_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/internal/eventually"
	"github.com/vajra-go/vajra/internal/redistest"
	"github.com/vajra-go/vajra/internal/wiretest"
)

// A fleet: two Vajra nodes sharing one real redis-server. What a client
// creates through one node, any other node serves: GET, input_items,
// previous_response_id, DELETE.

func startFleetNode(t *testing.T, url string) string {
	t.Helper()
	_, _, base := startServer(t, func(c *vajra.Config) {
		c.ResponseStore.URL = url
	})
	return base
}

// fleetURL is the store URL of the fleet's Redis, with short socket
// timeouts so that the outage tests fail fast.
func fleetURL(r *redistest.Server) string {
	return r.URL() + "?dial_timeout=300ms&read_timeout=300ms&write_timeout=300ms"
}

func TestFleetSharesResponses(t *testing.T) {
	r := redistest.Start(t)
	baseA := startFleetNode(t, fleetURL(r))
	a := newClient(baseA)
	b := newClient(startFleetNode(t, fleetURL(r)))
	ctx := context.Background()

	// Created on A, non-streamed.
	res, err := a.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput(question), MaxOutputTokens: openai.Int(12),
	})
	if err != nil {
		t.Fatal(err)
	}
	// Read through B at once: the POST answered only once Redis had it.
	got, err := b.Responses.Get(ctx, res.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatalf("GET on node B: %v", err)
	}
	if got.RawJSON() != res.RawJSON() {
		t.Fatalf("node B's GET differs:\n%s\n%s", got.RawJSON(), res.RawJSON())
	}
	page, err := b.Responses.InputItems.List(ctx, res.ID, responses.InputItemListParams{})
	if err != nil || len(page.Data) != 1 || page.Data[0].Role != "user" {
		t.Fatalf("input_items on node B: %v %s", err, page.RawJSON())
	}

	// Streamed on A, chained on B the moment A's stream ended.
	stream := a.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput("Name a colour."), MaxOutputTokens: openai.Int(8),
		PreviousResponseID: openai.String(res.ID),
	})
	var streamedID, streamedText string
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.completed" || ev.Type == "response.incomplete" {
			streamedID, streamedText = ev.Response.ID, ev.Response.OutputText()
		}
	}
	if err := stream.Err(); err != nil || streamedID == "" {
		t.Fatalf("stream on A: %v (id %q)", err, streamedID)
	}
	chained, err := b.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput("And another?"), MaxOutputTokens: openai.Int(8),
		PreviousResponseID: openai.String(streamedID),
	})
	if err != nil {
		t.Fatalf("previous_response_id on node B: %v", err)
	}
	// The chain carried both earlier turns: the prompt grew by them.
	if chained.Usage.InputTokens <= res.Usage.InputTokens {
		t.Fatalf("chained prompt %d tokens, the first %d: history not carried", chained.Usage.InputTokens, res.Usage.InputTokens)
	}
	if g, err := a.Responses.Get(ctx, streamedID, responses.ResponseGetParams{}); err != nil || g.OutputText() != streamedText {
		t.Fatalf("streamed response on A: %v", err)
	}

	// A's store commands are on its /metrics: two saves, and two reads
	// (the streamed request's previous_response_id, the GET), each timed.
	mfs := wiretest.Scrape(t, strings.TrimPrefix(baseA, "http://"))
	if v := wiretest.Value(mfs, "vajra_response_store_operations_total", "op", "put", "result", "ok"); v != 2 {
		t.Errorf("node A's saves: %v, want 2", v)
	}
	if v := wiretest.Value(mfs, "vajra_response_store_operations_total", "op", "get", "result", "ok"); v != 2 {
		t.Errorf("node A's reads: %v, want 2", v)
	}
	if v := wiretest.Value(mfs, "vajra_response_store_operation_duration_seconds", "op", "put"); v != 2 {
		t.Errorf("node A's save latencies: %v observations, want 2", v)
	}

	// Deleted through B: gone on A too.
	if err := b.Responses.Delete(ctx, res.ID); err != nil {
		t.Fatal(err)
	}
	_, err = a.Responses.Get(ctx, res.ID, responses.ResponseGetParams{})
	var apiErr *openai.Error
	if !asError(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("GET of a response deleted through the other node: %v", err)
	}
}

// Redis down at start: the node starts, /health is 200, store: false
// requests work, store-dependent ones get 503 in OpenAI's shape; once
// Redis is up the same node stores and serves without a restart.
func TestFleetRedisDownAndBack(t *testing.T) {
	r := redistest.Start(t)
	url := fleetURL(r)
	r.Stop()
	core, logs := observer.New(zap.WarnLevel)
	_, _, base := startServer(t, func(c *vajra.Config) {
		c.ResponseStore.URL = url
		c.Logger = zap.New(core)
	})
	c := newClient(base)
	ctx := context.Background()
	if logs.FilterMessageSnippet("Redis is not reachable").Len() != 1 {
		t.Fatalf("the outage at start was not logged once: %v", logs.All())
	}

	resp, err := http.Get(base + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/health with Redis down: %v %v", err, resp)
	}
	resp.Body.Close()

	if _, err := c.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput(question), MaxOutputTokens: openai.Int(4), Store: openai.Bool(false),
	}); err != nil {
		t.Fatalf("store: false with Redis down: %v", err)
	}
	_, err = c.Responses.Get(ctx, "resp_unknown", responses.ResponseGetParams{})
	var apiErr *openai.Error
	if !asError(err, &apiErr) || apiErr.StatusCode != 503 || apiErr.Code != "response_store_unavailable" {
		t.Fatalf("GET with Redis down: %v", err)
	}
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput(question), PreviousResponseID: openai.String("resp_x"),
	})
	if !asError(err, &apiErr) || apiErr.StatusCode != 503 {
		t.Fatalf("previous_response_id with Redis down: %v", err)
	}
	// A stored stream still ends with a terminal event, which says that
	// the response failed: it could not be stored. The failed save is
	// counted.
	stream := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput(question), MaxOutputTokens: openai.Int(4),
	})
	var last responses.ResponseStreamEventUnion
	for stream.Next() {
		last = stream.Current()
	}
	if stream.Err() != nil || last.Type != "response.failed" || last.Response.Error.Code != "response_store_unavailable" {
		t.Fatalf("stored stream with Redis down: %v, ended with %s", stream.Err(), last.RawJSON())
	}
	// A non-streamed stored create is told it was not stored: 503.
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput(question), MaxOutputTokens: openai.Int(4),
	})
	if !asError(err, &apiErr) || apiErr.StatusCode != 503 || apiErr.Code != "response_store_unavailable" {
		t.Fatalf("stored create with Redis down: %v", err)
	}
	if n := wiretest.Value(wiretest.Scrape(t, strings.TrimPrefix(base, "http://")), "vajra_response_store_save_failures_total"); n != 2 {
		t.Fatalf("save failures counted: %v, want 2", n)
	}
	if logs.FilterMessageSnippet("could not be stored").Len() != 2 {
		t.Fatalf("the failed saves were not logged: %v", logs.All())
	}

	r.Restart()
	eventually.True(t, "a create is stored after Redis came back", func() bool {
		res, err := c.Responses.New(ctx, responses.ResponseNewParams{
			Model: vajra.DefaultModelName, Input: textInput(question), MaxOutputTokens: openai.Int(4),
		})
		if err == nil {
			// Answered 200: stored. A GET must find it.
			if _, err := c.Responses.Get(ctx, res.ID, responses.ResponseGetParams{}); err != nil {
				t.Fatalf("a create answered 200 after Redis came back is not there: %v", err)
			}
			return true
		}
		if !asError(err, &apiErr) || apiErr.StatusCode != 503 {
			t.Fatalf("after Redis came back: %v", err)
		}
		return false // 503 until the store's prober (every 250 ms) sees Redis
	})
}

// A response's end reaches its client only once the shared store has it:
// while Redis holds writes back (CLIENT PAUSE ... WRITE), a finished
// non-streamed response is not answered; once writes go through it is, and
// the other node finds it.
func TestFleetAnswersAfterTheSave(t *testing.T) {
	r := redistest.Start(t)
	_, obsA, baseA := startServer(t, func(c *vajra.Config) { c.ResponseStore.URL = r.URL() })
	b := newClient(startFleetNode(t, r.URL()))
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer admin.Close()
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "20000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	paused := true
	defer func() {
		if paused {
			admin.Do(ctx, "CLIENT", "UNPAUSE")
		}
	}()
	type result struct {
		res *responses.Response
		err error
	}
	done := make(chan result, 1)
	a := newClient(baseA)
	go func() {
		res, err := a.Responses.New(ctx, responses.ResponseNewParams{
			Model: vajra.DefaultModelName, Input: textInput(question), MaxOutputTokens: openai.Int(6),
		})
		done <- result{res, err}
	}()
	select {
	case <-obsA.finals: // the engine finished the response
	case <-time.After(10 * time.Second):
		t.Fatal("the engine never finished")
	}
	select {
	case got := <-done:
		t.Fatalf("answered while Redis held the save back: %+v", got)
	case <-time.After(200 * time.Millisecond): // a window for a wrong answer to show
	}
	// A slow Redis stalls only what needs it: a stream that stores
	// nothing runs to its end meanwhile on the same node.
	stream := a.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput(question), MaxOutputTokens: openai.Int(6), Store: openai.Bool(false),
	})
	ended := false
	for stream.Next() {
		typ := stream.Current().Type
		ended = ended || typ == "response.completed" || typ == "response.incomplete"
	}
	if stream.Err() != nil || !ended {
		t.Fatalf("a store: false stream while Redis held writes: %v, ended %v", stream.Err(), ended)
	}
	select {
	case got := <-done:
		t.Fatalf("answered while Redis held the save back: %+v", got)
	default:
	}
	if err := admin.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	paused = false
	var got result
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no answer after Redis took the save")
	}
	if got.err != nil {
		t.Fatal(got.err)
	}
	if _, err := b.Responses.Get(ctx, got.res.ID, responses.ResponseGetParams{}); err != nil {
		t.Fatalf("node B: %v", err)
	}
}

// Background responses across the fleet: created on A, B's GET shows it in
// progress with its output so far (A writes it to Redis about once a
// second) and lists its input items; a cancel on B reaches A over Redis,
// which aborts the engine session and saves the cancelled record, which B
// answers; both nodes then serve it cancelled.
func TestFleetBackgroundCancelOnOtherNode(t *testing.T) {
	r := redistest.Start(t)
	slowA := func(c *vajra.Config) { c.Sim.ITL = 10 * time.Millisecond; c.ResponseStore.URL = fleetURL(r) }
	_, obsA, baseA := startServerWrapped(t, slowA, func(e engine.Engine) engine.Engine { return endless{e} })
	a := newClient(baseA)
	b := newClient(startFleetNode(t, fleetURL(r)))
	ctx := context.Background()

	res, err := a.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput(question), MaxOutputTokens: openai.Int(5000),
		Background: openai.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	// B sees it at once (queued, written before A answered), then in
	// progress with output.
	if got, err := b.Responses.Get(ctx, res.ID, responses.ResponseGetParams{}); err != nil || !inFlight(got.Status) || !got.Background {
		t.Fatalf("GET on B right after the create: %v %s", err, got.RawJSON())
	}
	partial := pollUntil(t, b, res.ID, func(r *responses.Response) bool {
		return r.Status == responses.ResponseStatusInProgress && r.OutputText() != ""
	})
	page, err := b.Responses.InputItems.List(ctx, res.ID, responses.InputItemListParams{})
	if err != nil || len(page.Data) != 1 || page.Data[0].Role != "user" {
		t.Fatalf("input_items on B while running: %v %s", err, page.RawJSON())
	}
	// Still running on A: B refuses to delete it.
	var apiErr *openai.Error
	if err := b.Responses.Delete(ctx, res.ID); !asError(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("DELETE on B of a running response: %v", err)
	}

	c, err := b.Responses.Cancel(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != responses.ResponseStatusCancelled || c.ID != res.ID || !strings.HasPrefix(c.OutputText(), partial.OutputText()) {
		t.Fatalf("cancel on B answered %s (partial %q)", c.RawJSON(), partial.OutputText())
	}
	select {
	case final := <-obsA.finals:
		if final.Err == nil || final.Err.Kind != engine.KindAborted {
			t.Fatalf("A's engine final: %+v", final.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("A's engine never ended the response cancelled on B")
	}
	waitEngineIdle(t, obsA) // the engine publishes its figures as it ends the step
	for name, cl := range map[string]openai.Client{"A": a, "B": b} {
		got, err := cl.Responses.Get(ctx, res.ID, responses.ResponseGetParams{})
		if err != nil || got.RawJSON() != c.RawJSON() {
			t.Fatalf("GET on %s after the cancel: %v\n%s\n%s", name, err, got.RawJSON(), c.RawJSON())
		}
	}
	// A second cancel, on either node, answers it unchanged; now it can go.
	if again, err := a.Responses.Cancel(ctx, res.ID); err != nil || again.RawJSON() != c.RawJSON() {
		t.Fatalf("second cancel on A: %v", err)
	}
	if err := b.Responses.Delete(ctx, res.ID); err != nil {
		t.Fatalf("DELETE on B after the end: %v", err)
	}
}

// Redis lost mid-run: the node's stored responses become 503 while it is
// gone (generation and store: false go on), then are served again once it
// is back, without a restart. Redis keeps nothing here (persistence off),
// so what was stored before is gone, as after any Redis restart without
// persistence; what is stored after is served.
func TestFleetRedisLostMidRun(t *testing.T) {
	r := redistest.Start(t)
	base := startFleetNode(t, fleetURL(r))
	c := newClient(base)
	ctx := context.Background()
	create := func(store bool) (*responses.Response, error) {
		return c.Responses.New(ctx, responses.ResponseNewParams{
			Model: vajra.DefaultModelName, Input: textInput(question), MaxOutputTokens: openai.Int(4), Store: openai.Bool(store),
		})
	}
	before, err := create(true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Responses.Get(ctx, before.ID, responses.ResponseGetParams{}); err != nil {
		t.Fatal(err)
	}

	r.Stop()
	var apiErr *openai.Error
	if _, err := c.Responses.Get(ctx, before.ID, responses.ResponseGetParams{}); !asError(err, &apiErr) || apiErr.StatusCode != 503 {
		t.Fatalf("GET with Redis lost: %v", err)
	}
	if _, err := create(false); err != nil {
		t.Fatalf("store: false with Redis lost: %v", err)
	}
	// A stored create is answered only once saved: with Redis lost, 503
	// (never a 200 with a response that a GET cannot find).
	if _, err := create(true); !asError(err, &apiErr) || apiErr.StatusCode != 503 || apiErr.Code != "response_store_unavailable" {
		t.Fatalf("a stored create with Redis lost: %v, want 503 response_store_unavailable", err)
	}
	if resp, err := http.Get(base + "/health"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/health with Redis lost: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}

	r.Restart()
	eventually.True(t, "a stored create is served after Redis came back", func() bool {
		// Until the prober has seen Redis again, a stored create answers
		// 503; once one answers 200, a GET finds it (never a 404).
		res, err := create(true)
		if err == nil {
			if _, err := c.Responses.Get(ctx, res.ID, responses.ResponseGetParams{}); err != nil {
				t.Fatalf("a stored create answered 200 is not there: %v", err)
			}
			return true
		}
		if !asError(err, &apiErr) || apiErr.StatusCode != 503 {
			t.Fatalf("after Redis came back: %v", err)
		}
		return false
	})
}
