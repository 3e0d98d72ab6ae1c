package nbdkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// Host is "another machine": a network namespace joined to this one by a
// veth pair, with its own address. Link down on HostIf cuts it off.
type Host struct {
	NS     string // network namespace
	HostIf string // this side of the veth pair
	IP     string // the namespace's address
}

var hostSeq atomic.Int32

// NewHost makes a network namespace with a veth pair: 10.213.N.1 on this
// side, 10.213.N.2 inside. It is removed at the end of the test. It needs
// root and iproute2; under CI a failure fails the test, elsewhere it skips.
func NewHost(t testing.TB) *Host {
	t.Helper()
	tag := fmt.Sprintf("%d%d", os.Getpid()%10000, hostSeq.Add(1))
	// The subnet must be free machine-wide: test binaries of several
	// packages run at once, and two namespaces with one address send a
	// member's traffic to the other test's server.
	unlock := lockSubnets(t)
	defer unlock()
	n := freeSubnet(t)
	h := &Host{NS: "mdt" + tag, HostIf: "mdt" + tag + "a", IP: fmt.Sprintf("10.213.%d.2", n)}
	peer := "mdt" + tag + "b"
	steps := [][]string{
		{"netns", "add", h.NS},
		{"link", "add", h.HostIf, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", h.NS},
		{"addr", "add", fmt.Sprintf("10.213.%d.1/24", n), "dev", h.HostIf},
		{"link", "set", h.HostIf, "up"},
		{"netns", "exec", h.NS, "ip", "addr", "add", h.IP + "/24", "dev", peer},
		{"netns", "exec", h.NS, "ip", "link", "set", peer, "up"},
		{"netns", "exec", h.NS, "ip", "link", "set", "lo", "up"},
	}
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", h.HostIf).Run()
		exec.Command("ip", "netns", "del", h.NS).Run()
	})
	for i, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			msg := fmt.Sprintf("ip %s: %v: %s", strings.Join(s, " "), err, out)
			if i == 0 && os.Getenv("CI") == "" {
				t.Skip(msg)
			}
			t.Fatal(msg)
		}
	}
	return h
}

// LinkDown cuts the host off (its veth goes down); LinkUp joins it again.
func (h *Host) LinkDown(t testing.TB) { h.link(t, "down") }

// LinkUp: see LinkDown.
func (h *Host) LinkUp(t testing.TB) { h.link(t, "up") }

func (h *Host) link(t testing.TB, state string) {
	t.Helper()
	if out, err := exec.Command("ip", "link", "set", h.HostIf, state).CombinedOutput(); err != nil {
		t.Fatalf("ip link set %s %s: %v: %s", h.HostIf, state, err, out)
	}
}

// lockSubnets serialises choosing and configuring a subnet among the
// processes on this machine (an flock on a file in /run or the temp
// directory).
func lockSubnets(t testing.TB) func() {
	t.Helper()
	dir := "/run"
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = os.TempDir()
	}
	f, err := os.OpenFile(filepath.Join(dir, "mdtool-test-netns.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	return func() { f.Close() }
}

// freeSubnet is the first N in 1..254 whose 10.213.N.1 no interface has.
func freeSubnet(t testing.TB) int {
	t.Helper()
	out, err := exec.Command("ip", "-o", "-4", "addr", "show").CombinedOutput()
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("ip addr: %v: %s", err, out)
		}
		t.Fatalf("ip addr: %v: %s", err, out)
	}
	for n := 1; n < 255; n++ {
		if !strings.Contains(string(out), fmt.Sprintf(" 10.213.%d.1/", n)) {
			return n
		}
	}
	t.Fatal("no free 10.213.N.0/24 subnet")
	return 0
}
