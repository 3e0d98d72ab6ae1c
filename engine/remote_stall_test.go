package engine

import (
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
// that a healthy member on this loaded machine never fails (the members'
// deadline is MemberDeadline(stallTimeout), 13 s).
const stallTimeout = 15 * time.Second

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
		// As the daemon opens it: the member's deadline leaves the
		// remote timeout's allowance (remote_bound.go).
		d, err := OpenMember(uri, FileOptions{RemoteTimeout: stallTimeout})
		if err != nil {
			t.Fatal(err)
		}
		sm.dev = d.(*NBDDevice)
		out = append(out, sm)
	}
	return out
}

// loseErr makes the member's host go away: its server killed, its link
// cut, or its server paused.
func (sm *stallMember) loseErr(how string) error {
	switch how {
	case "kill":
		sm.srv.Stop()
	case "link":
		return sm.host.SetLink(false)
	case "pause":
		c, err := net.Dial("unix", sm.ctl)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte{'p'})
		return err
	}
	return nil
}

// TestRemoteStallBound: while writers and readers keep the array busy, a
// member's server is killed, its link cut, or it stops answering (pause
// filter); raid6 loses two at the same moment. No user request may take
// longer than the remote timeout (the members' deadline leaves
// RemoteAllowance of it for the probe and the failure record), the lost
// members are faulty within the timeout of their loss, and no request
// fails. The test logs where the time went: when the members' clients gave
// up and when the array marked them faulty, relative to the loss.
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

// stallRun drives the array with 16 workers (4 KiB writes, each read back;
// each request timed)
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
				// Each request is timed on its own.
				timed := func(op func() error) error {
					t0 := time.Now()
					err := op()
					d := time.Since(t0)
					for old := maxLat.Load(); int64(d) > old && !maxLat.CompareAndSwap(old, int64(d)); old = maxLat.Load() {
					}
					return err
				}
				err := timed(func() error { _, err := a.WriteAt(p, off); return err })
				if err == nil {
					err = timed(func() error { _, err := a.ReadAt(q, off); return err })
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
	t0, gap, lostBy := loseAtOnce(t, sms, lost, how)
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
			faulty = faulty && a.Members()[i].State == Faulty
		}
		for _, i := range lost {
			// Err, not Failed: a member the array failed may have
			// been closed since. Read after the states: a member
			// faulty above has a failed client here.
			all = all && sms[i].dev.Client().Err() != nil
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
	t.Logf("%s: clients failed %v after the loss, marked faulty at %v; longest request %v (timeout %v, member deadline %v, gap between the losses %v, all lost %v after the first began)",
		how, gaveUp.Round(time.Millisecond), recorded.Round(time.Millisecond), longest.Round(time.Millisecond),
		stallTimeout, MemberDeadline(stallTimeout), gap, lostBy.Round(time.Millisecond))
	if ioErr != nil {
		t.Fatalf("a user request failed: %v", ioErr)
	}
	// The request that waits for both of two lost members can be held
	// until the second one's deadline: the bound adds the gap between
	// the two losses (~0: they are lost at the same moment).
	if longest > stallTimeout+gap {
		t.Errorf("a request took %v: more than the %v remote timeout + %v between the losses", longest, stallTimeout, gap)
	}
	// Each member is faulty within the timeout of its loss, which
	// happened at the latest lostBy after t0.
	if recorded > lostBy+stallTimeout {
		t.Errorf("members %v faulty %v after the loss began (all lost within %v): later than the %v remote timeout",
			lost, recorded, lostBy, stallTimeout)
	}
}

// loseAtOnce loses the members lost, each in its own goroutine, released
// together. It returns when the first loss began (t0), the gap between the
// losses — at most the time from the first one's start to the last one's
// end (0 for one member) — and how long after t0 the last one had
// happened.
func loseAtOnce(t *testing.T, sms []*stallMember, lost []int, how string) (t0 time.Time, gap, lostBy time.Duration) {
	t.Helper()
	var (
		wg         sync.WaitGroup
		mu         sync.Mutex
		start, end []time.Time
		errs       []string
	)
	release := make(chan struct{})
	for _, i := range lost {
		wg.Add(1)
		go func(sm *stallMember) {
			defer wg.Done()
			<-release
			s := time.Now()
			err := sm.loseErr(how)
			e := time.Now()
			mu.Lock()
			defer mu.Unlock()
			start, end = append(start, s), append(end, e)
			if err != nil {
				errs = append(errs, err.Error())
			}
		}(sms[i])
	}
	close(release)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("losing members %v: %v", lost, errs)
	}
	t0 = start[0]
	last := end[0]
	for i := range start {
		t0 = minTime(t0, start[i])
		if end[i].After(last) {
			last = end[i]
		}
	}
	if len(lost) > 1 {
		gap = last.Sub(t0)
	}
	return t0, gap, last.Sub(t0)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// The member deadline leaves the remote timeout its allowance: a quarter,
// at most 2 s, always more than the client's probe interval (the probe of
// an idle server must fit in it, with room for the failure record).
func TestMemberDeadline(t *testing.T) {
	for _, c := range []struct{ timeout, want time.Duration }{
		{15 * time.Second, 13 * time.Second},
		{0, nbdclient.DefaultTimeout - 2*time.Second},
		{8 * time.Second, 6 * time.Second},
		{4 * time.Second, 3 * time.Second},
		{time.Second, 750 * time.Millisecond},
		{-1, -1},
	} {
		if got := MemberDeadline(c.timeout); got != c.want {
			t.Errorf("MemberDeadline(%v) = %v, want %v", c.timeout, got, c.want)
		}
	}
	for tm := 100 * time.Millisecond; tm <= 10*time.Minute; tm += tm / 3 {
		a, d := RemoteAllowance(tm), MemberDeadline(tm)
		if a+d != tm || d < tm*3/4 || a <= nbdclient.ProbeInterval(d) {
			t.Errorf("timeout %v: allowance %v, deadline %v, probe interval %v", tm, a, d, nbdclient.ProbeInterval(d))
		}
	}
}
