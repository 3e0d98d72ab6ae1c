package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mdtool/internal/nbdclient"
	"mdtool/internal/testkit/nbdkit"
)

// stallTimeout is the remote timeout of TestRemoteStallBound: generous, so
// that a healthy member on this loaded machine never fails.
const stallTimeout = 15 * time.Second

// stallAllowance is what the design adds to the timeout before a request
// that met a lost member completes: a member that was idle when its
// server went away is noticed by the client's probe, up to
// nbdclient.ProbeInterval later (a request can wait for two lost members
// in turn); then the survivors' superblock update records the failure
// (md holds the request until it is durable), and the request is served.
// The probe interval plus half a second; not a measurement.
var stallAllowance = nbdclient.ProbeInterval(stallTimeout) + 500*time.Millisecond

// stallMember is a member on an nbdkit server with the pause filter: on a
// unix socket, or (link) in a network namespace over TCP.
type stallMember struct {
	srv  *nbdkit.Server
	host *nbdkit.Host
	ctl  string
	dev  *NBDDevice
}

func stallMembers(t *testing.T, mems []*MemDevice, tcp map[int]bool) []*stallMember {
	t.Helper()
	dir := t.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		// Images in memory: a healthy member's flush (the superblock
		// update that records a failure) costs no disk writeback.
		d, err := os.MkdirTemp("/dev/shm", "mdtool-stall")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}
	var out []*stallMember
	for i, m := range mems {
		b := make([]byte, m.Geometry().Size)
		if _, err := m.ReadAt(b, 0); err != nil {
			t.Fatal(err)
		}
		img := filepath.Join(dir, fmt.Sprintf("m%d.img", i))
		if err := os.WriteFile(img, b, 0o600); err != nil {
			t.Fatal(err)
		}
		sm := &stallMember{ctl: filepath.Join(t.TempDir(), "ctl")}
		args := []string{"--filter=pause", "file", img, "pause-control=" + sm.ctl}
		uri := ""
		if tcp[i] {
			sm.host = nbdkit.NewHost(t)
			sm.srv = nbdkit.StartIn(t, sm.host, 10809, args...)
			uri = sm.srv.URI("nbd")
		} else {
			sm.srv = nbdkit.Start(t, args...)
			uri = sm.srv.URI("nbd+unix")
		}
		d, err := OpenNBD(context.Background(), uri, nbdclient.Options{Conns: RemoteConns, Timeout: stallTimeout})
		if err != nil {
			t.Fatal(err)
		}
		sm.dev = d
		out = append(out, sm)
	}
	return out
}

func (sm *stallMember) lose(t *testing.T, how string) {
	t.Helper()
	switch how {
	case "kill":
		sm.srv.Stop()
	case "link":
		sm.host.LinkDown(t)
	case "pause":
		c, err := net.Dial("unix", sm.ctl)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte{'p'}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRemoteStallBound: while writers and readers keep the array busy, a
// member's server is killed, its link cut, or it stops answering (pause
// filter). No user request may take longer than the remote timeout plus
// stallAllowance, and none fails. The test logs where the time went: when
// the member's client gave up and when the array marked it faulty,
// relative to the loss.
func TestRemoteStallBound(t *testing.T) {
	nbdkit.Require(t)
	type lossCase struct {
		level string
		n     int
		lost  []int
		how   string
	}
	var cases []lossCase
	for _, how := range []string{"kill", "link", "pause"} {
		cases = append(cases, lossCase{"raid1", 2, []int{1}, how}, lossCase{"raid6", 6, []int{1, 4}, how})
	}
	for _, c := range cases {
		t.Run(c.level+"-"+c.how, func(t *testing.T) {
			t.Parallel()
			s := spec{level: c.level, n: c.n, devMiB: []int{16}, bitmap: true}
			if c.level == "raid6" {
				s.chunkKiB = 64
			}
			tcp := map[int]bool{}
			if c.how == "link" {
				for _, i := range c.lost {
					tcp[i] = true
				}
			}
			sms := stallMembers(t, create(t, s), tcp)
			var devs []Device
			for _, sm := range sms {
				devs = append(devs, sm.dev)
			}
			a, err := Open(devs, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			stallRun(t, a, sms, c.lost, c.how)
		})
	}
}

// stallRun drives the array with 16 workers (4 KiB writes, each read back)
// and loses the members lost once they run; it returns when they are
// faulty and the workers have gone on a while.
func stallRun(t *testing.T, a *Array, sms []*stallMember, lost []int, how string) {
	var (
		stop    atomic.Bool
		maxLat  atomic.Int64
		ops     atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		ioErr   error
	)
	blocks := a.Size() / 4096
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			p, q := make([]byte, 4096), make([]byte, 4096)
			for !stop.Load() {
				off := r.Int64N(blocks) * 4096
				for i := range p {
					p[i] = byte(r.Uint32())
				}
				t0 := time.Now()
				_, err := a.WriteAt(p, off)
				if err == nil {
					_, err = a.ReadAt(q, off)
				}
				d := time.Since(t0)
				for old := maxLat.Load(); int64(d) > old && !maxLat.CompareAndSwap(old, int64(d)); old = maxLat.Load() {
				}
				ops.Add(1)
				if err != nil {
					errOnce.Do(func() { ioErr = err })
					return
				}
			}
		}(w)
	}
	for ops.Load() < 200 && !stop.Load() {
		time.Sleep(time.Millisecond)
	}
	t0 := time.Now()
	for _, i := range lost {
		sms[i].lose(t, how)
	}
	// Hosts lost one after the other can hold a request for the first
	// one's timeout and then the second one's: the bound adds how long
	// the losses took.
	var spread time.Duration
	if len(lost) > 1 {
		spread = time.Since(t0)
	}
	// Where the time goes: the client's failure, then md's.
	var gaveUp, recorded time.Duration
	deadline := t0.Add(5 * time.Minute)
	for recorded == 0 {
		if time.Now().After(deadline) {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("members %v not faulty after 5 minutes (I/O error: %v)", lost, ioErr)
		}
		all, faulty := true, true
		for _, i := range lost {
			all = all && sms[i].dev.Failed()
			faulty = faulty && a.Members()[i].State == Faulty
		}
		if all && gaveUp == 0 {
			gaveUp = time.Since(t0)
		}
		if faulty {
			recorded = time.Since(t0)
		}
		time.Sleep(time.Millisecond)
	}
	// Requests queued behind the failure complete; a little more traffic
	// on the degraded array.
	n := ops.Load()
	for ops.Load() < n+200 && time.Since(t0) < 5*time.Minute && ioErr == nil {
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	longest := time.Duration(maxLat.Load())
	t.Logf("%s: clients failed %v after the loss, marked faulty at %v; longest request %v (timeout %v, losses spread over %v)",
		how, gaveUp.Round(time.Millisecond), recorded.Round(time.Millisecond), longest.Round(time.Millisecond), stallTimeout, spread)
	if ioErr != nil {
		t.Fatalf("a user request failed: %v", ioErr)
	}
	if longest > stallTimeout+stallAllowance+spread {
		t.Errorf("a request took %v: more than the %v timeout + %v + %v", longest, stallTimeout, stallAllowance, spread)
	}
}
