package engine

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"go.uber.org/zap"
)

// Driver opens engines of one kind that the module root does not link
// itself (llama.cpp in process: engine/llama, registered as "llama"). As a
// database/sql driver, the package that implements it registers it in its
// init, and a program links it by importing that package; the root
// package (vajra.Config.Driver) opens it by name.
type Driver interface {
	// Open builds an engine. shared holds the settings every engine
	// shares, which the engine reads from it alone; own is the driver's
	// own configuration, of the type its package documents (engine/llama:
	// a llama.Config or a *llama.Config). own of another type, or one
	// that sets the shared settings itself (its embedded Config), fails
	// with ErrDriverConfig. log gets the engine's start and stop lines
	// (never per-token ones); it is never nil.
	Open(shared Config, own any, log *zap.Logger) (Engine, error)
}

// Errors of Register's registry.
var (
	// ErrUnknownDriver: Open was given a name no imported package
	// registered (a forgotten import).
	ErrUnknownDriver = errors.New("engine: unknown driver")
	// ErrDriverConfig: a driver was given a configuration of a type it
	// does not take.
	ErrDriverConfig = errors.New("engine: driver configuration of the wrong type")
)

var drivers struct {
	sync.RWMutex
	m map[string]Driver
}

// Register makes a driver available under name. It panics when name is
// registered twice or d is nil, as database/sql.Register does: both are
// programming errors of an init. Safe for concurrent use.
func Register(name string, d Driver) {
	if d == nil {
		panic("engine: Register of a nil driver " + name)
	}
	drivers.Lock()
	defer drivers.Unlock()
	if drivers.m == nil {
		drivers.m = map[string]Driver{}
	}
	if _, dup := drivers.m[name]; dup {
		panic("engine: driver " + name + " registered twice")
	}
	drivers.m[name] = d
}

// Drivers lists the registered drivers' names, sorted. Safe for
// concurrent use.
func Drivers() []string {
	drivers.RLock()
	defer drivers.RUnlock()
	names := make([]string, 0, len(drivers.m))
	for n := range drivers.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Open opens an engine with the driver registered under name (see
// Driver.Open for shared, own and log; a nil log logs nothing). An unknown name
// fails with ErrUnknownDriver, naming the drivers this program links.
// Safe for concurrent use.
func Open(name string, shared Config, own any, log *zap.Logger) (Engine, error) {
	drivers.RLock()
	d := drivers.m[name]
	drivers.RUnlock()
	if d == nil {
		known := strings.Join(Drivers(), ", ")
		if known == "" {
			known = "none"
		}
		return nil, fmt.Errorf("%w %q (registered: %s; a driver is linked by importing its package, e.g. github.com/vajra-go/vajra/engine/llama)",
			ErrUnknownDriver, name, known)
	}
	if log == nil {
		log = zap.NewNop()
	}
	return d.Open(shared, own, log)
}
