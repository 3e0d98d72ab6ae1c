package engine

import (
	"sync/atomic"
	"testing"
	"time"
)

// latDev is a memory member that reports a fixed latency and counts reads.
type latDev struct {
	*MemDevice
	lat   time.Duration
	reads atomic.Int64
}

func (d *latDev) Latency() time.Duration { return d.lat }

func (d *latDev) ReadAt(p []byte, off int64) (int, error) {
	d.reads.Add(1)
	return d.MemDevice.ReadAt(p, off)
}

// Reads go to the copy whose server answers faster; a local copy (no
// reported latency) goes before remote ones; writes still go to all.
func TestReadBalanceByLatency(t *testing.T) {
	for _, c := range []struct {
		name     string
		level    string
		n        int
		lat      []time.Duration // -1: a local device
		fastest  int
		minShare float64
	}{
		{"raid1 slow first", "raid1", 2, []time.Duration{5 * time.Millisecond, 200 * time.Microsecond}, 1, 0.95},
		{"raid1 fast first", "raid1", 2, []time.Duration{200 * time.Microsecond, 5 * time.Millisecond}, 0, 0.95},
		{"raid1 local beats remote", "raid1", 3, []time.Duration{time.Millisecond, -1, 100 * time.Microsecond}, 1, 0.95},
		{"raid10 n2", "raid10", 2, []time.Duration{3 * time.Millisecond, 100 * time.Microsecond}, 1, 0.95},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := spec{level: c.level, n: c.n, devMiB: []int{8}}
			mems := create(t, s)
			var devs []Device
			var lds []*latDev
			for i, m := range mems {
				if c.lat[i] < 0 {
					devs = append(devs, m.Reopen())
					lds = append(lds, nil)
					continue
				}
				ld := &latDev{MemDevice: m.Reopen(), lat: c.lat[i]}
				devs = append(devs, ld)
				lds = append(lds, ld)
			}
			a, err := Open(devs, testOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			m := newModel(a.Size())
			workload(t, a, m, 5, 20)
			for _, ld := range lds {
				if ld != nil {
					ld.reads.Store(0)
				}
			}
			const reads = 400
			buf := make([]byte, 4096)
			r := newRand(9)
			for i := 0; i < reads; i++ {
				off := r.Int64N(a.Size()/4096) * 4096
				if _, err := a.ReadAt(buf, off); err != nil {
					t.Fatal(err)
				}
			}
			var others int64
			for i, ld := range lds {
				if ld != nil && i != c.fastest {
					others += ld.reads.Load()
				}
			}
			if share := 1 - float64(others)/reads; share < c.minShare {
				t.Errorf("the fastest copy (%d) served %.0f%% of the reads, want at least %.0f%%", c.fastest, 100*share, 100*c.minShare)
			}
			checkContent(t, a, m)
		})
	}
}
