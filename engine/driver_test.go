package engine_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/engine"
)

// TestOpenUnknownDriver: a name no imported package registered fails with
// ErrUnknownDriver, and the message says how a driver is linked.
func TestOpenUnknownDriver(t *testing.T) {
	_, err := engine.Open("no-such-engine", engine.Config{}, nil, nil)
	if !errors.Is(err, engine.ErrUnknownDriver) || !strings.Contains(err.Error(), `"no-such-engine"`) ||
		!strings.Contains(err.Error(), "importing its package") {
		t.Fatalf("err = %v", err)
	}
}
