package plan

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"mdtool/bitmap"
	"mdtool/superblock"
)

func TestFileBitmapChunk(t *testing.T) {
	for _, tt := range []struct{ size, given, want uint64 }{
		{64 * 1024, 0, 4096},      // 32 MiB: 8192 chunks
		{8 << 20, 0, 4096},        // 2^20 chunks of 4 KiB exactly
		{8<<20 + 1, 0, 8192},      // one sector more: doubled
		{1 << 31, 0, 1 << 20},     // 1 TiB
		{64 * 1024, 65536, 65536}, // --bitmap-chunk wins
		{1 << 40, 512 * 1024, 512 * 1024},
	} {
		if got := FileBitmapChunk(tt.size, tt.given); got != tt.want {
			t.Errorf("FileBitmapChunk(%d, %d) = %d, want %d", tt.size, tt.given, got, tt.want)
		}
	}
}

func TestPlanBitmapFile(t *testing.T) {
	for _, md := range []string{"1.2", "0.90"} {
		t.Run(md, func(t *testing.T) {
			o := base("raid1", 2, devs(64*mib, 64*mib))
			o.Metadata = md
			o.Bitmap = "/tmp/bm"
			o.BitmapDelay = 7
			o.WriteBehind = 0
			r, err := Plan(o)
			if err != nil {
				t.Fatal(err)
			}
			h := r.BitmapFileHeader
			if h == nil {
				t.Fatal("no bitmap file header")
			}
			if r.Bitmap {
				t.Error("r.Bitmap (internal) set for a bitmap file")
			}
			for _, m := range r.Members {
				if m.Superblock.FeatureMap&superblock.FeatureBitmapOffset != 0 || len(m.BitmapBytes) != 0 {
					t.Errorf("%s: internal bitmap written for a bitmap file", m.Path)
				}
			}
			want := bitmap.Header{Magic: bitmap.Magic, Version: 4, ChunkSize: 4096, DaemonSleep: 7,
				SyncSize: r.ComponentSectors, UUID: h.UUID}
			if *h != want {
				t.Errorf("header %+v, want %+v", *h, want)
			}
			var zero [16]byte
			if h.UUID == zero {
				t.Error("bitmap file without the array's UUID")
			}
			if md == "1.2" && h.UUID != r.Members[0].Superblock.SetUUID {
				t.Errorf("uuid %x, want the set uuid %x", h.UUID, r.Members[0].Superblock.SetUUID)
			}
			if md == "0.90" && h.UUID != r.Members[0].V090.BitmapUUID090() {
				t.Errorf("uuid %x, want %x", h.UUID, r.Members[0].V090.BitmapUUID090())
			}
			f := NewBitmapFile(*h)
			bits := (h.Chunks() + 7) / 8
			if uint64(len(f)) != bitmap.HeaderSize+bits {
				t.Errorf("file is %d bytes, want %d", len(f), bitmap.HeaderSize+bits)
			}
			if !bytes.Equal(f[:bitmap.HeaderSize], h.Marshal()) || bytes.Count(f[bitmap.HeaderSize:], []byte{0xff}) != int(bits) {
				t.Error("file is not the header followed by all-set bits")
			}
		})
	}
}

// TestBitmapFileFixtures: the bitmap files of create --bitmap=FILE are
// byte for byte what mdadm 4.2 wrote in the VM (testdata/bitmapfile).
func TestBitmapFileFixtures(t *testing.T) {
	uuid, err := superblock.ParseUUID("0a1b2c3d:4e5f6071:8293a4b5:c6d7e8f9")
	if err != nil {
		t.Fatal(err)
	}
	const sec16M = 16 << 11
	for _, c := range []struct {
		file string
		mod  func(o *Options)
	}{
		{"r1.bm", func(o *Options) {}},
		{"r1-090.bm", func(o *Options) { o.Metadata = "0.90"; o.BitmapDelay = 3; o.BitmapChunk = 64 << 10 }},
		{"r10.bm", func(o *Options) {
			o.Level, o.RaidDevices, o.ChunkKiB, o.WriteBehind = "10", 4, 64, 256
			o.Devices = devs(sec16M, sec16M, sec16M, sec16M)
		}},
		{"r5.bm", func(o *Options) {
			o.Level, o.RaidDevices, o.ChunkKiB = "5", 3, 64
			o.Devices = devs(sec16M, sec16M, sec16M)
		}},
	} {
		t.Run(c.file, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", "bitmapfile", c.file))
			if err != nil {
				t.Fatal(err)
			}
			o := base("1", 2, devs(sec16M, sec16M))
			o.UUID = &uuid
			o.Bitmap = "/tmp/" + c.file
			c.mod(&o)
			r, err := Plan(o)
			if err != nil {
				t.Fatal(err)
			}
			got := NewBitmapFile(*r.BitmapFileHeader)
			if !bytes.Equal(got, want) {
				t.Errorf("%d bytes, want %d; header\n%x\nwant\n%x", len(got), len(want), got[:bitmap.HeaderSize], want[:min(len(want), bitmap.HeaderSize)])
			}
		})
	}
}
