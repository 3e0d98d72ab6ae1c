package nbdclient

import (
	"fmt"
	"net"
	"time"
)

// The timeout policy (Options.Timeout). The server is dead, and the client
// fails, when it leaves a request unanswered for the timeout:
//
//   - a read, write (FUA or not), trim or write-zeroes request: counted
//     from the moment it was sent, whatever else the server answers
//     meanwhile (a server that answers reads but holds writes is dead);
//   - a flush (which a healthy but loaded server may take long to answer
//     while it writes back its cache): counted from the moment it was sent
//     or from the server's last reply, whichever is later, but failed at
//     twice the timeout after it was sent in any case.
//
// Whenever the server has said nothing for ProbeInterval (idle, or busy
// with a flush), the watchdog sends a probe, a read of one block at offset
// 0: a healthy server answers it at once, a dead one does not, and then the
// probe is a pending read like any other. So a server that goes away is
// noticed within the timeout plus ProbeInterval of going away even when the
// array sends it nothing (and when it fails together with another member,
// a request that waits for both is not held for two timeouts in a row).
//
// The watchdog sleeps until the earliest deadline (not on a coarse tick),
// so the client fails when the first deadline passes; failing ends every
// pending request at once with ErrTimeout.

// ProbeInterval is how long the server may stay silent before the watchdog
// probes it: the timeout / 4, at most half a second.
func ProbeInterval(timeout time.Duration) time.Duration {
	return min(timeout/4, 500*time.Millisecond)
}

// replied records that the server answered something.
func (c *Client) replied() { c.lastReply.Store(int64(time.Since(c.base))) }

// watchdog fails the client when a pending request passes its deadline.
func (c *Client) watchdog() {
	defer c.wg.Done()
	t := time.NewTimer(ProbeInterval(c.timeout))
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		now := time.Since(c.base)
		wake, waited, probe := c.scan(now)
		if waited > 0 {
			c.fail(fmt.Errorf("%s: %w (%v; a request waited %v)", c.uri, ErrTimeout, c.timeout,
				waited.Round(time.Millisecond)))
			return
		}
		if probe && c.probing.CompareAndSwap(false, true) {
			go c.probe()
		}
		t.Reset(wake - now)
	}
}

// scan looks at every pending request at time now (since c.base). It
// returns when to look again, how long a request past its deadline has
// waited (> 0: the server is dead), and whether a probe is due.
func (c *Client) scan(now time.Duration) (wake, waited time.Duration, probe bool) {
	every := ProbeInterval(c.timeout)
	wake = now + c.timeout/4 // a request sent from now on is due no earlier
	last := time.Duration(c.lastReply.Load())
	switch {
	case c.probing.Load():
		wake = now + every
	case now-last >= every:
		probe = true
		wake = now + every
	default:
		wake = last + every
	}
	for _, cn := range c.conns {
		cn.mu.Lock()
		for _, k := range cn.pending {
			from := k.start.Sub(c.base)
			due := from + c.timeout
			if k.flush {
				due = min(max(from, last)+c.timeout, from+2*c.timeout)
			}
			if now >= due {
				waited = max(waited, now-from)
			}
			wake = min(wake, due)
		}
		cn.mu.Unlock()
	}
	if wake <= now {
		wake = now + time.Millisecond
	}
	return wake, waited, probe
}

// probe reads one block at offset 0: any answer shows the server alive.
func (c *Client) probe() {
	defer c.probing.Store(false)
	n := int(c.ex.minBlock)
	if n < 512 {
		n = 512
	}
	if int64(n) > c.Size() {
		return
	}
	if c.probeBuf == nil {
		c.probeBuf = make([]byte, n)
	}
	c.pick().do(cmdRead, 0, 0, c.probeBuf, nil)
}

// closeAbortive closes the connection of a failed client at once, TCP
// with a reset: requests still in the socket's send queue are dropped
// rather than delivered when the link comes back (a write the array gave
// up on must not land on the member later, after its re-add). A TLS
// connection's underlying socket is closed directly: no close_notify
// that could wait on a dead peer.
func closeAbortive(nc net.Conn) {
	if w, ok := nc.(interface{ NetConn() net.Conn }); ok {
		nc = w.NetConn()
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	nc.Close()
}
