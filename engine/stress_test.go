package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

const tagMagic = 0x6d64746f6f6c5354

// tagSector fills one 512-byte sector with content that names its array
// sector and the write that produced it.
func tagSector(b []byte, sector uint64, writer, seq uint32) {
	binary.LittleEndian.PutUint64(b[0:], tagMagic^sector)
	binary.LittleEndian.PutUint32(b[8:], writer)
	binary.LittleEndian.PutUint32(b[12:], seq)
	r := rand.New(rand.NewPCG(sector, uint64(writer)<<32|uint64(seq)))
	for i := 16; i < 512; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
}

// checkSector says whether b is all zero or a whole sector written for
// array sector sector by some write.
func checkSector(b []byte, sector uint64) error {
	if binary.LittleEndian.Uint64(b) == 0 {
		for _, c := range b {
			if c != 0 {
				return fmt.Errorf("sector %d: torn (zero header, data)", sector)
			}
		}
		return nil
	}
	if got := binary.LittleEndian.Uint64(b) ^ tagMagic; got != sector {
		return fmt.Errorf("sector %d holds data of sector %d", sector, got)
	}
	var want [512]byte
	tagSector(want[:], sector, binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:]))
	for i := range want {
		if want[i] != b[i] {
			return fmt.Errorf("sector %d: corrupt content at byte %d", sector, i)
		}
	}
	return nil
}

// TestConcurrentOverlappingWriters runs writers that overlap each other
// (and readers) on a small region and then checks that every sector is
// whole, that parity and mirrors agree (check finds no mismatch) and, for
// degraded arrays, that what is rebuilt is right. Run it with -race.
func TestConcurrentOverlappingWriters(t *testing.T) {
	type tc struct {
		s      spec
		drop   []int
		fanout bool // members that do not claim memory speed: every op goes to a worker
	}
	cases := []tc{
		{s: spec{level: "raid5", n: 4, chunkKiB: 64}},
		{s: spec{level: "raid6", n: 5, chunkKiB: 64}},
		{s: spec{level: "raid4", n: 3, chunkKiB: 64}},
		{s: spec{level: "raid1", n: 2}},
		{s: spec{level: "raid10", layout: "n2", n: 4, chunkKiB: 64}},
		{s: spec{level: "raid10", layout: "o2", n: 3, chunkKiB: 64}},
		{s: spec{level: "raid0", n: 3, chunkKiB: 64}},
		{s: spec{level: "raid5", n: 4, chunkKiB: 64}, drop: []int{2}},
		{s: spec{level: "raid6", n: 5, chunkKiB: 64}, drop: []int{0, 3}},
		{s: spec{level: "raid6", layout: "left-asymmetric", n: 6, chunkKiB: 64}, drop: []int{4}},
		{s: spec{level: "raid5", n: 4, chunkKiB: 64}, fanout: true},
		{s: spec{level: "raid6", n: 5, chunkKiB: 64}, drop: []int{1}, fanout: true},
		{s: spec{level: "raid10", layout: "f2", n: 4, chunkKiB: 64}, fanout: true},
	}
	writers, perWriter := 8, 150
	if testing.Short() || raceEnabled {
		perWriter = 50
	}
	for _, c := range cases {
		name := c.s.String()
		if c.drop != nil {
			name += fmt.Sprintf("-without%v", c.drop)
		}
		if c.fanout {
			name += "-fanout"
		}
		t.Run(name, func(t *testing.T) {
			mems := create(t, c.s)
			o := testOptions()
			if c.drop != nil {
				// write something first so the array is not pristine
				a := open(t, mems, o)
				p := make([]byte, 2<<20)
				for s := uint64(0); s < uint64(len(p)>>9); s++ {
					tagSector(p[s<<9:], s, 99, 0)
				}
				mustWrite(t, a, nil, p, 0)
				a.Close()
			}
			openArr := func() *Array {
				devs := devices(mems, c.drop...)
				if c.fanout {
					for i := range devs {
						devs[i] = notMemory{devs[i]}
					}
				}
				a, err := Open(devs, o)
				if err != nil {
					t.Fatal(err)
				}
				return a
			}
			a := openArr()
			defer a.Close()
			unit := a.IOOpt()
			if unit == 0 {
				unit = 128 << 10
			}
			region := min(4*unit, a.Size())
			var wg sync.WaitGroup
			var stop atomic.Bool
			errs := make(chan error, 100)
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(w), 42))
					buf := make([]byte, 2*unit)
					for seq := 1; seq <= perWriter; seq++ {
						var n int64
						switch r.IntN(3) {
						case 0:
							n = 512 * int64(1+r.IntN(16))
						case 1:
							n = unit
						default:
							n = 512 * int64(1+r.IntN(int(2*unit/512)))
						}
						off := r.Int64N((region-n)/512+1) * 512
						if seq%4 == 0 { // aligned full stripes
							n = unit
							off = r.Int64N(region/unit) * unit
						}
						p := buf[:n]
						for i := int64(0); i < n; i += 512 {
							tagSector(p[i:], uint64(off+i)>>9, uint32(w), uint32(seq))
						}
						if _, err := a.WriteAt(p, off); err != nil {
							errs <- err
							return
						}
					}
				}(w)
			}
			var rwg sync.WaitGroup
			for rd := 0; rd < 2; rd++ {
				rwg.Add(1)
				go func(rd int) {
					defer rwg.Done()
					r := rand.New(rand.NewPCG(uint64(rd), 43))
					buf := make([]byte, unit)
					for !stop.Load() {
						n := 512 * int64(1+r.IntN(int(unit/512)))
						off := r.Int64N((region-n)/512+1) * 512
						p := buf[:n]
						if _, err := a.ReadAt(p, off); err != nil {
							errs <- err
							return
						}
						for i := int64(0); i < n; i += 512 {
							if err := checkSector(p[i:i+512], uint64(off+i)>>9); err != nil {
								errs <- fmt.Errorf("concurrent read: %w", err)
								return
							}
						}
					}
				}(rd)
			}
			wg.Wait()
			stop.Store(true)
			rwg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			p := make([]byte, region)
			if _, err := a.ReadAt(p, 0); err != nil {
				t.Fatal(err)
			}
			for i := int64(0); i < region; i += 512 {
				if err := checkSector(p[i:i+512], uint64(i)>>9); err != nil {
					t.Fatal(err)
				}
			}
			if c.drop == nil && a.redundant() {
				if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
					t.Fatalf("check after concurrent writes: %d mismatches, %v", mm, err)
				}
			}
			if c.drop != nil {
				// what the degraded array computed must read the same after
				// reopening (parity written by the degraded writes is right)
				a.Close()
				b := openArr()
				q := make([]byte, region)
				if _, err := b.ReadAt(q, 0); err != nil {
					t.Fatal(err)
				}
				for i := int64(0); i < region; i += 512 {
					if err := checkSector(q[i:i+512], uint64(i)>>9); err != nil {
						t.Fatal(err)
					}
				}
				if string(p) != string(q) {
					t.Fatal("content changed across reopen")
				}
				b.Close()
			}
		})
	}
}

// notMemory hides a device's memory speed, so the engine fans its member
// I/O out to worker goroutines as it does for files and block devices.
type notMemory struct{ Device }

func (d notMemory) Geometry() DeviceGeometry {
	g := d.Device.Geometry()
	g.Memory = false
	return g
}
