package daemon

import (
	"bytes"
	"io"
	"testing"

	"mdtool/engine"
)

// TestEnough checks mdadm's enough() rule for a clean array, which decides
// whether --add may go on ("has failed so using --add cannot work").
func TestEnough(t *testing.T) {
	for _, tc := range []struct {
		level, n, near, copies int
		avail                  string // 1 = in sync
		want                   bool
	}{
		{1, 2, 0, 0, "01", true},
		{1, 3, 0, 0, "000", false},
		{5, 4, 0, 0, "1011", true},
		{5, 4, 0, 0, "1001", false},
		{4, 3, 0, 0, "110", true},
		{6, 5, 0, 0, "10011", true},
		{6, 5, 0, 0, "10001", false},
		{0, 2, 0, 0, "10", false},
		{-1, 2, 0, 0, "11", true},
		// raid10 near=2 on 4: pairs (0,1) and (2,3).
		{10, 4, 2, 2, "1010", true},
		{10, 4, 2, 2, "0110", true},
		{10, 4, 2, 2, "1100", false},
		// raid10 near=2 on 3 devices: every adjacent pair needs one.
		{10, 3, 2, 2, "100", false},
		{10, 3, 2, 2, "101", true},
		// far=2 (copies 2, near 1): adjacent roles are copies.
		{10, 4, 1, 2, "1010", true},
		{10, 4, 1, 2, "1001", false},
	} {
		avail := make([]bool, len(tc.avail))
		for i, c := range tc.avail {
			avail[i] = c == '1'
		}
		if got := Enough(tc.level, tc.n, tc.near, tc.copies, avail); got != tc.want {
			t.Errorf("Enough(level %d, %d disks, near %d, copies %d, %s) = %v, want %v",
				tc.level, tc.n, tc.near, tc.copies, tc.avail, got, tc.want)
		}
	}
}

// blockDev is an in-memory device that only takes reads aligned to 4 KiB
// (like an O_DIRECT block device).
type blockDev struct {
	engine.Device
	data []byte
}

func (d blockDev) ReadAt(p []byte, off int64) (int, error) {
	if off%4096 != 0 || len(p)%4096 != 0 {
		return 0, engine.ErrAlignment
	}
	if off >= int64(len(d.data)) {
		return 0, io.EOF
	}
	n := copy(p, d.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (d blockDev) Geometry() engine.DeviceGeometry {
	return engine.DeviceGeometry{Size: int64(len(d.data)), LogicalBlock: 4096}
}

// TestAlignedReader: the probe reads any byte range of an aligned-only
// device.
func TestAlignedReader(t *testing.T) {
	data := make([]byte, 64<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	r := alignedReader{blockDev{data: data}, 4096}
	for _, tc := range []struct {
		off, n int64
		want   int
		eof    bool
	}{
		{0, 10, 10, false},
		{4090, 20, 20, false},
		{1, 8192, 8192, false},
		{64<<10 - 5, 10, 5, true},
		{64 << 10, 10, 0, true},
	} {
		p := make([]byte, tc.n)
		n, err := r.ReadAt(p, tc.off)
		if n != tc.want || (err == io.EOF) != tc.eof || (err != nil && err != io.EOF) {
			t.Errorf("ReadAt(%d, %d) = %d, %v", tc.off, tc.n, n, err)
			continue
		}
		if !bytes.Equal(p[:n], data[tc.off:tc.off+int64(n)]) {
			t.Errorf("ReadAt(%d, %d): wrong bytes", tc.off, tc.n)
		}
	}
}
