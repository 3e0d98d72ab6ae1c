package daemon

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// openConns holds every countedConn not yet closed (liveConns).
var openConns sync.Map // *countedConn -> struct{}

// liveConns counts the connections counted in n that are still open and
// whose client has not hung up. A client that has closed its end (nbdcopy
// that has exited) is gone for md's purposes (openers drop at close), even
// when the server has not yet read the end of its connection: -o right
// after such a client must not say EBUSY.
func liveConns(n *atomic.Int64) int64 {
	var live int64
	openConns.Range(func(k, _ any) bool {
		if c := k.(*countedConn); c.n == n && !peerGone(c.Conn) {
			live++
		}
		return true
	})
	return live
}

// peerGone reports whether the other end of c has hung up: poll(2) says
// POLLRDHUP or POLLHUP on its socket (without waiting). A connection that
// cannot be asked counts as present.
func peerGone(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		for {
			n, err := unix.Poll(fds, 0)
			if err == unix.EINTR {
				continue
			}
			gone = err == nil && n == 1 && fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP) != 0
			return
		}
	})
	return gone
}
