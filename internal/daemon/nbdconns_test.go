package daemon

import (
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// TestLiveConnsPeerGone: a connection whose client has closed its end no
// longer counts for liveConns (-o's EBUSY), though the server has not
// closed its side yet (the counter still has it); an open one does.
func TestLiveConnsPeerGone(t *testing.T) {
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var n atomic.Int64
	cl := countingListener{l, &n}
	dial := func() (client, server net.Conn) {
		c, err := net.Dial("unix", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := cl.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return c, s
	}
	c1, s1 := dial()
	c2, s2 := dial()
	defer s1.Close()
	defer c2.Close()
	if got := liveConns(&n); got != 2 {
		t.Fatalf("two open connections: liveConns = %d", got)
	}
	c1.Close()
	if got := liveConns(&n); got != 1 || n.Load() != 2 {
		t.Errorf("after one client closed: liveConns = %d (counter %d), want 1 (2)", got, n.Load())
	}
	s2.Close()
	if got := liveConns(&n); got != 0 || n.Load() != 1 {
		t.Errorf("after the server closed the other: liveConns = %d (counter %d), want 0 (1)", got, n.Load())
	}
	var other atomic.Int64
	if got := liveConns(&other); got != 0 {
		t.Errorf("another counter: liveConns = %d", got)
	}
}
