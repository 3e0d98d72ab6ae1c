// Package nbdkit runs nbdkit servers for tests: a member on "another
// machine" is an nbdkit export on a unix socket (or in a network namespace).
package nbdkit

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Require returns nbdkit's path; it fails the test under CI (which
// installs nbdkit) and skips it elsewhere.
func Require(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("nbdkit")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("nbdkit is missing: %v", err)
		}
		t.Skip("nbdkit not installed")
	}
	return p
}

// Server is a running nbdkit.
type Server struct {
	Socket string
	cmd    *exec.Cmd
	done   chan struct{}
	stderr bytes.Buffer
}

// URI is the server's URI with the given scheme ("nbd+unix" or
// "nbds+unix").
func (s *Server) URI(scheme string) string {
	return fmt.Sprintf("%s:///?socket=%s", scheme, s.Socket)
}

// Stop kills the server (SIGKILL: a host that goes away) and waits for it.
func (s *Server) Stop() {
	s.cmd.Process.Kill()
	<-s.done
}

// Start runs nbdkit with args (plugin, filters, parameters) on a new unix
// socket; it returns once the server accepts connections. The server is
// killed at the end of the test.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	bin := Require(t)
	dir := t.TempDir()
	s := &Server{Socket: filepath.Join(dir, "s"), done: make(chan struct{})}
	pid := filepath.Join(dir, "pid")
	full := append([]string{"--foreground", "--exit-with-parent", "-U", s.Socket, "-P", pid}, args...)
	s.cmd = exec.Command(bin, full...)
	s.cmd.Stderr = &s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(pid); err == nil {
			break
		}
		select {
		case <-s.done:
			t.Fatalf("nbdkit %v exited: %s", full, s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nbdkit did not start: %s", s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(s.Stop)
	return s
}
