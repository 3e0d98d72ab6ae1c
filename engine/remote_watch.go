package engine

import (
	"errors"
	"fmt"
)

// lossReporter is a member device that can tell when it is gone for good
// (an NBD member whose server stopped answering or whose connection
// broke): Lost is closed then, and LostErr says why.
type lossReporter interface {
	Lost() <-chan struct{}
	LostErr() error
}

// errDeviceClosed: the device was closed on purpose (array stopped, member
// removed), not lost.
var errDeviceClosed = errors.New("device closed")

// watchLoss fails m as soon as its device reports that it is gone, as md
// fails a member whose I/O fails: the array need not wait for its next
// write to m to notice, and requests that would have waited for m are
// served from the others from then on.
func (a *Array) watchLoss(m *member) {
	lr, ok := m.dev.(lossReporter)
	if !ok {
		return
	}
	go func() {
		<-lr.Lost()
		err := lr.LostErr()
		if err == nil || errors.Is(err, errDeviceClosed) || a.closed.Load() || m.removed.Load() {
			return
		}
		a.cfgMu.RLock()
		inArray := false
		for _, o := range a.all {
			inArray = inArray || o == m
		}
		role := m.role
		a.cfgMu.RUnlock()
		if !inArray || role < 0 || m.State() == Faulty {
			return
		}
		a.failMember(m, fmt.Errorf("device lost: %w", err))
	}()
}
