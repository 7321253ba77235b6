package netio

import (
	"github.com/vajra-go/vajra/actors"
	"github.com/vajra-go/vajra/httpparse"
)

// addDialectRoutes registers the generation APIs: each runs in a session
// actor of its endpoint. The Anthropic routes answer their own errors
// (401, 404, 415, ...) in Anthropic's shape.
func addDialectRoutes(t *routeTable) {
	t.add("/v1/chat/completions", &route{name: "chat_completions", method: "POST", endpoint: actors.EndpointChatCompletions})
	t.add("/v1/completions", &route{name: "completions", method: "POST", endpoint: actors.EndpointCompletions})
	t.add("/v1/responses", &route{name: "responses", method: "POST", endpoint: actors.EndpointResponses})
	// Over WebSocket (ws_handshake.go): a GET with Upgrade: websocket.
	t.add("/v1/realtime", &route{name: "realtime", method: "GET", endpoint: actors.EndpointRealtime, websocket: true})
	t.add("/v1/responses", &route{name: "responses_ws", method: "GET", endpoint: actors.EndpointResponsesWS, websocket: true})
	t.add("/v1/embeddings", &route{name: "embeddings", method: "POST", endpoint: actors.EndpointEmbeddings})
	t.add("/v1/messages", &route{name: "messages", method: "POST", dialect: dialectAnthropic, endpoint: actors.EndpointMessages})
	t.add("/v1/messages/count_tokens", &route{name: "count_tokens", method: "POST", dialect: dialectAnthropic, endpoint: actors.EndpointCountTokens})

	// The stored responses: short sessions that ask the response store.
	// Suffixed routes first: the bare {id} route takes the rest of the path.
	t.addParam("/v1/responses/", "/cancel", &route{name: "response_cancel", method: "POST",
		endpoint: actors.EndpointResponseCancel, input: responseOpInput("/cancel")})
	t.addParam("/v1/responses/", "/input_items", &route{name: "response_input_items", method: "GET",
		endpoint: actors.EndpointResponseInputItems, input: responseOpInput("/input_items")})
	t.addParam("/v1/responses/", "", &route{name: "response_get", method: "GET",
		endpoint: actors.EndpointResponseGet, input: responseOpInput("")})
	t.addParam("/v1/responses/", "", &route{name: "response_delete", method: "DELETE",
		endpoint: actors.EndpointResponseDelete, input: responseOpInput("")})
}

// responseOpInput returns the input of a stored-response route: the id
// between "/v1/responses/" and suffix, the query, and the body (GET may
// carry {"stream":true}, as openai-go's GetStreaming sends it).
func responseOpInput(suffix string) func(dst []byte, req *httpparse.Request) []byte {
	return func(dst []byte, req *httpparse.Request) []byte {
		return actors.AppendResponseOpBody(dst, pathParam(req.Path, "/v1/responses/", suffix), req.Query, req.Body)
	}
}
