package membermodel

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"
)

func testConfig() Config {
	return Config{Size: 1 << 20, LogicalBlock: 512, AtomicUnit: 4096,
		ReadLatency: 80 * time.Microsecond, WriteLatency: 10 * time.Microsecond,
		FlushLatency: 5 * time.Microsecond, Bandwidth: 4096e6} // 4096 bytes = 1 µs
}

func TestWriteCost(t *testing.T) {
	c := testConfig()
	us := time.Microsecond
	tests := []struct {
		name          string
		off, n        int64
		rmw           bool
		readB, writeB int64
		time          time.Duration
	}{
		{"aligned 4K", 8192, 4096, false, 0, 4096, 10*us + us},
		{"aligned 8K", 0, 8192, false, 0, 8192, 10*us + 2*us},
		{"512 at unit start", 4096, 512, true, 4096, 4096, 10*us + us + 80*us + us},
		{"512 at unit end", 4096 + 3584, 512, true, 4096, 4096, 10*us + us + 80*us + us},
		{"512 inside a unit", 4096 + 1024, 512, true, 4096, 4096, 10*us + us + 80*us + us},
		{"4K misaligned by 512", 512, 4096, true, 8192, 8192, 10*us + 2*us + 80*us + 2*us},
		{"head partial only", 3584, 4608, true, 4096, 8192, 10*us + 2*us + 80*us + us},
		{"tail partial only", 4096, 4608, true, 4096, 8192, 10*us + 2*us + 80*us + us},
		{"10K with both ends partial", 1024, 10240, true, 8192, 12288, 10*us + 3*us + 80*us + 2*us},
	}
	for _, tc := range tests {
		got := c.WriteCost(tc.off, tc.n)
		if got.RMW != tc.rmw || got.DevReadBytes != tc.readB || got.DevWriteBytes != tc.writeB || got.Time != tc.time {
			t.Errorf("%s: WriteCost(%d,%d) = %+v, want rmw %v read %d write %d time %v",
				tc.name, tc.off, tc.n, got, tc.rmw, tc.readB, tc.writeB, tc.time)
		}
		if tc.rmw && (got.DevReads != 1 || got.DevWrites != 1) || !tc.rmw && (got.DevReads != 0 || got.DevWrites != 1) {
			t.Errorf("%s: device ops %d reads %d writes", tc.name, got.DevReads, got.DevWrites)
		}
	}
	// A device whose atomic unit is its logical block never does RMW.
	c.AtomicUnit = 512
	if got := c.WriteCost(512, 512); got.RMW {
		t.Errorf("512-byte atomic unit: %+v", got)
	}
	if got := c.ReadCost(512, 512); got.DevReadBytes != 512 || got.Time != 80*us+time.Duration(float64(us)/8) {
		t.Errorf("ReadCost = %+v", got)
	}
}

func TestMemberIOAndStats(t *testing.T) {
	cfg := testConfig()
	cfg.KeepData = true
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := bytes.Repeat([]byte("0123456789abcdef"), 640) // 10 KiB
	if _, err := m.WriteAt(p[:512], 4096+512); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WriteAt(p, 8192); err != nil {
		t.Fatal(err)
	}
	if err := m.Sync(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 12288)
	if _, err := m.ReadAt(got, 4096); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 12288)
	copy(want[512:], p[:512])
	copy(want[4096:], p)
	if !bytes.Equal(got, want) {
		t.Fatal("read back differs")
	}
	st := m.Stats()
	if st.Writes != 2 || st.Reads != 1 || st.Syncs != 1 || st.RMW != 2 ||
		st.BytesWritten != 512+10240 || st.BytesRead != 12288 || st.DevWrites != 2 || st.DevReads != 3 ||
		st.DevBytesWritten != 4096+12288 || st.DevBytesRead != 4096+4096+12288 {
		t.Fatalf("stats %+v", st)
	}
	us := time.Microsecond
	wantBusy := (10*us + us + 80*us + us) + (10*us + 3*us + 80*us + us) + 5*us + (80*us + 3*us)
	if st.Busy != wantBusy {
		t.Fatalf("busy %v, want %v", st.Busy, wantBusy)
	}
	m.ResetStats()
	if m.Stats() != (Stats{}) {
		t.Fatal("ResetStats")
	}
}

func TestMemberErrors(t *testing.T) {
	m, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 512)
	if _, err := m.WriteAt(p[:100], 0); !errors.Is(err, ErrAlignment) {
		t.Errorf("short write: %v", err)
	}
	if _, err := m.WriteAt(p, 256); !errors.Is(err, ErrAlignment) {
		t.Errorf("misaligned write: %v", err)
	}
	if _, err := m.ReadAt(p, 1<<20); !errors.Is(err, ErrRange) {
		t.Errorf("read past the end: %v", err)
	}
	if m.Stats() != (Stats{}) {
		t.Error("refused I/O was counted")
	}
	// Without KeepData reads return zeros.
	p[0] = 1
	m.WriteAt(bytes.Repeat([]byte{7}, 512), 0)
	m.ReadAt(p, 0)
	if p[0] != 0 {
		t.Error("data kept without KeepData")
	}
	for _, c := range []Config{{Size: 0}, {Size: 4096, LogicalBlock: 1000}, {Size: 4096, LogicalBlock: 4096, AtomicUnit: 512}, {Size: 1000}} {
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v): %v", c, err)
		}
	}
}

func TestMemberConcurrent(t *testing.T) {
	m, err := New(NVMe(1 << 24))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			p := make([]byte, 4096)
			for i := 0; i < 100; i++ {
				m.WriteAt(p, int64(g*100+i)*4096)
			}
		}(g)
	}
	wg.Wait()
	st := m.Stats()
	if st.Writes != 800 || st.RMW != 0 || st.Busy != 800*(15*time.Microsecond+NVMe(0).xfer(4096)) {
		t.Fatalf("stats %+v", st)
	}
}
