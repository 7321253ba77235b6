package netio

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"time"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// EngineControl is the engine control vLLM serves over HTTP (its
// development endpoints, VLLM_SERVER_DEV_MODE=1): the engine core's
// utility calls, which a vllm-core:// worker takes. Safe for concurrent
// use; each call may take as long as the engine does (a sleep waits for
// its running requests with mode "wait").
type EngineControl interface {
	ResetPrefixCache(ctx context.Context, resetRunning, resetExternal bool) (bool, error)
	Sleep(ctx context.Context, level int, mode string) error
	WakeUp(ctx context.Context, tags []string) (bool, error)
	IsSleeping(ctx context.Context) (bool, error)
}

// ErrNoEngineControl is what an EngineControl returns when no engine it
// serves takes control calls: the routes answer 404.
var ErrNoEngineControl = errors.New("netio: no engine takes control calls")

// controlTimeout bounds one control call (a stall detector: the engine
// answers between two of its steps).
const controlTimeout = 5 * time.Minute

// addControlRoutes registers vLLM's engine control endpoints, answered
// off the loop (they wait for the engine).
func addControlRoutes(t *routeTable) {
	t.add("/reset_prefix_cache", &route{name: "reset_prefix_cache", method: "POST"})
	t.add("/sleep", &route{name: "sleep", method: "POST"})
	t.add("/wake_up", &route{name: "wake_up", method: "POST"})
	t.add("/is_sleeping", &route{name: "is_sleeping", method: "GET"})
}

// controlError answers a failed control call in OpenAI's error shape.
func controlError(err error) (int, string, []byte) {
	var ee *engine.Error
	switch {
	case errors.Is(err, ErrNoEngineControl):
		return 404, contentTypeJSON, appendErrorBody(nil, dialectOpenAI, 404, "not_found",
			"This server has no vLLM engine-core worker to control (--worker vllm-core://HOST:PORT).")
	case errors.As(err, &ee) && ee.Kind == engine.KindClosed:
		return 503, contentTypeJSON, appendErrorBody(nil, dialectOpenAI, 503, "", ee.Message)
	case errors.As(err, &ee) && ee.Kind == engine.KindInvalid:
		return 400, contentTypeJSON, appendErrorBody(nil, dialectOpenAI, 400, "", ee.Message)
	}
	return 500, contentTypeJSON, appendErrorBody(nil, dialectOpenAI, 500, "", "The engine failed the call: "+err.Error())
}

func badQuery(msg string) (int, string, []byte) {
	return 400, contentTypeJSON, appendErrorBody(nil, dialectOpenAI, 400, "", msg)
}

// control returns the EngineControl, or the 404 answer.
func (s *Server) control(query []byte) (EngineControl, url.Values, context.Context, context.CancelFunc, error) {
	if s.opts.Control == nil {
		return nil, nil, nil, nil, ErrNoEngineControl
	}
	q, err := url.ParseQuery(string(query))
	if err != nil {
		return nil, nil, nil, nil, &engine.Error{Kind: engine.KindInvalid, Message: "The query does not parse: " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), controlTimeout)
	return s.opts.Control, q, ctx, cancel, nil
}

// queryBool reads a boolean query parameter as FastAPI does (absent:
// false).
func queryBool(q url.Values, name string) (bool, bool) {
	v := q.Get(name)
	switch v {
	case "", "false", "0", "off", "no":
		return false, true
	case "true", "1", "on", "yes":
		return true, true
	}
	return false, false
}

// serveResetPrefixCache answers POST /reset_prefix_cache
// [?reset_running_requests=true&reset_external=true]: {"success": bool}.
func (s *Server) serveResetPrefixCache(query, _ []byte) (int, string, []byte) {
	c, q, ctx, cancel, err := s.control(query)
	if err != nil {
		return controlError(err)
	}
	defer cancel()
	running, ok1 := queryBool(q, "reset_running_requests")
	external, ok2 := queryBool(q, "reset_external")
	if !ok1 || !ok2 {
		return badQuery("reset_running_requests and reset_external are booleans.")
	}
	ok, err := c.ResetPrefixCache(ctx, running, external)
	if err != nil {
		return controlError(err)
	}
	return 200, contentTypeJSON, append(strconv.AppendBool([]byte(`{"success":`), ok), '}')
}

// serveSleep answers POST /sleep[?level=0..2&mode=abort|wait|keep]:
// {"status":"sleeping","level":N}.
func (s *Server) serveSleep(query, _ []byte) (int, string, []byte) {
	c, q, ctx, cancel, err := s.control(query)
	if err != nil {
		return controlError(err)
	}
	defer cancel()
	level := 1
	if v := q.Get("level"); v != "" {
		if level, err = strconv.Atoi(v); err != nil || level < 0 || level > 2 {
			return badQuery("level must be 0, 1 or 2; got " + strconv.Quote(v) + ".")
		}
	}
	mode := q.Get("mode")
	switch mode {
	case "":
		mode = "abort"
	case "abort", "wait", "keep":
	default:
		return badQuery("mode must be abort, wait or keep; got " + strconv.Quote(mode) + ".")
	}
	if err := c.Sleep(ctx, level, mode); err != nil {
		return controlError(err)
	}
	out := strconv.AppendInt([]byte(`{"status":"sleeping","level":`), int64(level), 10)
	return 200, contentTypeJSON, append(out, '}')
}

// serveWakeUp answers POST /wake_up[?tags=T...]:
// {"status":"awake"|"sleeping","tags":[...]|null}.
func (s *Server) serveWakeUp(query, _ []byte) (int, string, []byte) {
	c, q, ctx, cancel, err := s.control(query)
	if err != nil {
		return controlError(err)
	}
	defer cancel()
	tags := q["tags"]
	awake, err := c.WakeUp(ctx, tags)
	if err != nil {
		return controlError(err)
	}
	out := []byte(`{"status":"sleeping","tags":`)
	if awake {
		out = []byte(`{"status":"awake","tags":`)
	}
	if tags == nil {
		out = append(out, "null"...)
	} else {
		out = append(out, '[')
		for i, t := range tags {
			if i > 0 {
				out = append(out, ',')
			}
			out = codegen.AppendJSONStringS(out, t)
		}
		out = append(out, ']')
	}
	return 200, contentTypeJSON, append(out, '}')
}

// serveIsSleeping answers GET /is_sleeping: {"is_sleeping": bool}.
func (s *Server) serveIsSleeping(query, _ []byte) (int, string, []byte) {
	c, _, ctx, cancel, err := s.control(query)
	if err != nil {
		return controlError(err)
	}
	defer cancel()
	sleeping, err := c.IsSleeping(ctx)
	if err != nil {
		return controlError(err)
	}
	return 200, contentTypeJSON, append(strconv.AppendBool([]byte(`{"is_sleeping":`), sleeping), '}')
}
