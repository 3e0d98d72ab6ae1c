package daemon

import (
	"bytes"
	"io"
	"testing"

	"mdtool/engine"
)

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
