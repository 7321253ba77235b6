package netio

import "github.com/vajra-go/vajra/actors"

// addDialectRoutes registers the generation APIs: each runs in a session
// actor of its endpoint.
func addDialectRoutes(t *routeTable) {
	t.add("/v1/chat/completions", &route{name: "chat_completions", method: "POST", endpoint: actors.EndpointChatCompletions})
}
