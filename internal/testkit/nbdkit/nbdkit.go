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
	Socket string // unix socket, or "" for TCP
	Host   *Host  // the network namespace of a TCP server
	Port   int
	args   []string
	pid    string
	cmd    *exec.Cmd
	done   chan struct{}
	stderr bytes.Buffer
}

// URI is the server's URI with the given scheme: "nbd+unix" or
// "nbds+unix" for a unix socket, "nbd" or "nbds" for TCP.
func (s *Server) URI(scheme string) string {
	if s.Host != nil {
		return fmt.Sprintf("%s://%s:%d/", scheme, s.Host.IP, s.Port)
	}
	return fmt.Sprintf("%s:///?socket=%s", scheme, s.Socket)
}

// Stop kills the server (SIGKILL: a host that goes away) and waits for it.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
}

// Start runs nbdkit with args (plugin, filters, parameters) on a new unix
// socket; it returns once the server accepts connections. The server is
// killed at the end of the test.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	dir := t.TempDir()
	s := &Server{Socket: filepath.Join(dir, "s"), pid: filepath.Join(dir, "pid"), args: args}
	s.start(t)
	t.Cleanup(s.Stop)
	return s
}

// StartIn runs nbdkit in h's network namespace, on h's address and port.
func StartIn(t testing.TB, h *Host, port int, args ...string) *Server {
	t.Helper()
	s := &Server{Host: h, Port: port, pid: filepath.Join(t.TempDir(), "pid"), args: args}
	s.start(t)
	t.Cleanup(s.Stop)
	return s
}

// Restart starts a stopped server again with the same arguments (a host
// that comes back).
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	if s.Socket != "" {
		os.Remove(s.Socket)
	}
	s.start(t)
}

func (s *Server) start(t testing.TB) {
	t.Helper()
	bin := Require(t)
	os.Remove(s.pid)
	s.done = make(chan struct{})
	s.stderr.Reset()
	full := []string{"--foreground", "--exit-with-parent", "-P", s.pid}
	if s.Host != nil {
		full = append(full, "-i", s.Host.IP, "-p", fmt.Sprint(s.Port))
	} else {
		full = append(full, "-U", s.Socket)
	}
	full = append(full, s.args...)
	if s.Host != nil {
		s.cmd = exec.Command("ip", append([]string{"netns", "exec", s.Host.NS, bin}, full...)...)
	} else {
		s.cmd = exec.Command(bin, full...)
	}
	s.cmd.Stderr = &s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func(c *exec.Cmd, done chan struct{}) { c.Wait(); close(done) }(s.cmd, s.done)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(s.pid); err == nil {
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
}
