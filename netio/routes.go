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

// route is one (method, path) pair's handling.
type route struct {
	name    string // for metrics and logs
	method  string
	public  bool // served without an API key
	dialect dialect
	// inline answers on the event loop: it appends a whole response.
	inline func(s *Server, dst []byte, req *httpparse.Request) []byte
	// endpoint, for session routes.
	endpoint actors.Endpoint
	// input, when set, builds a session route's actors.Request.Body from
	// the request head and body (the stored-response routes: the id from
	// the path, the query, and whatever body came, such as openai-go's
	// {"stream":true} on a GET); such routes need no Content-Type, so its
	// check is skipped. Loop-only; appends to dst.
	input func(dst []byte, req *httpparse.Request) []byte
	// utility marks a session route that generates nothing (/tokenize,
	// /detokenize): it takes no admission permit, and its body is not
	// held to Content-Type: application/json.
	utility bool
	// websocket marks a route served over WebSocket (ws_handshake.go): a
	// GET that must be an upgrade, to a session of endpoint.
	websocket bool
}

// routeTable maps paths to routes: exact paths, and path prefixes for
// routes with a parameter (/v1/models/{id}). Lookups by string(path) do not
// allocate (the compiler's m[string(b)] optimisation).
type routeTable struct {
	exact    map[string][]*route
	prefixes []prefixRoute
}

// prefixRoute matches prefix + one or more path segments; suffix, when set,
// must end the path (/v1/responses/{id}/cancel).
type prefixRoute struct {
	prefix, suffix string
	routes         []*route
}

// openaiPrefix is stripped from paths: Vajra's own benchmark client and
// some gateways call /openai/v1/... for the same API.
const openaiPrefix = "/openai"

// add registers r for an exact path.
func (t *routeTable) add(path string, r *route) { t.exact[path] = append(t.exact[path], r) }

// addParam registers r for prefix + {param} (+ suffix): the parameter is one
// path segment unless suffix is empty, in which case it is the rest of the
// path (model names like "org/model" contain slashes).
func (t *routeTable) addParam(prefix, suffix string, r *route) {
	for i := range t.prefixes {
		if t.prefixes[i].prefix == prefix && t.prefixes[i].suffix == suffix {
			t.prefixes[i].routes = append(t.prefixes[i].routes, r)
			return
		}
	}
	t.prefixes = append(t.prefixes, prefixRoute{prefix, suffix, []*route{r}})
}

// newRouteTable builds the routes. Each concern registers its own, in its
// own file: the core routes here, the API dialects in dialect_routes.go,
// the fleet routes (metrics, load, tokenize, ...) in fleet_routes.go.
func newRouteTable() routeTable {
	t := routeTable{exact: map[string][]*route{}}
	t.add("/health", &route{name: "health", method: "GET", public: true, inline: (*Server).handleHealth})
	t.add("/ping", &route{name: "ping", method: "GET", public: true, inline: (*Server).handleHealth})
	t.add("/v1/models", &route{name: "models", method: "GET", inline: (*Server).handleModels})
	t.add("/props", &route{name: "props", method: "GET", inline: (*Server).handleProps})
	t.addParam("/v1/models/", "", &route{name: "model", method: "GET", inline: (*Server).handleModel})
	addDialectRoutes(&t)
	addFleetRoutes(&t)
	return t
}

// lookup finds the routes of a request path (the target without its
// query), one per method. The /openai prefix is accepted before /v1/.
func (t *routeTable) lookup(path []byte) []*route {
	if bytes.HasPrefix(path, []byte(openaiPrefix+"/v1/")) {
		path = path[len(openaiPrefix):]
	}
	if r := t.exact[string(path)]; r != nil {
		return r
	}
	for i := range t.prefixes {
		p := &t.prefixes[i]
		rest, ok := bytes.CutPrefix(path, []byte(p.prefix))
		if !ok || len(rest) == 0 {
			continue
		}
		if p.suffix == "" {
			return p.routes
		}
		param, ok := bytes.CutSuffix(rest, []byte(p.suffix))
		if ok && len(param) > 0 && bytes.IndexByte(param, '/') < 0 {
			return p.routes
		}
	}
	return nil
}

// pathParam returns the parameter of a prefix route: what follows prefix in
// the path, up to suffix.
func pathParam(path []byte, prefix, suffix string) []byte {
	if bytes.HasPrefix(path, []byte(openaiPrefix+"/v1/")) {
		path = path[len(openaiPrefix):]
	}
	path = bytes.TrimPrefix(path, []byte(prefix))
	return bytes.TrimSuffix(path, []byte(suffix))
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
	routes := s.routes.lookup(req.Path)
	rt := notFound
	for _, r := range routes {
		rt = r
		if string(req.Method) == r.method {
			break
		}
	}
	if !rt.public && !s.keys.allowed(req) && !(rt.websocket && s.keys.allowedSubprotocol(req)) {
		return rt, 401
	}
	if rt == notFound {
		return rt, 404
	}
	if string(req.Method) != rt.method {
		return rt, 405
	}
	if !rt.public && s.draining.Load() {
		// Draining: every new request but the public probes is refused,
		// and the connection closes after the answer (appendRouteError).
		return rt, 503
	}
	if rt.endpoint != 0 && rt.input == nil && !rt.utility && !rt.websocket && !isJSON(req.ContentType) {
		return rt, 415
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
	id := pathParam(req.Path, "/v1/models/", "")
	for i, m := range s.opts.Models {
		if m == string(id) {
			return appendResponse(dst, req.Minor, 200, contentTypeJSON, "", nil, s.modelBodies[i], !req.KeepAlive)
		}
	}
	return appendErrorResponse(dst, req.Minor, 404, dialectOpenAI, "model_not_found", "The model does not exist.", !req.KeepAlive)
}
