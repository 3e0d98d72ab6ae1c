package engine

import (
	"time"

	"mdtool/internal/nbdclient"
)

// The stall bound of members on NBD servers. The user's remote timeout T
// (FileOptions.RemoteTimeout, --remote-timeout) is the longest a request to
// the array may stall because a member stopped answering. A request that
// met a lost member is held, after the member's NBD client gave up, for:
//
//   - the probe of a server that was idle when it went away (the client
//     probes a server silent for nbdclient.ProbeInterval, at most 0.5 s):
//     a request that waits for two members lost at once may wait for the
//     second one's probe deadline after the first one's request deadline;
//   - the failure record: md holds the request until the survivors'
//     superblocks say the member is faulty (a write and a flush on each),
//     then the request is served from the survivors and its reply goes out
//     (through the array's NBD export, on a loaded machine).
//
// So the member's client gets a deadline of T less RemoteAllowance(T), and
// the member is failed, and the request served, within T. The allowance is
// a quarter of T, at most 2 s: 0.5 s for the probe and 1.5 s for the
// failure record (with T = 15 s the stall tests measured the longest
// request 0.03-1.2 s past the 13 s deadline, the most for raid6's two
// members lost at once under fio through the array's NBD export, on a
// loaded 2-core machine). A quarter of T at most, so that a healthy
// member is never held to less than three quarters of the user's number
// (a loaded server's flush can take seconds): with a timeout under 8 s the
// allowance is T/4, and the share left for the failure record (T/4 less
// the probe interval) shrinks with it.

// RemoteAllowance is what the member deadline leaves of the remote timeout
// for the probe of an idle server and the failure record: timeout/4, at
// most 2 s.
func RemoteAllowance(timeout time.Duration) time.Duration {
	return min(timeout/4, 2*time.Second)
}

// MemberDeadline is the deadline a member's NBD client is given for the
// remote timeout (0: nbdclient.DefaultTimeout; negative: never): the
// timeout less RemoteAllowance. nbdclient's policy (requests, flushes from
// the last reply, probes) applies to this deadline.
func MemberDeadline(timeout time.Duration) time.Duration {
	if timeout == 0 {
		timeout = nbdclient.DefaultTimeout
	}
	if timeout < 0 {
		return timeout
	}
	return timeout - RemoteAllowance(timeout)
}
