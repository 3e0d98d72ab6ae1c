//go:build linux

package ioctl

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openBounded runs OpenMember in a goroutine and fails the test if it has
// not returned after a generous timeout (a FIFO would block open()).
func openBounded(t *testing.T, path string, o OpenOptions) (*os.File, error) {
	t.Helper()
	type res struct {
		f   *os.File
		err error
	}
	ch := make(chan res, 1)
	go func() {
		f, err := OpenMember(path, o)
		ch <- res{f, err}
	}()
	select {
	case r := <-ch:
		return r.f, r.err
	case <-time.After(60 * time.Second):
		t.Fatalf("OpenMember(%s, %+v) still blocked after 60 s", path, o)
		return nil, nil
	}
}

func TestOpenMemberRefusesNonMembers(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	link := filepath.Join(dir, "fifolink")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, link, sock, dir, "/dev/null"} {
		for _, o := range []OpenOptions{{}, {Write: true}, {Write: true, Exclusive: true}, {Exclusive: true}} {
			f, err := openBounded(t, p, o)
			if err == nil {
				f.Close()
				t.Errorf("OpenMember(%s, %+v) succeeded, want an error", p, o)
				continue
			}
			var ne *NotMemberError
			if !errors.As(err, &ne) || !errors.Is(err, ErrNotMember) {
				t.Errorf("OpenMember(%s, %+v) err = %v, want *NotMemberError", p, o, err)
			}
			if want := p + " is not a block device or regular file"; err.Error() != want {
				t.Errorf("OpenMember(%s) err = %q, want %q", p, err, want)
			}
		}
	}
	if _, err := OpenMember(filepath.Join(dir, "missing"), OpenOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing path: err = %v, want ErrNotExist", err)
	}
}

func TestOpenMemberFileLock(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "img")
	if err := os.WriteFile(p, make([]byte, 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard")
	if err := os.Link(p, hard); err != nil {
		t.Fatal(err)
	}
	sym := filepath.Join(dir, "sym")
	if err := os.Symlink(p, sym); err != nil {
		t.Fatal(err)
	}
	f, err := OpenMember(p, OpenOptions{Write: true, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	// Blocking mode again: the flag was cleared after the type check.
	fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err != nil || fl&unix.O_NONBLOCK != 0 {
		t.Errorf("F_GETFL = %#x, %v: O_NONBLOCK still set", fl, err)
	}
	for _, q := range []string{p, hard, sym} {
		for _, w := range []bool{false, true} {
			g, err := OpenMember(q, OpenOptions{Write: w, Exclusive: true})
			if err == nil {
				g.Close()
				t.Errorf("second exclusive open of %s (write %v) succeeded", q, w)
				continue
			}
			var be *BusyError
			if !errors.As(err, &be) || !errors.Is(err, ErrBusy) || !errors.Is(err, syscall.EBUSY) {
				t.Errorf("second exclusive open of %s: err = %v, want *BusyError", q, err)
			}
		}
		// Readers do not take the lock and are not refused.
		r, err := OpenMember(q, OpenOptions{})
		if err != nil {
			t.Errorf("read-only open of locked %s: %v", q, err)
		} else {
			r.Close()
		}
	}
	if _, err := f.WriteAt([]byte("x"), 0); err != nil {
		t.Errorf("write through the exclusive open: %v", err)
	}
	f.Close()
	g, err := OpenMember(hard, OpenOptions{Write: true, Exclusive: true})
	if err != nil {
		t.Fatalf("exclusive open after the lock holder closed: %v", err)
	}
	g.Close()
}
