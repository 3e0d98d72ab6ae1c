package superblock

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

func bbLog(entries ...uint64) []byte {
	b := make([]byte, 4096)
	for i := range b {
		b[i] = 0xff
	}
	for i, e := range entries {
		binary.LittleEndian.PutUint64(b[8*i:], e)
	}
	return b
}

func TestParseBadBlocks(t *testing.T) {
	cases := []struct {
		name  string
		b     []byte
		shift uint8
		want  []BadBlock
		err   bool
	}{
		{"empty log", bbLog(), 0, nil, false},
		{"one", bbLog(1000<<10 | 8), 0, []BadBlock{{1000, 8}}, false},
		{"two, stops at terminator", bbLog(1000<<10|8, 5000<<10|512, ^uint64(0), 77<<10|1), 0, []BadBlock{{1000, 8}, {5000, 512}}, false},
		{"max 10-bit length", bbLog(7<<10 | 0x3ff), 0, []BadBlock{{7, 1023}}, false},
		{"zero length kept", bbLog(9 << 10), 0, []BadBlock{{9, 0}}, false},
		{"shift 3", bbLog(1000<<10 | 8), 3, []BadBlock{{8000, 64}}, false},
		{"largest start", bbLog((1<<54-1)<<10 | 1), 0, []BadBlock{{1<<54 - 1, 1}}, false},
		{"start fits with shift 10", bbLog(1<<63 | 1), 10, []BadBlock{{1 << 63, 1 << 10}}, false},
		{"start overflows with shift 11", bbLog(1<<63 | 1), 11, nil, true},
		{"length overflows with shift 64", bbLog(1), 64, nil, true},
		{"no terminator, full log", bbLog(1<<10|1, 2<<10|1)[:16], 0, []BadBlock{{1, 1}, {2, 1}}, false},
		{"trailing bytes", bbLog(1<<10 | 1)[:12], 0, []BadBlock{{1, 1}}, true},
		{"nothing", nil, 0, nil, false},
	}
	for _, c := range cases {
		got, err := ParseBadBlocks(c.b, c.shift)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
		if (err != nil) != c.err {
			t.Errorf("%s: err %v, want error %v", c.name, err, c.err)
		}
		if err != nil {
			if !errors.Is(err, ErrBadBlockLog) {
				t.Errorf("%s: %v is not ErrBadBlockLog", c.name, err)
			}
			formatErrors(t, err)
		}
	}
}

func TestMarshalBadBlocks(t *testing.T) {
	cases := []struct {
		name  string
		in    []BadBlock
		shift uint8
		size  int
		want  []uint64 // entries before the 0xff fill
		err   bool
	}{
		{"empty", nil, 0, 4096, nil, false},
		{"one", []BadBlock{{1000, 8}}, 0, 4096, []uint64{1000<<10 | 8}, false},
		{"zero length dropped", []BadBlock{{5, 0}}, 0, 4096, nil, false},
		{"sorted and merged", []BadBlock{{20, 5}, {10, 10}, {100, 1}, {12, 2}}, 0, 4096, []uint64{10<<10 | 15, 100<<10 | 1}, false},
		{"split at 512", []BadBlock{{0, 1200}}, 0, 4096, []uint64{0<<10 | 512, 512<<10 | 512, 1024<<10 | 176}, false},
		{"shift rounds outwards", []BadBlock{{9, 1}, {25, 8}}, 3, 4096, []uint64{1<<10 | 1, 3<<10 | 2}, false},
		{"touching blocks merge", []BadBlock{{9, 1}, {17, 8}}, 3, 4096, []uint64{1<<10 | 3}, false},
		{"full log", []BadBlock{{0, 1}, {2, 1}}, 0, 16, []uint64{0<<10 | 1, 2<<10 | 1}, false},
		{"does not fit", []BadBlock{{0, 1}, {2, 1}, {4, 1}}, 0, 16, nil, true},
		{"bad size", nil, 0, 12, nil, true},
		{"zero size", nil, 0, 0, nil, true},
		{"wraps", []BadBlock{{^uint64(0), 2}}, 0, 4096, nil, true},
		{"start too large", []BadBlock{{1 << 54, 1}}, 0, 4096, nil, true},
		{"shift too large", nil, 60, 4096, nil, true},
	}
	for _, c := range cases {
		b, err := MarshalBadBlocks(c.in, c.shift, c.size)
		if (err != nil) != c.err {
			t.Errorf("%s: err %v", c.name, err)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrBadBlockLog) {
				t.Errorf("%s: %v is not ErrBadBlockLog", c.name, err)
			}
			continue
		}
		if len(b) != c.size {
			t.Errorf("%s: %d bytes", c.name, len(b))
		}
		for i := 0; i < c.size/8; i++ {
			e := binary.LittleEndian.Uint64(b[8*i:])
			want := ^uint64(0)
			if i < len(c.want) {
				want = c.want[i]
			}
			if e != want {
				t.Errorf("%s: entry %d = %#x, want %#x", c.name, i, e, want)
			}
		}
		// What was written reads back as the normalised list.
		back, err := ParseBadBlocks(b, c.shift)
		if err != nil || len(back) != len(c.want) {
			t.Errorf("%s: read back %v, %v", c.name, back, err)
		}
	}
}
