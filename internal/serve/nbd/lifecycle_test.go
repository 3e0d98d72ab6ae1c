package nbd

import (
	"errors"
	"net"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"mdtool/internal/serve/export"
)

// TestClientDisconnects drops connections at awkward moments: mid header,
// mid WRITE payload, with requests in flight and replies unread, and while
// a write sits in the Backend. The server must not apply partial writes,
// must not leak goroutines, and must keep serving.
func TestClientDisconnects(t *testing.T) {
	_, sock, rb := transmissionServer(t, Config{})
	orig := snapshot(t, rb)
	// Warm up once so lazily started runtime goroutines are counted.
	warm := dialRaw(t, "unix", sock)
	warm.start("x", true, infoBlockSize)
	warm.send(0, cmdDisc, 0, 0, 0, nil)
	warm.expectClosed()
	time.Sleep(50 * time.Millisecond)
	base := runtime.NumGoroutine()

	// Mid header.
	c := dialRaw(t, "unix", sock)
	c.start("x", false, infoBlockSize)
	c.write([]byte{0x25, 0x60, 0x95, 0x13, 0, 0, 0, 1, 0, 0})
	c.nc.Close()

	// Mid WRITE payload, both reply modes.
	for _, structured := range []bool{false, true} {
		c = dialRaw(t, "unix", sock)
		c.start("x", structured, infoBlockSize)
		c.send(0, cmdWrite, 1, 0, 64<<10, make([]byte, 1000))
		c.nc.Close()
	}

	// Many requests in flight, replies never read, large reads filling the
	// socket buffers.
	c = dialRaw(t, "unix", sock)
	c.start("x", true, infoBlockSize)
	for i := uint64(0); i < 64; i++ {
		c.send(0, cmdRead, i, 0, tMax, nil)
	}
	c.nc.Close()

	// A refused write whose payload never arrives in full.
	c = dialRaw(t, "unix", sock)
	c.start("x", false, infoBlockSize)
	c.send(0, cmdWrite, 1, tSize, 64<<10, make([]byte, 100))
	c.nc.Close()

	mustEqual(t, "device after aborted writes", snapshot(t, rb), orig)

	// A write inside the Backend when the client goes away completes.
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	rb.onWrite = func(off int64) {
		if off == 8192 {
			close(entered)
			<-release
		}
	}
	defer once.Do(func() { close(release) })
	c = dialRaw(t, "unix", sock)
	c.start("x", false, infoBlockSize)
	data := pattern(tMin, 5)
	c.send(0, cmdWrite, 1, 8192, tMin, data)
	<-entered
	c.nc.Close()
	once.Do(func() { close(release) })

	waitGoroutines(t, base)
	rb.onWrite = nil
	got := snapshot(t, rb)
	mustEqual(t, "completed write", got[8192:8192+tMin], data)
	copy(orig[8192:], data)
	mustEqual(t, "rest of the device", got, orig)

	c = dialRaw(t, "unix", sock)
	c.start("x", true, infoBlockSize)
	if r := c.do(0, cmdRead, 8192, tMin, nil); r.errno != 0 {
		t.Fatalf("read afterwards: errno %d", r.errno)
	}
}

// TestCloseGraceful closes the server while a request sits in the Backend:
// Close waits for it, the client gets its reply, then the Backend is
// flushed and the connection closed.
func TestCloseGraceful(t *testing.T) {
	rb := &recBackend{Backend: newMem(t, tSize, tMin, tPref, tMax)}
	s, err := NewServer(Config{Exports: []Export{{Backend: rb}}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	rb.onWrite = func(int64) {
		close(entered)
		<-release
	}
	c := dialRaw(t, "tcp", addr)
	c.start("", true, infoBlockSize)
	idle := dialRaw(t, "tcp", addr)
	idle.start("", false, infoBlockSize)
	negotiating := dialRaw(t, "tcp", addr)
	negotiating.hello()

	c.send(0, cmdWrite, 42, 0, tMin, pattern(tMin, 1))
	<-entered
	rb.Calls()
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()

	// Close ends the negotiation at once and the idle connection once it
	// has nothing in flight.
	negotiating.expectClosed()
	idle.expectClosed()
	select {
	case err := <-closed:
		t.Fatalf("Close returned %v with a request in the Backend", err)
	default:
	}
	once.Do(func() { close(release) })
	r := c.readReply(func(uint64) int { return 0 })
	if r.cookie != 42 || r.errno != 0 {
		t.Fatalf("reply cookie %d errno %d", r.cookie, r.errno)
	}
	c.expectClosed()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if calls := rb.Calls(); !slices.Equal(calls, []string{"write 0 4096", "flush"}) {
		t.Fatalf("backend calls %q, want the write then a flush", calls)
	}
	if nc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		nc.Close()
		t.Fatal("listener still accepting after Close")
	}
	if err := s.Serve(l); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
}

// TestServeConnShutdown uses ServeConn on a pipe: Close stops a
// transmitting connection that has nothing in flight.
func TestServeConnShutdown(t *testing.T) {
	s, err := NewServer(Config{Exports: []Export{{Backend: newMem(t, tSize, tMin, tPref, tMax)}}})
	if err != nil {
		t.Fatal(err)
	}
	cs, ss := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.ServeConn(ss) }()
	c := newRaw(t, cs)
	c.start("", false)
	if r := c.do(0, cmdRead, 0, tMin, nil); r.errno != 0 {
		t.Fatal(r.errno)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("ServeConn: %v, want ErrServerClosed", err)
	}
	c.expectClosed()
	if err := s.ServeConn(ss); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("ServeConn after Close: %v", err)
	}
}

func TestListenUnixStaleSocket(t *testing.T) {
	_, sock := startUnix(t, Config{Exports: []Export{{Backend: newMem(t, tSize, tMin, tPref, tMax)}}})
	s2, err := NewServer(Config{Exports: []Export{{Backend: newMem(t, tSize, tMin, tPref, tMax)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.ListenUnix(sock); err == nil {
		t.Fatal("ListenUnix took over a live socket")
	}
	// A socket file nobody listens on is replaced.
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock + "2", Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	if _, err := s2.ListenUnix(sock + "2"); err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	c := dialRaw(t, "unix", sock+"2")
	c.start("", false)
}

func TestNewServerErrors(t *testing.T) {
	m := newMem(t, tSize, tMin, tPref, tMax)
	for _, cfg := range []Config{
		{},
		{Exports: []Export{{Name: "a"}}},
		{Exports: []Export{{Name: "a", Backend: m}, {Name: "a", Backend: m}}},
		{Exports: []Export{{Backend: sizes{m, 3000, 6000, 1 << 20}}}},
		{Exports: []Export{{Name: string(make([]byte, 5000)), Backend: m}}},
	} {
		if _, err := NewServer(cfg); err == nil {
			t.Errorf("NewServer(%d exports) accepted a bad config", len(cfg.Exports))
		}
	}
}

// sizes overrides a Backend's block sizes.
type sizes struct {
	export.Backend
	min, pref, max uint32
}

func (b sizes) BlockSizes() (uint32, uint32, uint32) { return b.min, b.pref, b.max }

func TestAdvertisedBlockSizes(t *testing.T) {
	m := newMem(t, 1<<20, 512, 4096, 1<<20)
	for _, tc := range []struct {
		in, want [3]uint32
		capMax   uint32
	}{
		{[3]uint32{512, 4096, 1 << 20}, [3]uint32{512, 4096, 1 << 20}, 0},
		{[3]uint32{4096, 3 * 65536, 4 << 20}, [3]uint32{4096, 262144, 4 << 20}, 0}, // 3 data disks
		{[3]uint32{4096, 1 << 20, 64 << 20}, [3]uint32{4096, 1 << 20, 32 << 20}, 0},
		{[3]uint32{4096, 2 << 20, 64 << 20}, [3]uint32{4096, 2 << 20, 2 << 20}, 1 << 20},
		{[3]uint32{512, 12 << 20, 12 << 20}, [3]uint32{512, 16 << 20, 16 << 20}, 0},
	} {
		s, err := NewServer(Config{MaxPayload: tc.capMax, Exports: []Export{{Backend: sizes{m, tc.in[0], tc.in[1], tc.in[2]}}}})
		if err != nil {
			t.Fatal(err)
		}
		x := s.exports[0]
		if got := [3]uint32{x.min, x.pref, x.max}; got != tc.want {
			t.Errorf("backend %v cap %d: advertised %v, want %v", tc.in, tc.capMax, got, tc.want)
		}
	}
}
