package nbdkit

import (
	"encoding/binary"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// SetLink sets the host's link up or down (as LinkUp, LinkDown) with one
// rtnetlink request, not an ip(8) process: a test that cuts several links
// at the same moment measures how far apart the cuts were, and forking ip
// on a loaded machine can take most of a second. It returns the error
// instead of failing a test (for goroutines).
func (h *Host) SetLink(up bool) error {
	ifi, err := net.InterfaceByName(h.HostIf)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	// struct nlmsghdr (16 bytes), then struct ifinfomsg (16 bytes):
	// family, pad, type, index, flags, change (only IFF_UP changes).
	req := make([]byte, unix.NLMSG_HDRLEN+unix.SizeofIfInfomsg)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.RTM_NEWLINK)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	ne.PutUint32(req[8:], 1) // sequence number
	m := req[unix.NLMSG_HDRLEN:]
	m[0] = unix.AF_UNSPEC
	ne.PutUint32(m[4:], uint32(ifi.Index))
	if up {
		ne.PutUint32(m[8:], unix.IFF_UP)
	}
	ne.PutUint32(m[12:], unix.IFF_UP)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("rtnetlink: set %s: %w", h.HostIf, err)
	}
	// The acknowledgement: an NLMSG_ERROR message whose error is 0.
	buf := make([]byte, 4096)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return fmt.Errorf("rtnetlink: set %s: %w", h.HostIf, err)
		}
		for b := buf[:n]; len(b) >= unix.NLMSG_HDRLEN; {
			l := int(ne.Uint32(b[0:]))
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				return fmt.Errorf("rtnetlink: set %s: bad reply", h.HostIf)
			}
			if ne.Uint16(b[4:]) == unix.NLMSG_ERROR && ne.Uint32(b[8:]) == 1 {
				if l < unix.NLMSG_HDRLEN+4 {
					return fmt.Errorf("rtnetlink: set %s: short reply", h.HostIf)
				}
				if e := int32(ne.Uint32(b[unix.NLMSG_HDRLEN:])); e != 0 {
					return fmt.Errorf("rtnetlink: set %s: %w", h.HostIf, unix.Errno(-e))
				}
				return nil
			}
			next := (l + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
			if next >= len(b) {
				break
			}
			b = b[next:]
		}
	}
}
