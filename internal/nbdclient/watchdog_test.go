package nbdclient

import (
	"errors"
	"net"
	"testing"
	"time"
)

// evalServer is an nbdkit eval export of 1 MiB whose flush runs flush (a
// shell command) and whose reads run pre first; reads return zeroes,
// writes are dropped.
func evalServer(t *testing.T, flush, pre string) string {
	t.Helper()
	args := []string{"eval", "get_size=echo 1048576",
		"pread=" + pre + "dd if=/dev/zero count=$3 iflag=count_bytes 2>/dev/null",
		"pwrite=cat >/dev/null", "can_write=exit 0", "can_flush=exit 0", "can_fua=echo emulate",
		"flush=" + flush, "thread_model=echo parallel"}
	uri, _ := startNbdkit(t, "nbd+unix", args...)
	return uri
}

// A flush that takes longer than the timeout (but less than twice it) on a
// healthy server does not fail the client: the server answers the
// watchdog's probes meanwhile.
//
// The timeouts here leave the probes (each a read that forks a shell in
// nbdkit's eval plugin) seconds to be answered on a loaded machine.
func TestSlowFlushOnHealthyServer(t *testing.T) {
	timeout := 3 * time.Second
	c := dial(t, evalServer(t, "sleep 4", ""), Options{Timeout: timeout})
	start := time.Now()
	if err := c.Flush(); err != nil {
		t.Fatalf("a slow flush on a server that answers: %v", err)
	}
	if d := time.Since(start); d < 4*time.Second {
		t.Fatalf("the flush took %v: the server's sleep 4 did not hold it", d)
	}
	if err := c.Err(); err != nil {
		t.Fatalf("client failed: %v", err)
	}
}

// A flush held longer than twice the timeout fails the client even while
// the server answers reads.
func TestFlushCap(t *testing.T) {
	timeout := 3 * time.Second
	c := dial(t, evalServer(t, "sleep 3600", ""), Options{Timeout: timeout})
	start := time.Now()
	err := c.Flush()
	if d := time.Since(start); !errors.Is(err, ErrTimeout) || d < 2*timeout {
		t.Fatalf("after %v: want ErrTimeout no earlier than %v, got %v", d, 2*timeout, err)
	}
}

// A server that answers nothing fails a pending flush after the timeout,
// counted from when the flush was sent; reads and writes are failed by
// their own deadline even while the server answers other requests.
func TestTimeoutPolicy(t *testing.T) {
	timeout := 2 * time.Second
	t.Run("flush, server silent", func(t *testing.T) {
		// Reads hang too: the probes go unanswered.
		uri := evalServer(t, "sleep 3600", "sleep 3600; ")
		c := dial(t, uri, Options{Timeout: timeout})
		start := time.Now()
		err := c.Flush()
		d := time.Since(start)
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("want ErrTimeout, got %v", err)
		}
		if d < timeout {
			t.Fatalf("failed after %v, before the %v timeout", d, timeout)
		}
		t.Logf("flush failed after %v: %v", d, err)
	})
	t.Run("write, server answering reads", func(t *testing.T) {
		uri, _ := startNbdkit(t, "nbd+unix", "--filter=delay", "memory", "size=16M", "wdelay=3600")
		c := dial(t, uri, Options{Timeout: timeout})
		done := make(chan error, 1)
		start := time.Now()
		go func() { _, err := c.WriteAt(make([]byte, 4096), 0); done <- err }()
		// Reads keep being answered: the write's deadline holds anyway.
		var err error
		for {
			select {
			case err = <-done:
			default:
				if _, rerr := c.ReadAt(make([]byte, 4096), 8192); rerr != nil && !errors.Is(rerr, ErrTimeout) {
					t.Fatalf("read: %v", rerr)
				}
				if time.Since(start) > 2*time.Minute {
					t.Fatal("the write never failed")
				}
				continue
			}
			break
		}
		if d := time.Since(start); !errors.Is(err, ErrTimeout) || d < timeout {
			t.Fatalf("after %v: want ErrTimeout no earlier than %v, got %v", d, timeout, err)
		}
	})
}

// An idle client notices a server that stopped answering: the watchdog's
// probe goes unanswered and fails the client after the timeout, with no
// request from its user.
func TestIdleServerLost(t *testing.T) {
	timeout := 2 * time.Second
	dir := t.TempDir()
	ctl := dir + "/ctl"
	uri, _ := startNbdkit(t, "nbd+unix", "--filter=pause", "memory", "size=16M", "pause-control="+ctl)
	c := dial(t, uri, Options{Timeout: timeout})
	if _, err := c.ReadAt(make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("unix", ctl)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte{'p'}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for c.Err() == nil {
		if time.Since(start) > 2*time.Minute {
			t.Fatal("an idle client never noticed its paused server")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if d := time.Since(start); !errors.Is(c.Err(), ErrTimeout) || d < timeout {
		t.Fatalf("after %v: want ErrTimeout no earlier than %v, got %v", d, timeout, c.Err())
	} else {
		t.Logf("failed %v after the pause: %v", d, c.Err())
	}
}
