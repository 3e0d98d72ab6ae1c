package nbd

import (
	"fmt"
	"net"
)

// ServeTransmission serves nc from the transmission phase on, for a peer
// that negotiated nothing over it: the kernel's NBD client, configured
// over netlink with the flags of TransmissionFlags, sends requests at
// once. Simple replies only; payloads up to 32 MiB. Such connections are
// not counted against the connection limit and never dropped as idle (a
// mounted file system may send nothing for hours), but they share the
// payload budget. It returns when the connection ends (the peer sent
// NBD_CMD_DISC or closed it, or the Server was closed) and closes nc.
func (s *Server) ServeTransmission(nc net.Conn, export string) error {
	x := s.lookup(export)
	if x == nil {
		nc.Close()
		return fmt.Errorf("nbd: no export %q", export)
	}
	c := newConn(s, nc)
	c.preNegotiated = true
	if !s.track(c, nil) {
		nc.Close()
		return ErrServerClosed
	}
	defer s.untrack(c, nil)
	defer nc.Close()
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return ErrServerClosed
	}
	c.transmitting = true
	c.mu.Unlock()
	return c.transmit(x, s.log.With("remote", "kernel"))
}

// TransmissionFlags are the transmission flags of an export as NBD_OPT_GO
// would send them (NBD_FLAG_HAS_FLAGS, SEND_FLUSH, SEND_FUA,
// CAN_MULTI_CONN, and READ_ONLY or SEND_TRIM and SEND_WRITE_ZEROES); false
// if there is no such export.
func (s *Server) TransmissionFlags(export string) (uint16, bool) {
	x := s.lookup(export)
	if x == nil {
		return 0, false
	}
	return x.tflags, true
}
