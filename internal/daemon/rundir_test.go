package daemon

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRunFilesNoFollow: NAME.lock, NAME.log and the sockets are never
// followed through a symbolic link (nor opened when they are a FIFO), and
// the file a link points at is left as it was.
func TestRunFilesNoFollow(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if err := EnsureDir(dir); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "victim")
	orig := []byte("precious contents\n")
	if err := os.WriteFile(target, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		b, err := os.ReadFile(target)
		if err != nil || !bytes.Equal(b, orig) {
			t.Fatalf("link target changed: %q, %v", b, err)
		}
	}

	p := PathsFor(dir, "lk")
	if err := os.Symlink(target, p.Lock()); err != nil {
		t.Fatal(err)
	}
	_, err := AcquireLock(p)
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("AcquireLock with a symlinked lock: err = %v, want a symbolic link refusal", err)
	}
	if Held(p) {
		t.Error("Held through a symlinked lock")
	}
	check()

	p = PathsFor(dir, "lg")
	if err := os.Symlink(target, p.Log()); err != nil {
		t.Fatal(err)
	}
	if l, err := AcquireLock(p); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		l.Release()
		t.Errorf("AcquireLock with a symlinked log: err = %v, want a symbolic link refusal", err)
	}
	if f, err := openRunFile(p.Log(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err == nil {
		f.Close()
		t.Error("openRunFile followed the symlinked log")
	}
	check()
	// A dangling link is not followed either (no file is created).
	dangling := filepath.Join(t.TempDir(), "created")
	p = PathsFor(dir, "dg")
	if err := os.Symlink(dangling, p.Log()); err != nil {
		t.Fatal(err)
	}
	if l, err := AcquireLock(p); err == nil {
		l.Release()
		t.Error("AcquireLock with a dangling symlinked log succeeded")
	}
	if f, err := openRunFile(p.Log(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err == nil {
		f.Close()
		t.Error("openRunFile followed a dangling symlink")
	}
	if _, err := os.Lstat(dangling); !os.IsNotExist(err) {
		t.Errorf("dangling link target created: %v", err)
	}

	p = PathsFor(dir, "ff")
	if err := syscall.Mkfifo(p.Lock(), 0o600); err != nil {
		t.Fatal(err)
	}
	if l, err := AcquireLock(p); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		l.Release()
		t.Errorf("AcquireLock with a FIFO lock: err = %v, want 'not a regular file'", err)
	}

	p = PathsFor(dir, "sk")
	if err := os.Symlink(target, p.Control()); err != nil {
		t.Fatal(err)
	}
	if l, err := ListenUnix(p.Control()); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		if l != nil {
			l.Close()
		}
		t.Errorf("ListenUnix over a symlink: err = %v, want a symbolic link refusal", err)
	}
	check()

	// Regular files are used as before.
	p = PathsFor(dir, "ok")
	l, err := AcquireLock(p)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	f, err := openRunFile(p.Log(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}
