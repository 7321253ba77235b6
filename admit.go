package vajra

import (
	"github.com/vajra-go/vajra/actors"
	"github.com/vajra-go/vajra/netio"
)

// localAdmitter gives the generation requests no HTTP exchange carries
// (the creates of a Responses API WebSocket) the admission control of HTTP
// and in-process requests: netio.Server.AdmitLocal, whose Local is the
// actors.Admission.
type localAdmitter struct{ n *netio.Server }

func (a localAdmitter) Admit(start func() actors.Handle) (actors.Admission, error) {
	l, err := a.n.AdmitLocal(func(*netio.Local) actors.Handle { return start() })
	if err != nil {
		return nil, err
	}
	return l, nil
}
