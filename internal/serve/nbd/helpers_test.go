package nbd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"mdtool/internal/serve/export"
)

// requireBin fails the test when a client binary is missing in CI (where
// `make test` installs it) and skips it elsewhere.
func requireBin(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s not installed (CI is set): %v", n, err)
			}
			t.Skipf("%s not installed: %v", n, err)
		}
	}
}

func newMem(t testing.TB, size int64, min, pref, max uint32) *export.Mem {
	t.Helper()
	m, err := export.NewMem(size, min, pref, max)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// startUnix starts a Server for cfg on a unix socket in a temporary
// directory and closes it at cleanup.
func startUnix(t testing.TB, cfg Config) (*Server, string) {
	t.Helper()
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "nbd.sock")
	if _, err := s.ListenUnix(sock); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, sock
}

// recBackend wraps a Backend, records the calls that reach it and can fail
// or hold reads.
type recBackend struct {
	export.Backend
	mu    sync.Mutex
	calls []string

	failFrom int64           // reads reaching this offset fail with EIO after the bytes before it (if > 0)
	onRead   func(off int64) // called before each read
	onWrite  func(off int64) // called before each write
}

func (b *recBackend) rec(format string, args ...any) {
	b.mu.Lock()
	b.calls = append(b.calls, fmt.Sprintf(format, args...))
	b.mu.Unlock()
}

// Calls returns and resets the recorded calls.
func (b *recBackend) Calls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.calls
	b.calls = nil
	return c
}

func (b *recBackend) ReadAt(p []byte, off int64) (int, error) {
	if b.onRead != nil {
		b.onRead(off)
	}
	b.rec("read %d %d", off, len(p))
	if b.failFrom > 0 && off+int64(len(p)) > b.failFrom {
		n := max(0, b.failFrom-off)
		b.Backend.ReadAt(p[:n], off)
		return int(n), syscall.EIO
	}
	return b.Backend.ReadAt(p, off)
}

func (b *recBackend) WriteAt(p []byte, off int64) (int, error) {
	if b.onWrite != nil {
		b.onWrite(off)
	}
	b.rec("write %d %d", off, len(p))
	return b.Backend.WriteAt(p, off)
}

func (b *recBackend) WriteAtFUA(p []byte, off int64) (int, error) {
	if b.onWrite != nil {
		b.onWrite(off)
	}
	b.rec("writefua %d %d", off, len(p))
	return b.Backend.WriteAtFUA(p, off)
}

func (b *recBackend) Flush() error {
	b.rec("flush")
	return b.Backend.Flush()
}

func (b *recBackend) Discard(off, n int64) error {
	b.rec("discard %d %d", off, n)
	return b.Backend.Discard(off, n)
}

func (b *recBackend) WriteZeroes(off, n int64, mayTrim bool) error {
	b.rec("zeroes %d %d trim=%v", off, n, mayTrim)
	return b.Backend.WriteZeroes(off, n, mayTrim)
}

// snapshot returns the whole content of a Backend.
func snapshot(t testing.TB, b export.Backend) []byte {
	t.Helper()
	p := make([]byte, b.Size())
	if _, err := b.ReadAt(p, 0); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitGoroutines waits until the number of goroutines drops to at most n.
func waitGoroutines(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
