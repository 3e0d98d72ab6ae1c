package nbd

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"math/rand"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// syncBuf is a log destination safe for concurrent writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func bufLogger() (*slog.Logger, *syncBuf) {
	b := &syncBuf{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelWarn})), b
}

// waitFor polls cond until it holds; it fails the test after a generous
// bound (the condition is what is tested, not how fast it comes).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestBudgetLargeRequestAlone(t *testing.T) {
	b := newBudget(100)
	var w1, w2 waiter
	if got := b.acquire(150, &w1); got != 100 {
		t.Fatalf("oversized acquire took %d, want the whole budget 100", got)
	}
	done := make(chan int64, 1)
	go func() { done <- b.acquire(1, &w2) }()
	waitFor(t, "the second acquire to queue", func() bool { return b.waiting.Load() == 1 })
	select {
	case <-done:
		t.Fatal("acquire succeeded while the whole budget was taken")
	default:
	}
	b.release(100)
	if got := <-done; got != 1 || b.inUse() != 1 {
		t.Fatalf("after release: took %d, in use %d", got, b.inUse())
	}
}

// A small request that would fit waits behind a large one that came first.
func TestBudgetFIFO(t *testing.T) {
	b := newBudget(100)
	var w0, wa, wb waiter
	b.acquire(60, &w0)
	order := make(chan string, 2)
	go func() { b.acquire(80, &wa); order <- "a" }()
	waitFor(t, "a to queue", func() bool { return b.waiting.Load() == 1 })
	go func() { b.acquire(30, &wb); order <- "b" }()
	waitFor(t, "b to queue", func() bool { return b.waiting.Load() == 2 })
	b.release(60)
	if got := <-order; got != "a" {
		t.Fatalf("%s got the budget first, want a", got)
	}
	select {
	case <-order:
		t.Fatal("b got 30 bytes while a holds 80 of 100")
	default:
	}
	b.release(80)
	if got := <-order; got != "b" || b.inUse() != 30 {
		t.Fatalf("got %s, in use %d", got, b.inUse())
	}
}

// Concurrent takers never hold more than the budget together, except one
// oversized request alone, and every one of them gets through.
func TestBudgetConcurrent(t *testing.T) {
	const max = 1000
	b := newBudget(max)
	var held, holders atomic.Int64
	var bad atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed))
			var w waiter
			for i := 0; i < 3000; i++ {
				n := b.acquire(int64(1+rng.Intn(1200)), &w)
				h := held.Add(n)
				k := holders.Add(1)
				if h > max && k > 1 {
					bad.Add(1)
				}
				holders.Add(-1)
				held.Add(-n)
				b.release(n)
			}
		}(int64(g))
	}
	wg.Wait()
	if bad.Load() != 0 || b.inUse() != 0 || b.waiting.Load() != 0 {
		t.Fatalf("%d times over budget; in use %d, waiting %d at the end", bad.Load(), b.inUse(), b.waiting.Load())
	}
}

// Small requests get through on the connection's reserve while others hold
// the whole shared budget; beyond the reserve they wait.
func TestReserveWhenBudgetSpent(t *testing.T) {
	gate := make(chan struct{})
	m := newMem(t, 16<<20, 512, 4096, 1<<20)
	rb := &recBackend{Backend: m}
	var held atomic.Int64
	rb.onRead = func(off int64) {
		if off >= 8<<20 {
			held.Add(1)
			<-gate // the hog's reads stay in the Backend, holding budget
		}
	}
	s, sock := startUnix(t, Config{Exports: []Export{{Backend: rb}}, MaxBytes: 4 << 20, InlineMax: -1})
	defer close(gate)
	hog := dialRaw(t, "unix", sock)
	hog.start("", false)
	hog.send(0, cmdRead, 1, 8<<20, 4<<20, nil)
	waitFor(t, "the hog to hold the budget", func() bool { return held.Load() == 1 })
	if got := s.cfg.Limits.InFlightBytes(); got != 4<<20 {
		t.Fatalf("in flight %d, want the whole budget", got)
	}
	good := dialRaw(t, "unix", sock)
	good.start("", false)
	for i := 0; i < 8; i++ {
		p := pattern(64<<10, byte(i))
		if r := good.do(0, cmdWrite, uint64(i)<<16, 64<<10, p); r.errno != 0 {
			t.Fatalf("write: errno %d", r.errno)
		}
		if r := good.do(0, cmdRead, uint64(i)<<16, 64<<10, nil); r.errno != 0 {
			t.Fatalf("read: errno %d", r.errno)
		} else {
			mustEqual(t, "read back", r.data, p)
		}
	}
	// With the reserve taken by a request held in the Backend, the next
	// small request waits.
	good.send(0, cmdRead, 10, 12<<20, 1<<20, nil)
	waitFor(t, "the good client's read to reach the Backend", func() bool { return held.Load() == 2 })
	good.send(0, cmdRead, 11, 4096, 4096, nil)
	waitFor(t, "the second request to wait for the reserve", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for c := range s.conns {
			c.mu.Lock()
			tx := c.tx
			c.mu.Unlock()
			if tx != nil && tx.reserve.waiting.Load() == 1 {
				return true
			}
		}
		return false
	})
	gate <- struct{}{}
	gate <- struct{}{}
	if r := hog.readReply(func(uint64) int { return 4 << 20 }); r.errno != 0 || r.cookie != 1 {
		t.Fatalf("hog's reply: cookie %d errno %d", r.cookie, r.errno)
	}
	got := map[uint64]bool{}
	for i := 0; i < 2; i++ {
		r := good.readReply(func(c uint64) int { return map[uint64]int{10: 1 << 20, 11: 4096}[c] })
		if r.errno != 0 {
			t.Fatalf("reply %d: errno %d", r.cookie, r.errno)
		}
		got[r.cookie] = true
	}
	if !got[10] || !got[11] {
		t.Fatalf("replies %v", got)
	}
}

// hostile sends n READs of length bytes and never reads a reply.
func hostile(t *testing.T, sock string, n int, length uint32) net.Conn {
	t.Helper()
	c := dialRaw(t, "unix", sock)
	c.start("", false)
	var b []byte
	for i := 0; i < n; i++ {
		b = binary.BigEndian.AppendUint32(b, magicRequest)
		b = binary.BigEndian.AppendUint16(b, 0)
		b = binary.BigEndian.AppendUint16(b, cmdRead)
		b = binary.BigEndian.AppendUint64(b, uint64(i))
		b = binary.BigEndian.AppendUint64(b, uint64(i%4)*uint64(length))
		b = binary.BigEndian.AppendUint32(b, length)
	}
	c.write(b)
	c.nc.SetDeadline(time.Time{})
	return c.nc
}

// Clients that pipeline large reads and never take the replies hold no
// more than the shared budget (small requests beyond it use their
// connection's reserve); they are dropped after the idle timeout,
// as are clients that do nothing, while a well-behaved client is served
// correctly all along.
func TestHostileClientsBudgetAndIdle(t *testing.T) {
	const budgetBytes = 16 << 20
	log, logBuf := bufLogger()
	m := newMem(t, 64<<20, 512, 4096, 1<<20)
	s, sock := startUnix(t, Config{Exports: []Export{{Backend: m}}, MaxBytes: budgetBytes,
		IdleTimeout: 300 * time.Millisecond, Logger: log})

	var maxSeen atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n := s.cfg.Limits.InFlightBytes(); n > maxSeen.Load() {
				maxSeen.Store(n)
			}
			select {
			case <-stop:
				return
			default:
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()

	idle := []*rawClient{dialRaw(t, "unix", sock), dialRaw(t, "unix", sock)}
	for _, c := range idle {
		c.start("", false)
	}
	var bad []net.Conn
	for i := 0; i < 3; i++ {
		bad = append(bad, hostile(t, sock, 64, 4<<20))
	}
	good := dialRaw(t, "unix", sock)
	good.start("", true)
	for i := 0; i < 20; i++ {
		p := pattern(1<<20, byte(i))
		off := uint64(i%16) << 20
		if r := good.do(0, cmdWrite, off, 1<<20, p); r.errno != 0 {
			t.Fatalf("write %d: errno %d", i, r.errno)
		}
		r := good.do(0, cmdRead, off, 1<<20, nil)
		if r.errno != 0 {
			t.Fatalf("read %d: errno %d", i, r.errno)
		}
		mustEqual(t, "read back", r.data, p)
	}
	waitFor(t, "the hostile clients to be dropped", func() bool {
		return strings.Count(logBuf.String(), "reason=\"a reply write blocked\"") >= 3
	})
	for _, c := range idle {
		c.expectClosed()
	}
	// (the good client, idle once done, may be dropped too)
	if n := strings.Count(logBuf.String(), "reason=\"no request and no reply\""); n < 2 {
		t.Errorf("%d idle drops logged, want at least 2:\n%s", n, logBuf.String())
	}
	for i, nc := range bad {
		nc.SetDeadline(time.Now().Add(clientTimeout))
		if _, err := io.Copy(io.Discard, nc); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Errorf("hostile client %d: connection still open", i)
			}
		}
	}
	close(stop)
	<-sampled
	// (the good client's requests beyond it are on its own reserve)
	if got := maxSeen.Load(); got > budgetBytes || got == 0 {
		t.Errorf("shared in-flight bytes peaked at %d, budget %d", got, budgetBytes)
	}
	waitFor(t, "the budget to be returned", func() bool { return s.cfg.Limits.InFlightBytes() == 0 })
}

// Connections over the limit are closed at once, with a log line; a slot
// that frees up is used again.
func TestConnectionLimit(t *testing.T) {
	log, logBuf := bufLogger()
	m := newMem(t, 1<<20, 512, 4096, 1<<20)
	s, sock := startUnix(t, Config{Exports: []Export{{Backend: m}}, MaxConns: 4, Logger: log})
	var open []*rawClient
	for i := 0; i < 4; i++ {
		c := dialRaw(t, "unix", sock)
		c.hello()
		open = append(open, c)
	}
	for i := 0; i < 20; i++ {
		c := dialRaw(t, "unix", sock)
		c.expectClosed()
	}
	if !strings.Contains(logBuf.String(), "nbd: connection limit reached: connection refused") ||
		!strings.Contains(logBuf.String(), "limit=4") {
		t.Errorf("log:\n%s", logBuf.String())
	}
	if n := s.cfg.Limits.Conns(); n != 4 {
		t.Errorf("%d connections counted, want 4", n)
	}
	open[0].nc.Close()
	waitFor(t, "the closed connection to be uncounted", func() bool { return s.cfg.Limits.Conns() == 3 })
	c := dialRaw(t, "unix", sock)
	c.start("", false)
	if r := c.do(0, cmdRead, 0, 4096, nil); r.errno != 0 {
		t.Fatalf("read on the freed slot: errno %d", r.errno)
	}
}

// A failed TLS handshake is logged at the default (warning) level with
// the client's address and the reason.
func TestTLSHandshakeFailureLogged(t *testing.T) {
	p := newPKI(t)
	log, logBuf := bufLogger()
	m := newMem(t, 1<<20, 512, 4096, 1<<20)
	s, err := NewServer(Config{Exports: []Export{{Backend: m}}, TLS: p.serverConfig(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c := dialRaw(t, "tcp", l.Addr().String())
	c.hello()
	c.clientFlags(clientFixedNewstyle | clientNoZeroes)
	c.expectOpt(optStartTLS, nil, repAck)
	c.write([]byte("this is not a TLS client hello, not at all\r\n\r\n"))
	c.expectClosed()
	local := c.nc.LocalAddr().String()
	waitFor(t, "the log line", func() bool { return strings.Contains(logBuf.String(), "TLS handshake failed") })
	line := logBuf.String()
	if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "remote="+local) || !strings.Contains(line, "err=") {
		t.Errorf("log line lacks level, remote %s or reason:\n%s", local, line)
	}
}
