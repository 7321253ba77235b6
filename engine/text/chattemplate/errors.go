package chattemplate

import (
	"errors"
	"strconv"
)

var (
	// ErrSyntax: the template does not compile. The model file is at fault.
	ErrSyntax = errors.New("chattemplate: template syntax")
	// ErrRender: the template failed while rendering (an unknown filter, a
	// call of something that is not callable, bad chat_template_kwargs).
	ErrRender = errors.New("chattemplate: render")
	// ErrRaised: the template called raise_exception; the error is a
	// *RaiseError carrying the template's message.
	ErrRaised = errors.New("chattemplate: template raised an exception")
	// ErrToolArguments: a tool call's arguments or a tool's parameters are
	// not valid JSON.
	ErrToolArguments = errors.New("chattemplate: invalid JSON in tool arguments or parameters")
)

// RaiseError is returned by Render when the template calls
// raise_exception(msg): the template refuses the conversation (roles that do
// not alternate, more tool calls than it supports, ...). Message is the
// template's own text, written by the model's authors; it is safe to show
// the client.
type RaiseError struct {
	Message string
}

// Error implements error.
func (e *RaiseError) Error() string {
	return "chattemplate: template raised an exception: " + strconv.Quote(e.Message)
}

// Is makes errors.Is(err, ErrRaised) true.
func (e *RaiseError) Is(target error) bool { return target == ErrRaised }

// asRaise finds a *RaiseError in err's chain.
func asRaise(err error) (*RaiseError, bool) {
	var re *RaiseError
	if errors.As(err, &re) {
		return re, true
	}
	return nil, false
}
