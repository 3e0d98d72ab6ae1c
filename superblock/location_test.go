package superblock

import (
	"errors"
	"testing"
)

func TestOffset(t *testing.T) {
	cases := []struct {
		minor int
		dev   uint64
		want  uint64
		err   bool
	}{
		{0, 204800, 204784, false},
		{0, 204801, 204784, false},
		{0, 204807, 204784, false},
		{0, 204808, 204792, false},
		{0, 131072, 131056, false},
		{0, 24, 8, false},
		{0, 31, 8, false},
		{0, 32, 16, false},
		{0, 23, 0, true},
		{1, 204800, 0, false},
		{1, 24, 0, false},
		{1, 23, 0, true},
		{2, 204800, 8, false},
		{2, 0, 0, true},
		{3, 204800, 0, true},
		{-1, 204800, 0, true},
	}
	for _, c := range cases {
		got, err := Offset(c.minor, c.dev)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("Offset(%d, %d) = %d, %v; want %d, err %v", c.minor, c.dev, got, err, c.want, c.err)
		}
		if err != nil && c.minor >= 0 && c.minor <= 2 && !errors.Is(err, ErrDeviceTooSmall) {
			t.Errorf("Offset(%d, %d) error %v is not ErrDeviceTooSmall", c.minor, c.dev, err)
		}
	}
}

func TestMinor(t *testing.T) {
	for _, c := range []struct {
		off  uint64
		want int
	}{{0, 1}, {4, 1}, {5, 2}, {8, 2}, {9, 0}, {16, 0}, {204784, 0}, {^uint64(0), 0}} {
		sb := &Superblock{SuperOffset: c.off}
		if got := sb.Minor(); got != c.want {
			t.Errorf("Minor() with super_offset %d = %d, want %d", c.off, got, c.want)
		}
	}
}

func TestCheckDevice(t *testing.T) {
	type tc struct {
		name  string
		minor int
		dev   uint64
		mod   func(sb *Superblock)
		errs  []error // in order; nil = valid
		field string  // field of the first error
	}
	cases := []tc{
		{name: "1.0", minor: 0, dev: testDevSectors},
		{name: "1.1", minor: 1, dev: testDevSectors},
		{name: "1.2", minor: 2, dev: testDevSectors},
		{name: "1.0 on 7 more sectors", minor: 0, dev: testDevSectors + 7},
		{name: "1.0 on a larger device", minor: 0, dev: testDevSectors + 8, errs: []error{ErrLocation}, field: "super_offset"},
		{name: "1.0 on a smaller device", minor: 0, dev: testDevSectors - 1, errs: []error{ErrLocation}, field: "super_offset"},
		{name: "super_offset 4", minor: 1, dev: testDevSectors, mod: func(sb *Superblock) { sb.SuperOffset = 4 }, errs: []error{ErrLocation}, field: "super_offset"},
		{name: "super_offset 7", minor: 2, dev: testDevSectors, mod: func(sb *Superblock) { sb.SuperOffset = 7 }, errs: []error{ErrLocation}, field: "super_offset"},
		{name: "too small", minor: 2, dev: 23, errs: []error{ErrDeviceTooSmall}},
		{name: "1.2 data fills the device", minor: 2, dev: testDevSectors, mod: func(sb *Superblock) { sb.DataSize = testDevSectors - 2048 }},
		{name: "1.2 data one sector too long", minor: 2, dev: testDevSectors, mod: func(sb *Superblock) { sb.DataSize = testDevSectors - 2047 }, errs: []error{ErrDataSize}, field: "data_size"},
		{name: "1.2 data_offset past the end", minor: 2, dev: testDevSectors, mod: func(sb *Superblock) { sb.DataOffset = testDevSectors + 1; sb.DataSize = 10 }, errs: []error{ErrDataOffset}, field: "data_offset"},
		{name: "1.2 data_size huge", minor: 2, dev: testDevSectors, mod: func(sb *Superblock) { sb.DataSize = ^uint64(0) }, errs: []error{ErrDataSize}, field: "data_size"},
		{name: "1.0 data up to sb", minor: 0, dev: testDevSectors, mod: func(sb *Superblock) { sb.DataSize = sb.SuperOffset; sb.BBLogSize, sb.BBLogOffset = 0, 0 }},
		{name: "1.0 data from 1 up to sb", minor: 0, dev: testDevSectors, mod: func(sb *Superblock) {
			sb.DataOffset = 1
			sb.DataSize = sb.SuperOffset - 1
			sb.BBLogSize, sb.BBLogOffset = 0, 0
		}},
		{name: "1.0 data from 1 into sb", minor: 0, dev: testDevSectors, mod: func(sb *Superblock) {
			sb.DataOffset = 1
			sb.DataSize = sb.SuperOffset
			sb.BBLogSize, sb.BBLogOffset = 0, 0
		}, errs: []error{ErrOverlap}, field: "super_offset"},
		{name: "1.0 data_size past sb", minor: 0, dev: testDevSectors, mod: func(sb *Superblock) { sb.DataSize = sb.SuperOffset + 1 },
			errs: []error{ErrDataSize, ErrOverlap, ErrOverlap}, field: "data_size"},
		{name: "1.0 data into bblog", minor: 0, dev: testDevSectors, mod: func(sb *Superblock) { sb.DataSize = sb.SuperOffset - 7 }, errs: []error{ErrOverlap}, field: "bblog_offset"},
		{name: "1.0 data up to bblog", minor: 0, dev: testDevSectors, mod: func(sb *Superblock) { sb.DataSize = sb.SuperOffset - 8 }},
		{name: "1.0 bitmap below data end", minor: 0, dev: testDevSectors, mod: func(sb *Superblock) { sb.FeatureMap = FeatureBitmapOffset; sb.BitmapOffset = -24 },
			errs: []error{ErrOverlap}, field: "bitmap_offset"},
		{name: "1.0 bitmap at data end", minor: 0, dev: testDevSectors, mod: func(sb *Superblock) { sb.FeatureMap = FeatureBitmapOffset; sb.BitmapOffset = -16 }},
		{name: "1.0 PPL inside data", minor: 0, dev: testDevSectors, mod: func(sb *Superblock) { sb.FeatureMap = FeaturePPL; sb.SetPPL(-2056, 2048) },
			errs: []error{ErrOverlap}, field: "ppl.offset"},
		{name: "1.0 PPL before sb", minor: 0, dev: testDevSectors, mod: func(sb *Superblock) {
			sb.FeatureMap = FeaturePPL
			sb.SetPPL(-2056, 2048)
			sb.DataSize = sb.SuperOffset - 2056
		}},
		{name: "1.2 bitmap in data", minor: 2, dev: testDevSectors, mod: func(sb *Superblock) { sb.FeatureMap = FeatureBitmapOffset; sb.BitmapOffset = 2040 },
			errs: []error{ErrOverlap}, field: "bitmap_offset"},
		{name: "1.2 bitmap before data", minor: 2, dev: testDevSectors, mod: func(sb *Superblock) { sb.FeatureMap = FeatureBitmapOffset; sb.BitmapOffset = 2039 }},
		{name: "1.2 bblog reaching data", minor: 2, dev: testDevSectors, mod: func(sb *Superblock) { sb.BBLogOffset = 2033 }, errs: []error{ErrOverlap}, field: "bblog_offset"},
		{name: "1.2 bblog ending at data", minor: 2, dev: testDevSectors, mod: func(sb *Superblock) { sb.BBLogOffset = 2032 }},
		{name: "1.2 bblog without size", minor: 2, dev: testDevSectors, mod: func(sb *Superblock) { sb.BBLogOffset = 2040; sb.BBLogSize = 0 }},
		{name: "1.2 bitmap past the end", minor: 2, dev: testDevSectors, mod: func(sb *Superblock) { sb.FeatureMap = FeatureBitmapOffset; sb.BitmapOffset = 0x7fffff00 },
			errs: []error{ErrBitmapOffset}, field: "bitmap_offset"},
		{name: "1.2 bitmap on the last sector", minor: 2, dev: testDevSectors, mod: func(sb *Superblock) {
			sb.FeatureMap = FeatureBitmapOffset
			sb.BitmapOffset = testDevSectors - 9
			sb.DataSize = testDevSectors - 2048 - 1
		}},
		{name: "1.2 bitmap before the start", minor: 2, dev: testDevSectors, mod: func(sb *Superblock) { sb.FeatureMap = FeatureBitmapOffset; sb.BitmapOffset = -9 },
			errs: []error{ErrBitmapOffset}, field: "bitmap_offset"},
		{name: "1.0 bitmap offset ignored without the feature", minor: 0, dev: testDevSectors, mod: func(sb *Superblock) { sb.BitmapOffset = 0x7fffff00 }},
		{name: "1.1 data at 1", minor: 1, dev: testDevSectors, mod: func(sb *Superblock) { sb.DataOffset = 1; sb.BBLogSize = 0; sb.DataSize = 100 }},
		{name: "1.1 data over sb", minor: 1, dev: testDevSectors, mod: func(sb *Superblock) { sb.DataOffset = 0; sb.BBLogSize = 0; sb.DataSize = 100 },
			errs: []error{ErrOverlap}, field: "super_offset"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sb := mkSB(c.minor)
			if c.mod != nil {
				c.mod(sb)
			}
			err := sb.CheckDevice(c.dev)
			if c.errs == nil {
				if err != nil {
					t.Fatalf("want no error, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want %v, got nil", c.errs)
			}
			if c.errs[0] == ErrDeviceTooSmall {
				if !errors.Is(err, ErrDeviceTooSmall) {
					t.Fatalf("got %v, want ErrDeviceTooSmall", err)
				}
				return
			}
			fes := formatErrors(t, err)
			if len(fes) != len(c.errs) {
				t.Fatalf("got %d errors, want %d: %v", len(fes), len(c.errs), err)
			}
			for i, fe := range fes {
				if !errors.Is(fe, c.errs[i]) {
					t.Errorf("error %d: %v is not %v", i, fe, c.errs[i])
				}
			}
			if fes[0].Field != c.field {
				t.Errorf("first error on %s, want %s: %v", fes[0].Field, c.field, err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	good := mkSB(2)
	good.FeatureMap = FeatureBitmapOffset
	good.BitmapOffset = 8
	for _, tc := range []struct {
		name  string
		dev   uint64
		mod   func(sb *Superblock)
		raw   func(b []byte) // after the checksum
		errs  []error
		field string
	}{
		{name: "valid", dev: testDevSectors},
		{name: "checksum", dev: testDevSectors, raw: func(b []byte) { b[0xD8] ^= 1 }, errs: []error{ErrChecksum}, field: "sb_csum"},
		{name: "device too small for the data", dev: testDevSectors - 1, errs: []error{ErrDataSize}, field: "data_size"},
		{name: "load and device rules together", dev: testDevSectors - 1, mod: func(sb *Superblock) { sb.Pad0 = 1 },
			errs: []error{ErrPadding, ErrDataSize}, field: "pad0"},
		{name: "data_offset 0", dev: testDevSectors, mod: func(sb *Superblock) { sb.DataOffset = 0 },
			errs: []error{ErrDataOffset, ErrOverlap, ErrOverlap, ErrOverlap}, field: "data_offset"},
		{name: "bitmap outside", dev: testDevSectors, mod: func(sb *Superblock) { sb.BitmapOffset = 1 << 30 },
			errs: []error{ErrBitmapOffset}, field: "bitmap_offset"},
		{name: "raid_disks huge", dev: testDevSectors, mod: func(sb *Superblock) { sb.RaidDisks = MaxDevs + 1 },
			errs: []error{ErrTooManyDisks}, field: "raid_disks"},
		{name: "max_dev huge", dev: testDevSectors, raw: func(b []byte) { le.PutUint32(b[0xDC:], 0xffffffff) },
			errs: []error{ErrMaxDev, ErrOverlap}, field: "max_dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := *good
			sb.DevRoles = append([]uint16(nil), good.DevRoles...)
			if tc.mod != nil {
				tc.mod(&sb)
			}
			b := make([]byte, AreaSize)
			copy(b, sb.MarshalWithChecksum())
			if tc.raw != nil {
				tc.raw(b)
			}
			got, err := Validate(b, tc.dev)
			if got == nil {
				t.Fatalf("no superblock returned: %v", err)
			}
			fes := formatErrors(t, err)
			if len(fes) != len(tc.errs) {
				t.Fatalf("got %d errors, want %d: %v", len(fes), len(tc.errs), err)
			}
			for i, fe := range fes {
				if !errors.Is(fe, tc.errs[i]) {
					t.Errorf("error %d: %v is not %v", i, fe, tc.errs[i])
				}
			}
			if len(fes) > 0 {
				if fp := FirstProblem(err); fp == nil || fp.Field != tc.field {
					t.Errorf("FirstProblem = %v, want field %s", fp, tc.field)
				}
			} else if FirstProblem(err) != nil {
				t.Errorf("FirstProblem of nil: %v", FirstProblem(err))
			}
		})
	}
	if sb, err := Validate(make([]byte, AreaSize), testDevSectors); sb != nil || !errors.Is(err, ErrBadMagic) {
		t.Errorf("zeros: %v, %v", sb, err)
	}
}
