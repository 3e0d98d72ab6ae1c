package plan

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"mdtool/bitmap"
	"mdtool/superblock"
)

var fuzzLevels = []string{"linear", "0", "1", "4", "5", "6", "10", "raid7"}
var fuzzMeta = []string{"", "1.0", "1.1", "1.2", "0.90"}
var fuzzLayouts = []string{"", "n2", "f2", "o2", "n3", "la", "parity-first-6", "alternate", "dangerous", "ddf-N-restart"}
var fuzzBitmaps = []string{"", "internal", "none"}

// FuzzPlan drives the planner with arbitrary options and checks the
// invariants of every plan it accepts: each superblock decodes with
// superblock.Parse and fits its device (CheckDevice), writes stay on the
// device and off the data area, the bitmap area decodes, and refusals
// are *Refusal values.
func FuzzPlan(f *testing.F) {
	f.Add(uint8(2), uint8(3), uint8(2), uint8(0), uint8(0), uint8(0), uint16(0), uint64(64<<11), uint64(0), uint64(0), false, false)
	f.Add(uint8(4), uint8(1), uint8(4), uint8(1), uint8(0), uint8(1), uint16(64), uint64(100<<11), uint64(0), uint64(0), false, true)
	f.Add(uint8(6), uint8(2), uint8(3), uint8(0), uint8(2), uint8(1), uint16(0), uint64(203776), uint64(0), uint64(4<<20), true, false)
	f.Add(uint8(1), uint8(0), uint8(3), uint8(0), uint8(7), uint8(0), uint16(0), uint64(40<<11), uint64(1024), uint64(0), false, false)
	f.Add(uint8(5), uint8(3), uint8(5), uint8(1), uint8(6), uint8(2), uint16(128), uint64(201<<21), uint64(0), uint64(0), false, false)
	f.Fuzz(func(t *testing.T, levelIdx, metaIdx, n, spares, layoutIdx, bmIdx uint8, chunk uint16, devSectors, sizeKiB, bmChunk uint64, assumeClean, force bool) {
		n %= 9
		spares %= 3
		devSectors %= 1 << 40
		o := Options{
			MDDevice:       "/dev/md/fuzz",
			Level:          fuzzLevels[int(levelIdx)%len(fuzzLevels)],
			Metadata:       fuzzMeta[int(metaIdx)%len(fuzzMeta)],
			Layout:         fuzzLayouts[int(layoutIdx)%len(fuzzLayouts)],
			Bitmap:         fuzzBitmaps[int(bmIdx)%len(fuzzBitmaps)],
			RaidDevices:    int(n),
			SpareDevices:   int(spares),
			ChunkKiB:       uint64(chunk),
			SizeKiB:        sizeKiB % (1 << 32),
			BitmapChunk:    bmChunk,
			AssumeClean:    assumeClean,
			Force:          force,
			SystemHostname: "fuzz",
			Now:            time.Unix(1700000000, 0),
			Rand:           bytes.NewReader(make([]byte, 16*32)),
		}
		for i := 0; i < int(n)+int(spares); i++ {
			d := Device{Path: fmt.Sprintf("/dev/f%d", i), Sectors: devSectors + uint64(i)*uint64(chunk)*7}
			if i == 1 && layoutIdx&1 == 1 {
				d = Device{Path: "missing", Missing: true}
			}
			o.Devices = append(o.Devices, d)
		}
		r, err := Plan(o)
		if err != nil {
			if !refused(err) {
				t.Fatalf("refusal %v (%T) is not a proper *Refusal", err, err)
			}
			return
		}
		if len(r.Members) == 0 {
			t.Fatal("plan without members")
		}
		for _, m := range r.Members {
			d := o.Devices[m.Device]
			sb := m.Superblock // the v1 view of a 0.90 superblock
			if r.Minor == Minor090 {
				sb0, perr := superblock.Parse090(m.SuperBytes)
				if perr != nil {
					t.Fatalf("%s: planned 0.90 superblock does not parse: %v", m.Path, perr)
				}
				if err := sb0.CheckDevice(d.Sectors * 512); err != nil {
					t.Fatalf("%s: %v", m.Path, err)
				}
			} else {
				var perr error
				if sb, perr = superblock.Parse(m.SuperBytes); perr != nil {
					t.Fatalf("%s: planned superblock does not parse: %v", m.Path, perr)
				}
				if err := sb.CheckDevice(d.Sectors); err != nil {
					t.Fatalf("%s: %v", m.Path, err)
				}
			}
			size := int64(d.Sectors) * 512
			ds, de := int64(sb.DataOffset)*512, int64(sb.DataOffset+sb.DataSize)*512
			for _, w := range m.Writes {
				end := w.Offset + int64(len(w.Data))
				if w.Offset < 0 || end > size {
					t.Fatalf("%s: write [%d,%d) outside the %d-byte device", m.Path, w.Offset, end, size)
				}
				if w.Offset < de && ds < end {
					t.Fatalf("%s: write [%d,%d) overlaps data [%d,%d)", m.Path, w.Offset, end, ds, de)
				}
			}
			if r.Bitmap {
				h, err := bitmap.Parse(m.BitmapBytes)
				if err != nil {
					t.Fatalf("%s: bitmap: %v", m.Path, err)
				}
				if r.Minor != Minor090 && uint64(len(m.BitmapBytes)) != bitmap.AreaSize(h, 4096) {
					t.Fatalf("%s: bitmap area %d bytes for %+v", m.Path, len(m.BitmapBytes), h)
				}
			}
			if sb.Size > sb.DataSize {
				t.Fatalf("%s: component size %d > data size %d", m.Path, sb.Size, sb.DataSize)
			}
		}
		if r.Level > 0 && r.ArraySizeKiB == 0 {
			t.Fatalf("level %d array of size 0", r.Level)
		}
	})
}

// FuzzParseSectors checks ParseSectors against a plain reading of the
// accepted grammar.
func FuzzParseSectors(f *testing.F) {
	for _, s := range []string{"100", "1M", "2G", "1T", "8s", "0", "-1", "1k", " +5K", "99999999999999999999T", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSectors(s)
		if err != nil {
			if n != 0 {
				t.Fatalf("ParseSectors(%q) = %d with error", s, n)
			}
			return
		}
		if n == 0 || n > 1<<63-1 {
			t.Fatalf("ParseSectors(%q) = %d", s, n)
		}
		var num uint64
		var suffix string
		trimmed := s
		for len(trimmed) > 0 && isSpace(trimmed[0]) {
			trimmed = trimmed[1:]
		}
		if len(trimmed) > 0 && trimmed[0] == '+' {
			trimmed = trimmed[1:]
		}
		if _, err := fmt.Sscanf(trimmed, "%d%s", &num, &suffix); err != nil && suffix == "" {
			fmt.Sscanf(trimmed, "%d", &num)
		}
		mult := map[string]uint64{"": 2, "K": 2, "M": 2048, "G": 2 << 20, "T": 2 << 30, "s": 1}[suffix]
		if mult == 0 || num*mult != n {
			t.Fatalf("ParseSectors(%q) = %d, reading it as %d%q gives %d", s, n, num, suffix, num*mult)
		}
	})
}
