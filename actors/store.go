package actors

import "github.com/vajra-go/vajra/store"

// The sessions' side of the response store (package store): the Responses
// dialect saves and looks up records, the stored-response routes ask it,
// and a background session is a live entry's owner (background.go). What
// the store cannot say in the API's shape is rendered here.

// streamAsk is a GET ...?stream=true: the asker's connection, its
// framing, and the sequence_number after which to start (-1: all). It
// travels as store.Request.Stream to a live response's session.
type streamAsk struct {
	conn    Conn
	chunked bool
	after   int
}

// ResponseStore returns the store of Responses API responses, for metrics.
// Safe for concurrent use.
func (s *Sessions) ResponseStore() store.Store { return s.store }

// StoreIsMemory reports whether responses are stored in this process
// (else in Redis).
func (s *Sessions) StoreIsMemory() bool { return s.cfg.Store.IsMemory() }

// storeUnavailable is the 503 of a request that needs the response store
// when the store cannot answer (err says why: unreachable or overloaded).
// Generation itself does not need the store: store: false requests go on.
func storeUnavailable(err error) *apiError {
	return &apiError{Status: 503, Type: "server_error", Code: "response_store_unavailable",
		Message: "The response store is unavailable (" + err.Error() + "); retry later, or send store: false."}
}

// runningElsewhere is the 409 of a stream resume of a response running on
// another node of the fleet (store.Reply.Elsewhere): its events are only
// in that node's memory until it ends.
func runningElsewhere(id string) *apiError {
	return &apiError{Status: 409, Type: "invalid_request_error", Code: "response_in_progress_elsewhere",
		Message: "Response " + quoteID(id) + " is running on another node of the fleet: its events can be streamed again there, or from any node once it has ended; GET shows its progress."}
}
