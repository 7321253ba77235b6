package integration_test

import (
	"errors"

	"github.com/vajra-go/vajra/internal/wiretest"
)

func asError[T error](err error, target *T) bool { return errors.As(err, target) }

// The raw-HTTP helpers, shared with netio's tests (internal/wiretest).
var (
	rawExchange  = wiretest.RawExchange
	startBlocker = wiretest.StartBlocker
	rawStream    = wiretest.RawStream
	readEvents   = wiretest.ReadEvents
	sseEvents    = wiretest.SSEEvents
	readResponse = wiretest.ReadResponse
	get          = wiretest.Get
	scrape       = wiretest.Scrape
	value        = wiretest.Value
	waitQueued   = wiretest.WaitQueued
)
