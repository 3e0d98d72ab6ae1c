package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"mdtool/internal/nbdclient"
	"mdtool/internal/testkit/nbdkit"
)

// nbdMembers copies each memory member into an image file, serves it with
// its own nbdkit (file plugin, extra args before the plugin), and opens it
// as an NBD member.
func nbdMembers(t *testing.T, mems []*MemDevice, timeout time.Duration, extra ...[]string) ([]Device, []*nbdkit.Server) {
	t.Helper()
	dir := t.TempDir()
	var devs []Device
	var srvs []*nbdkit.Server
	for i, m := range mems {
		b := make([]byte, m.Geometry().Size)
		if _, err := m.ReadAt(b, 0); err != nil {
			t.Fatal(err)
		}
		img := filepath.Join(dir, "m"+string(rune('0'+i))+".img")
		if err := os.WriteFile(img, b, 0o600); err != nil {
			t.Fatal(err)
		}
		// Options (filters) go before the plugin, parameters after it.
		var opts, params []string
		if i < len(extra) {
			for _, a := range extra[i] {
				if len(a) > 2 && a[:2] == "--" {
					opts = append(opts, a)
				} else {
					params = append(params, a)
				}
			}
		}
		args := append(append(opts, "file", img), params...)
		s := nbdkit.Start(t, args...)
		d, err := OpenNBD(context.Background(), s.URI("nbd+unix"), nbdclient.Options{Conns: 2, Timeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		devs = append(devs, d)
		srvs = append(srvs, s)
	}
	return devs, srvs
}

// A raid1 whose members are on two NBD servers: when one server goes away
// the array fails that member (md's semantics) and goes on serving from the
// other, with no error and the data intact.
func TestNBDMembersServerLoss(t *testing.T) {
	s := spec{level: "raid1", n: 2, devMiB: []int{16}, bitmap: true}
	mems := create(t, s)
	devs, srvs := nbdMembers(t, mems, 30*time.Second)
	a, err := Open(devs, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	m := newModel(a.Size())
	checkContent(t, a, m)
	workload(t, a, m, 1, 40)
	srvs[1].Stop()
	workload(t, a, m, 2, 40)
	checkContent(t, a, m)
	if a.Degraded() != 1 {
		t.Fatalf("degraded = %d after a member's server went away", a.Degraded())
	}
	if st := a.Members()[1].State; st != Faulty {
		t.Fatalf("member 1 state %v, want Faulty", st)
	}
	if !devs[1].(*NBDDevice).Failed() || devs[0].(*NBDDevice).Failed() {
		t.Fatal("Failed() does not name the lost member")
	}
}

// A server that stops answering (nbdkit's delay filter holds every write
// for an hour) is failed after the client's timeout: the write returns
// without error once the member is failed, long before the server answers.
func TestNBDMembersStalledServer(t *testing.T) {
	s := spec{level: "raid1", n: 2, devMiB: []int{16}}
	mems := create(t, s)
	devs, _ := nbdMembers(t, mems, 5*time.Second, nil, []string{"--filter=delay", "wdelay=3600"})
	a, err := Open(devs, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	m := newModel(a.Size())
	done := make(chan error, 1)
	go func() {
		p := make([]byte, 64<<10)
		fillPattern(newRand(3), p)
		_, err := a.WriteAt(p, 1<<20)
		m.write(p, 1<<20)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("write with a stalled member: %v", err)
		}
	case <-time.After(10 * time.Minute):
		t.Fatal("the write waited for the stalled server")
	}
	if st := a.Members()[1].State; st != Faulty {
		t.Fatalf("member 1 state %v, want Faulty", st)
	}
	if err := devs[1].(*NBDDevice).Client().Err(); !errors.Is(err, nbdclient.ErrTimeout) {
		t.Fatalf("client error %v, want ErrTimeout", err)
	}
	checkContent(t, a, m)
}
