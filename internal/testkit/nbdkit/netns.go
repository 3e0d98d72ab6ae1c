package nbdkit

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
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
	n := hostSeq.Add(1)
	tag := fmt.Sprintf("%d%d", os.Getpid()%10000, n)
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
