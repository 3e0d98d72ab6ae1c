package nbd

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"mdtool/engine/export"
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
