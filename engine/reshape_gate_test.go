package engine

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// gateCases are reshapes in both directions: raid5 4->5 devices
// (forwards) and 5->4 (backwards, from the end).
var gateCases = []string{"raid5-4to5", "raid5-5to4"}

// gateArray opens a filled array whose reshape has just started.
func gateArray(t *testing.T, name string) (*Array, *model) {
	t.Helper()
	if name == "raid5-5to4" {
		for _, c := range restripeCases() {
			if c.name == name {
				mems, data, _ := startRestripe(t, c)
				a := open(t, mems, recoverOptions())
				return a, &model{b: data[:a.Size()]}
			}
		}
		t.Fatalf("no restripe case %s", name)
	}
	mems := create(t, spec{level: "raid5", n: 4, chunkKiB: 64, devMiB: []int{8}})
	a := open(t, mems, recoverOptions())
	data := make([]byte, a.Size())
	fillPattern(newRand(21), data)
	m := &model{b: data}
	mustWrite(t, a, m, data, 0)
	if _, err := a.AddDevice(NewMemDevice(8<<20), AddOptions{Replacement: -1}); err != nil {
		t.Fatal(err)
	}
	if err := a.StartReshape(ReshapeStart{RaidDisks: 5}); err != nil {
		t.Fatal(err)
	}
	return a, m
}

// gateWait waits for ch, failing the test after a bound that only a
// request held for good reaches.
func gateWait(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s: still waiting after 2 minutes", what)
	}
}

// TestReshapeHoldWindow: while a window is being moved (held by the
// test's hook between the gate's drain and the move), requests that touch
// it wait -- a write inside it, a write straddling its edge, a read
// inside it -- and requests outside it on both sides (the old geometry's
// and the new one's) complete; released, the waiting ones complete and
// every byte is as written, through the reshape's end and a reopen.
func TestReshapeHoldWindow(t *testing.T) {
	for _, name := range gateCases {
		t.Run(name, func(t *testing.T) {
			a, m := gateArray(t, name)
			type win struct{ lo, hi uint64 }
			held, release := make(chan win), make(chan struct{})
			// Hold the first window with room for requests on both sides
			// (windows are as long as the reshape's records allow).
			size := uint64(a.Size() >> 9)
			holding := false
			reshapeHoldHook = func(lo, hi uint64) {
				if !holding && lo >= 4096 && hi+2048+128 <= size {
					holding = true
					held <- win{lo, hi}
					<-release
				}
			}
			defer func() { reshapeHoldHook = nil }()
			done := make(chan error, 1)
			go func() { done <- a.Reshape(context.Background()) }()
			var w win
			select {
			case w = <-held:
			case err := <-done:
				t.Fatalf("the reshape ended before a window with room on both sides: %v", err)
			case <-time.After(2 * time.Minute):
				t.Fatal("no window with room on both sides after 2 minutes")
			}
			if w.lo < 4096 || w.hi+2048+128 > size || w.hi <= w.lo {
				t.Fatalf("window [%d, %d) of %d sectors: no room on both sides", w.lo, w.hi, size)
			}
			r := newRand(5)
			buf := func(n int) []byte { b := make([]byte, n); fillPattern(r, b); return b }
			write := func(p []byte, s uint64) chan error {
				ch := make(chan error, 1)
				go func() {
					_, err := a.WriteAt(p, int64(s)<<9)
					ch <- err
				}()
				return ch
			}
			// inside: a write at the window's middle, one across its
			// lower edge, a read at its upper end
			mid := (w.lo + w.hi) / 2 &^ 7
			pIn, pEdge := buf(4096), buf(8192)
			in, edge := write(pIn, mid), write(pEdge, w.lo-8)
			got := make([]byte, 4096)
			rd := make(chan error, 1)
			go func() {
				_, err := a.ReadAt(got, int64(w.hi-8)<<9)
				rd <- err
			}()
			deadline := time.Now().Add(2 * time.Minute)
			for a.rs.gate.waiting.Load() != 3 {
				if time.Now().After(deadline) {
					t.Fatalf("%d requests wait for the window, want 3", a.rs.gate.waiting.Load())
				}
				time.Sleep(time.Millisecond)
			}
			// outside, on both sides, while the window is held
			pBelow, pAbove := buf(4096), buf(65536)
			gateWait(t, write(pBelow, w.lo-4096), "a write below the held window")
			gateWait(t, write(pAbove, w.hi+2048), "a write above the held window")
			far := make([]byte, 4096)
			if _, err := a.ReadAt(far, int64(w.hi+2048)<<9); err != nil || !bytes.Equal(far, pAbove[:4096]) {
				t.Fatalf("read above the held window: %v (equal %v)", err, bytes.Equal(far, pAbove[:4096]))
			}
			for _, ch := range []chan error{in, edge, rd} {
				select {
				case err := <-ch:
					t.Fatalf("a request touching the held window [%d, %d) completed (%v)", w.lo, w.hi, err)
				default:
				}
			}
			if n := a.rs.gate.waiting.Load(); n != 3 {
				t.Fatalf("%d requests wait for the window, want 3", n)
			}
			close(release)
			gateWait(t, in, "the write inside the window")
			gateWait(t, edge, "the write across its edge")
			gateWait(t, rd, "the read inside it")
			if !bytes.Equal(got, m.b[(w.hi-8)<<9:w.hi<<9]) {
				t.Fatal("the read held by the window returned other data")
			}
			m.write(pIn, int64(mid)<<9)
			m.write(pEdge, int64(w.lo-8)<<9)
			m.write(pBelow, int64(w.lo-4096)<<9)
			m.write(pAbove, int64(w.hi+2048)<<9)
			gateWait(t, done, "the reshape")
			gateFinal(t, a, m)
		})
	}
}

// gateFinal checks the finished array against m (the added capacity
// reads as zeroes) and its parity.
func gateFinal(t *testing.T, a *Array, m *model) {
	t.Helper()
	if ok, _ := a.Reshaping(); ok {
		t.Fatal("still reshaping")
	}
	full := make([]byte, a.Size())
	copy(full, m.b)
	checkContent(t, a, &model{b: full})
	if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
		t.Fatalf("check: %d mismatches, %v", mm, err)
	}
	a.Close()
}

// TestReshapeConcurrentWriters: four writers (each owning every fourth
// 4 KiB block) write and read back blocks around the moving reshape point
// and anywhere else while the reshape runs; every read returns the
// writer's last write and the array holds all of them at the end. Run it
// with -race: the gate's protocol is lock-free.
func TestReshapeConcurrentWriters(t *testing.T) {
	for _, name := range gateCases {
		t.Run(name, func(t *testing.T) {
			a, m := gateArray(t, name)
			blocks := uint64(a.Size() / 4096)
			done := make(chan error, 1)
			go func() { done <- a.Reshape(context.Background()) }()
			var stop sync.WaitGroup
			quit := make(chan struct{})
			errs := make(chan error, 4)
			for wr := uint64(0); wr < 4; wr++ {
				stop.Add(1)
				go func() {
					defer stop.Done()
					errs <- gateWriter(a, m, wr, blocks, quit)
				}()
			}
			gateWait(t, done, "the reshape")
			close(quit)
			stop.Wait()
			for i := 0; i < 4; i++ {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			gateFinal(t, a, m)
		})
	}
}

// gateWriter writes block after block of its own (b%4 == wr), half of
// them within 1 MiB of reshape_progress, reads each back and records it
// in m, until quit.
func gateWriter(a *Array, m *model, wr, blocks uint64, quit chan struct{}) error {
	r := rand.New(rand.NewPCG(wr, 99))
	p, got := make([]byte, 4096), make([]byte, 4096)
	for i := 0; ; i++ {
		select {
		case <-quit:
			return nil
		default:
		}
		var b uint64
		if i%2 == 0 {
			_, pos := a.Reshaping()
			b = (pos>>3 + blocks - 256 + r.Uint64N(512)) % blocks
		} else {
			b = r.Uint64N(blocks)
		}
		b = b&^3 | wr
		if b >= blocks {
			continue
		}
		fillPattern(r, p)
		if _, err := a.WriteAt(p, int64(b)*4096); err != nil {
			return err
		}
		copy(m.b[b*4096:], p)
		if _, err := a.ReadAt(got, int64(b)*4096); err != nil {
			return err
		}
		if !bytes.Equal(got, p) {
			_, pos := a.Reshaping()
			return fmt.Errorf("block %d read back other data (reshape at sector %d)", b, pos)
		}
	}
}
