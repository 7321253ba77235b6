package netio

import (
	"bytes"

	"github.com/vajra-go/vajra/actors"
	"github.com/vajra-go/vajra/httpparse"
)

// dialect selects the shape of error bodies on a route.
type dialect uint8

const (
	dialectOpenAI dialect = iota
	dialectAnthropic
)

// route is one path's handling.
type route struct {
	name    string // for metrics and logs
	method  string
	public  bool // served without an API key
	dialect dialect
	// inline answers on the event loop: it appends a whole response.
	inline func(s *Server, dst []byte, req *httpparse.Request) []byte
	// endpoint, for session routes.
	endpoint actors.Endpoint
}

// routeTable maps exact paths to routes. Lookups by string(path) do not
// allocate (the compiler's m[string(b)] optimisation).
type routeTable struct {
	exact map[string]*route
	// modelByID answers GET /v1/models/{id}.
	modelByID *route
}

// openaiPrefix is stripped from paths: Vajra's own benchmark client and
// some gateways call /openai/v1/... for the same API.
const openaiPrefix = "/openai"

func newRouteTable(s *Server) routeTable {
	t := routeTable{exact: map[string]*route{}}
	add := func(path string, r *route) { t.exact[path] = r }
	add("/health", &route{name: "health", method: "GET", public: true, inline: (*Server).handleHealth})
	add("/ping", &route{name: "ping", method: "GET", public: true, inline: (*Server).handleHealth})
	add("/v1/models", &route{name: "models", method: "GET", inline: (*Server).handleModels})
	add("/v1/chat/completions", &route{name: "chat_completions", method: "POST", endpoint: actors.EndpointChatCompletions})
	t.modelByID = &route{name: "model", method: "GET", inline: (*Server).handleModel}
	return t
}

// lookup finds the route of a request path (the target without its query).
// The /openai prefix is accepted before /v1/.
func (t *routeTable) lookup(path []byte) *route {
	if bytes.HasPrefix(path, []byte(openaiPrefix+"/v1/")) {
		path = path[len(openaiPrefix):]
	}
	if r := t.exact[string(path)]; r != nil {
		return r
	}
	if rest, ok := bytes.CutPrefix(path, []byte("/v1/models/")); ok && len(rest) > 0 && bytes.IndexByte(rest, '/') < 0 {
		return t.modelByID
	}
	return nil
}

// notFound is the route of paths that match none: errors in OpenAI's shape.
var notFound = &route{name: "not_found"}

// precheck runs every check that needs only the request head: route, auth,
// method, content type, draining. It returns the route (notFound when none)
// and a non-zero status when the request is refused.
//
// Auth comes first and is default-deny: only an exact public path is served
// without a key, so no spelling of a path (case, slashes, dot segments,
// percent-encoding) can reach a protected handler unauthenticated; at worst
// it reaches a 404 after the key check.
func (s *Server) precheck(req *httpparse.Request) (*route, int) {
	rt := s.routes.lookup(req.Path)
	if rt == nil {
		rt = notFound
	}
	if !rt.public && !s.keys.allowed(req) {
		return rt, 401
	}
	if rt == notFound {
		return rt, 404
	}
	if string(req.Method) != rt.method {
		return rt, 405
	}
	if rt.endpoint != 0 {
		if s.draining.Load() {
			return rt, 503
		}
		if !isJSON(req.ContentType) {
			return rt, 415
		}
	}
	return rt, 0
}

// isJSON reports whether a Content-Type is application/json (any
// parameters, any case).
func isJSON(ct []byte) bool {
	const want = "application/json"
	if len(ct) < len(want) || !bytes.EqualFold(ct[:len(want)], []byte(want)) {
		return false
	}
	rest := ct[len(want):]
	return len(rest) == 0 || rest[0] == ';' || rest[0] == ' ' || rest[0] == '\t'
}

func (s *Server) handleHealth(dst []byte, req *httpparse.Request) []byte {
	if s.draining.Load() || (s.opts.Engine != nil && !s.opts.Engine.Stats().Healthy) {
		return appendResponse(dst, req.Minor, 503, "", "", nil, nil, !req.KeepAlive)
	}
	return appendResponse(dst, req.Minor, 200, "", "", nil, nil, !req.KeepAlive)
}

func (s *Server) handleModels(dst []byte, req *httpparse.Request) []byte {
	return appendResponse(dst, req.Minor, 200, contentTypeJSON, "", nil, s.modelsBody, !req.KeepAlive)
}

func (s *Server) handleModel(dst []byte, req *httpparse.Request) []byte {
	id := req.Path[bytes.LastIndexByte(req.Path, '/')+1:]
	for i, m := range s.opts.Models {
		if m == string(id) {
			return appendResponse(dst, req.Minor, 200, contentTypeJSON, "", nil, s.modelBodies[i], !req.KeepAlive)
		}
	}
	return appendErrorResponse(dst, req.Minor, 404, dialectOpenAI, "model_not_found", "The model does not exist.", !req.KeepAlive)
}
