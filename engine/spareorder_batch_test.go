package engine

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// gatedDevice blocks its writes while armed, telling entered about the
// first one.
type gatedDevice struct {
	Device
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func (g *gatedDevice) arm() {
	g.mu.Lock()
	g.armed = true
	g.entered = make(chan struct{})
	g.release = make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedDevice) WriteAt(p []byte, off int64) (int, error) {
	g.mu.Lock()
	armed, entered, release := g.armed, g.entered, g.release
	g.armed = false
	g.mu.Unlock()
	if armed {
		close(entered)
		<-release
	}
	return g.Device.WriteAt(p, off)
}

// waitingInSuspend reports whether some goroutine waits for the array in
// assignSpares (md's remove_and_add_spares, called before the batch began).
func waitingInSuspend() bool {
	buf := make([]byte, 1<<20)
	s := string(buf[:runtime.Stack(buf, true)])
	for _, g := range strings.Split(s, "\n\n") {
		if strings.Contains(g, "(*Array).suspend") && strings.Contains(g, "(*Array).assignSpares") {
			return true
		}
	}
	return false
}

// TestDeferredAddHoldsSpares: the first add of a batch (mdadm --add D4 D3)
// must not be given a role by a spare assignment that begins while the add
// writes the superblocks (the spare is visible then): md sees the batch
// together and the device added last takes the lowest free role.
// On the code before the fix, the assignment started in that window took
// the first device alone.
func TestDeferredAddHoldsSpares(t *testing.T) {
	s := spec{level: "raid1", n: 3, devMiB: []int{4}}
	mems := createChunk(t, s, 0)
	g := &gatedDevice{Device: mems[0].Reopen()}
	a, err := Open([]Device{g}, recoverOptions()) // roles 1 and 2 missing
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	d4, d3 := NewMemDevice(s.devSize(0)), NewMemDevice(s.devSize(0))
	g.arm() // the add's superblock update blocks on member 0
	type res struct {
		idx int
		err error
	}
	added := make(chan res, 1)
	go func() {
		idx, err := a.AddDevice(d4.Reopen(), AddOptions{Replacement: -1, DeferRecovery: true})
		added <- res{idx, err}
	}()
	select {
	case <-g.entered:
	case <-time.After(2 * time.Minute):
		t.Fatal("the add never wrote the superblocks")
	}
	// md_check_recovery while the add is under way.
	checked := make(chan struct{})
	go func() {
		a.checkRecovery()
		close(checked)
	}()
	deadline := time.Now().Add(2 * time.Minute)
wait:
	for {
		select {
		case <-checked:
			break wait
		default:
		}
		if waitingInSuspend() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("checkRecovery neither returned nor waited for the array")
		}
		time.Sleep(time.Millisecond)
	}
	close(g.release)
	r := <-added
	if r.err != nil {
		t.Fatal(r.err)
	}
	select {
	case <-checked:
	case <-time.After(2 * time.Minute):
		t.Fatal("checkRecovery never returned")
	}
	waitSync(t, a)
	if role := roleOf(a, r.idx); role != -1 {
		t.Fatalf("the first device of the batch took role %d alone", role)
	}
	i3, err := a.AddDevice(d3.Reopen(), AddOptions{Replacement: -1})
	if err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(2 * time.Minute)
	for roleOf(a, i3) < 0 || a.SyncStatus().Action != ActionIdle {
		if time.Now().After(deadline) {
			t.Fatalf("no recovery after the batch: %+v", a.Members())
		}
		time.Sleep(5 * time.Millisecond)
	}
	waitSync(t, a)
	if r3, r4 := roleOf(a, i3), roleOf(a, r.idx); r3 != 1 || r4 != 2 {
		t.Errorf("roles after the batch: added last %d (want 1), added first %d (want 2)", r3, r4)
	}
}

// roleOf is the role of device index i (-1: none; -2: not a member).
func roleOf(a *Array, i int) int {
	for _, mi := range a.Members() {
		if mi.Device == i {
			return mi.Role
		}
	}
	return -2
}
