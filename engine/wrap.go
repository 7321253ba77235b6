package engine

// Wrapper is an Engine built around another: a program's middleware that
// rewrites requests, counts them or guards them, and hands the rest to the
// engine it wraps. Unwrap returns that engine. The optional interfaces an
// engine may implement (Lacker, OutputParser, Describer, Embedder,
// ProcHolder, MaxModelLen, ...) are looked up through wrappers (As), so a
// wrapper that embeds the Engine interface, which hides them, need not
// forward each one; a wrapper that implements one itself is asked first.
type Wrapper interface {
	Engine
	Unwrap() Engine
}

// As returns the first of e, the engine e wraps, the engine that one
// wraps, and so on (Wrapper), that is a T, as errors.As does for errors.
func As[T any](e Engine) (T, bool) {
	for e != nil {
		if t, ok := e.(T); ok {
			return t, true
		}
		w, ok := e.(Wrapper)
		if !ok {
			break
		}
		e = w.Unwrap()
	}
	var zero T
	return zero, false
}
