package plan

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"mdtool/bitmap"
	"mdtool/superblock"
)

const (
	mib = 1024 * 1024 / 512 // sectors per MiB
	gib = 1024 * mib
)

// tv1Hex is TV1 of md-format.md §9: member 0 of `mdadm --create --level=1
// --raid-devices=2 --name=arrayname /dev/md0 ...` on two 100 MiB devices,
// host "framework", as found after the kernel ran the array (events 17,
// resync finished). Rows 0x110-0x1ff are all ff.
const tv1Hex = `
fc 4e 2b a9 01 00 00 00  00 00 00 00 00 00 00 00
68 65 ed e1 f1 a7 6b 48  45 07 1d 66 a5 57 55 bd
66 72 61 6d 65 77 6f 72  6b 3a 61 72 72 61 79 6e
61 6d 65 00 00 00 00 00  00 00 00 00 00 00 00 00
8e f3 b8 66 00 00 00 00  01 00 00 00 00 00 00 00
00 18 03 00 00 00 00 00  00 00 00 00 02 00 00 00
00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
00 08 00 00 00 00 00 00  00 18 03 00 00 00 00 00
08 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00  a5 cc 7f 3a a6 bc 32 e7
97 b7 72 89 75 54 b6 2f  00 00 08 00 10 00 00 00
8e f3 b8 66 00 00 00 00  11 00 00 00 00 00 00 00
ff ff ff ff ff ff ff ff  6f 63 64 60 80 00 00 00
00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
00 00 01 00 ff ff ff ff  ff ff ff ff ff ff ff ff
`

func tv1(t *testing.T) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(tv1Hex), ""))
	if err != nil {
		t.Fatal(err)
	}
	for len(b) < 512 {
		b = append(b, 0xff)
	}
	return b
}

// seq returns a reader of distinct bytes, so that every UUID drawn from it
// differs.
func seq() *bytes.Reader {
	b := make([]byte, 16*4096)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return bytes.NewReader(b)
}

// rep is n copies of v.
func rep(v uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func devs(sectors ...uint64) []Device {
	out := make([]Device, len(sectors))
	for i, s := range sectors {
		if s == 0 {
			out[i] = Device{Path: "missing", Missing: true}
			continue
		}
		out[i] = Device{Path: fmt.Sprintf("/dev/sd%c", 'a'+i), Sectors: s}
	}
	return out
}

func base(level string, n int, d []Device) Options {
	return Options{
		MDDevice:       "/dev/md0",
		Level:          level,
		RaidDevices:    n,
		SpareDevices:   len(d) - n,
		SystemHostname: "host",
		Now:            time.Unix(1700000000, 0),
		Rand:           seq(),
		Devices:        d,
	}
}

func mustPlan(t *testing.T, o Options) *Result {
	t.Helper()
	r, err := Plan(o)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	return r
}

// TestTV1 rebuilds TV1 byte for byte: the planner's superblock with the
// two fields the kernel changed afterwards (events, resync_offset) set as
// the dump has them.
func TestTV1(t *testing.T) {
	want := tv1(t)
	uuid := [16]byte{0x68, 0x65, 0xed, 0xe1, 0xf1, 0xa7, 0x6b, 0x48, 0x45, 0x07, 0x1d, 0x66, 0xa5, 0x57, 0x55, 0xbd}
	devUUID := want[0xa8:0xb8]
	o := Options{
		MDDevice:       "/dev/md0",
		Level:          "1",
		RaidDevices:    2,
		Name:           "arrayname",
		SystemHostname: "framework",
		UUID:           &uuid,
		Now:            time.Unix(1723397006, 0),
		Rand:           bytes.NewReader(append(append([]byte(nil), devUUID...), make([]byte, 16)...)),
		Devices: []Device{
			{Path: "/dev/loop2", Sectors: 100 * mib},
			{Path: "/dev/loop23", Sectors: 100 * mib},
		},
	}
	r := mustPlan(t, o)
	m := r.Members[0]
	if m.Path != "/dev/loop2" || m.SuperOffset != 4096 || len(m.SuperBytes) != 512 || len(m.Writes) != 1 {
		t.Fatalf("member 0: path %s, sb at %d, %d bytes, %d writes", m.Path, m.SuperOffset, len(m.SuperBytes), len(m.Writes))
	}
	if r.ResyncOffset != 0 || !r.NeedsResync {
		t.Errorf("fresh raid1: resync_offset %#x, want 0 (full resync)", r.ResyncOffset)
	}
	sb := *m.Superblock
	sb.Events = 17
	sb.ResyncOffset = superblock.MaxSector
	got := sb.MarshalWithChecksum()
	if sb.Checksum != 0x6064636f {
		t.Errorf("checksum %#x, want 0x6064636f", sb.Checksum)
	}
	if !bytes.Equal(got, want) {
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("byte %#x: got %#02x, want %#02x", i, got[i], want[i])
			}
		}
	}
	if r.ArraySizeKiB != 101376 || r.DataOffset != 2048 || r.ComponentSectors != 202752 {
		t.Errorf("array %d KiB, data offset %d, size %d", r.ArraySizeKiB, r.DataOffset, r.ComponentSectors)
	}
	// The superblock as planned (events 0, resync 0) carries its own
	// correct checksum.
	if superblock.Checksum(m.SuperBytes) != m.Superblock.Checksum {
		t.Errorf("planned bytes carry checksum %#x, computed %#x", m.Superblock.Checksum, superblock.Checksum(m.SuperBytes))
	}
	if r.Members[1].Superblock.DevNumber != 1 || r.Members[1].Role != 1 {
		t.Errorf("member 1: dev_number %d role %d", r.Members[1].Superblock.DevNumber, r.Members[1].Role)
	}
}

func TestDefaultDataOffset(t *testing.T) {
	tests := []struct {
		sectors, chunk, want uint64
	}{
		{100 * mib, 0, 2048},          // TV1: raid1 on 100 MiB
		{32 * mib, 0, 2048},           // fixture raid1
		{32 * mib, 512, 4096},         // fixture raid5 (headroom stays >= 2 chunks)
		{200 * mib, 512, 4096},        // md-format.md: 200 MiB raid5
		{10 * mib, 512, 4096},         // headroom cannot drop below 2 chunks
		{10 * mib, 0, 2048},           // raid1: headroom shrinks freely
		{100 * gib, 512, 133120},      // headroom 64 MiB, bitmap space 64 KiB
		{128 * gib, 512, 264192},      // headroom reaches 128 MiB
		{256 * gib, 512, 264192},      // md-format.md: >= ~256 GiB
		{4096 * gib, 0, 264192},       // capped
		{64 * mib, 64 * 1024, 264192}, // a 64M chunk keeps the headroom at 128 MiB
	}
	for _, tt := range tests {
		if got := defaultDataOffset(tt.sectors, tt.chunk); got != tt.want {
			t.Errorf("defaultDataOffset(%d, %dK) = %d, want %d", tt.sectors, tt.chunk, got, tt.want)
		}
	}
}

func TestArrayName(t *testing.T) {
	tests := []struct {
		dev, want, err string
	}{
		{"/dev/md0", "0", ""},
		{"/dev/md127", "127", ""},
		{"/dev/md_d0", "d0", ""},
		{"/dev/md/home", "home", ""},
		{"/dev/md/0", "0", ""},
		{"/dev/md/md0", "md0", ""},
		{"home", "home", ""},
		{"md0", "md0", ""},
		{"/dev/mdhome", "", "/dev/mdhome is an invalid name for an md device.  Try /dev/md/mdhome"},
		{"/dev/md", "", "/dev/md is an invalid name for an md device.  Try /dev/md/md"},
		{"/dev/sda1", "", "/dev/sda1 is an invalid name for an md device.  Try /dev/md/sda1"},
		{"/dev/md/", "", "/dev/md/ is an invalid name for an md device (empty!)."},
		{"/dev/md/a/b", "", "/dev/md/a/b is an invalid name for an md device."},
		{"a/b", "", "a/b is an invalid name for an md device."},
	}
	for _, tt := range tests {
		got, err := ArrayName(tt.dev)
		if tt.err != "" {
			if !refused(err) {
				t.Errorf("ArrayName(%q) err = %v, want %q", tt.dev, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ArrayName(%q) = %q, %v; want %q", tt.dev, got, err, tt.want)
		}
	}
}

func TestStoredName(t *testing.T) {
	tests := []struct {
		name, homehost, want string
	}{
		{"0", "mdvm", "mdvm:0"},
		{"arrayname", "framework", "framework:arrayname"},
		{"data", "", "data"},
		{"data", "any", "any:data"},
		{"other:data", "mdvm", "other:data"},
		{strings.Repeat("n", 26), "host", "host:" + strings.Repeat("n", 26)}, // 31 bytes
		{strings.Repeat("n", 27), "host", strings.Repeat("n", 27)},           // 32 would not fit
		{strings.Repeat("n", 32), "", strings.Repeat("n", 31)},
		{"x", strings.Repeat("h", 31), "x"},
	}
	for _, tt := range tests {
		if got := StoredName(tt.name, tt.homehost); got != tt.want {
			t.Errorf("StoredName(%q, %q) = %q, want %q", tt.name, tt.homehost, got, tt.want)
		}
	}
	hh := []struct{ in, sys, want string }{
		{"", "box", "box"},
		{"<system>", "box", "box"},
		{"<SYSTEM>", "box", "box"},
		{"<ignore>", "box", "box"},
		{"<none>", "box", ""},
		{"any", "box", "any"},
		{"other", "box", "other"},
		{"", "", ""},
	}
	for _, tt := range hh {
		sys := func() (string, error) { return tt.sys, nil }
		if got := ResolveHomehost(tt.in, tt.in != "", nil, sys); got != tt.want {
			t.Errorf("ResolveHomehost(%q, %q) = %q, want %q", tt.in, tt.sys, got, tt.want)
		}
	}
}

func TestNameInPlan(t *testing.T) {
	tests := []struct {
		mddev, name, homehost, want string
	}{
		{"/dev/md0", "", "", "host:0"},
		{"/dev/md/home", "", "", "host:home"},
		{"/dev/md/home", "", "any", "any:home"},
		{"/dev/md/home", "", "<none>", "home"},
		{"/dev/md0", "data", "", "host:data"},
		{"", "data", "", "host:data"},
	}
	for _, tt := range tests {
		o := base("raid1", 2, devs(64*mib, 64*mib))
		o.MDDevice, o.Name, o.Homehost = tt.mddev, tt.name, tt.homehost
		r := mustPlan(t, o)
		if r.Name != tt.want || r.Members[1].Superblock.Name() != tt.want {
			t.Errorf("%q --name=%q --homehost=%q: stored %q, want %q", tt.mddev, tt.name, tt.homehost, r.Name, tt.want)
		}
	}
}

func TestLayouts(t *testing.T) {
	parse := []struct {
		level int
		in    string
		want  uint32
		err   string
	}{
		{5, "left-symmetric", 2, ""},
		{5, "ls", 2, ""},
		{5, "la", 0, ""},
		{5, "ra", 1, ""},
		{5, "rs", 3, ""},
		{5, "default", 2, ""},
		{5, "parity-first", 4, ""},
		{5, "parity-last", 5, ""},
		{5, "ddf-zero-restart", 1, ""},
		{5, "ddf-N-restart", 0, ""},
		{5, "ddf-N-continue", 2, ""},
		{5, "left-symmetric-6", 0, "layout left-symmetric-6 not understood for raid5."},
		{5, "LS", 0, "layout LS not understood for raid5."},
		{6, "ddf-zero-restart", 8, ""},
		{6, "ddf-N-restart", 9, ""},
		{6, "ddf-N-continue", 10, ""},
		{6, "left-asymmetric-6", 16, ""},
		{6, "right-symmetric-6", 19, ""},
		{6, "parity-first-6", 20, ""},
		{6, "parity-last", 5, ""},
		{10, "n2", 0x102, ""},
		{10, "f2", 0x201, ""},
		{10, "o2", 0x10201, ""},
		{10, "n3", 0x103, ""},
		{10, "f3", 0x301, ""},
		{10, "n+2", 0x102, ""},
		{10, "x2", 0, "layout for raid10 must be 'nNN', 'oNN' or 'fNN' where NN is a number, not x2"},
		{10, "n0", 0, "layout for raid10 must be 'nNN', 'oNN' or 'fNN' where NN is a number, not n0"},
		{10, "n201", 0, "layout for raid10 must be 'nNN', 'oNN' or 'fNN' where NN is a number, not n201"},
		{10, "n2x", 0, "layout for raid10 must be 'nNN', 'oNN' or 'fNN' where NN is a number, not n2x"},
		{0, "original", 1, ""},
		{0, "alternate", 2, ""},
		{0, "1", 1, ""},
		{0, "2", 2, ""},
		{0, "dangerous", 0, ""},
		{0, "n2", 0, "layout n2 not understood for raid0."},
		{1, "n2", 0, "layout not meaningful for raid1 arrays."},
		{4, "ls", 0, "layout not meaningful for raid4 arrays."},
		{-1, "ls", 0, "layout not meaningful for linear arrays."},
	}
	for _, tt := range parse {
		got, err := ParseLayout(tt.level, tt.in)
		if tt.err != "" {
			if !refused(err) {
				t.Errorf("ParseLayout(%d, %q) err = %v, want %q", tt.level, tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseLayout(%d, %q) = %#x, %v; want %#x", tt.level, tt.in, got, err, tt.want)
		}
	}
	names := []struct {
		level  int
		layout uint32
		want   string
	}{
		{5, 0, "left-asymmetric"},
		{5, 2, "left-symmetric"},
		{5, 5, "parity-last"},
		{5, 8, "-unknown-"},
		{6, 2, "left-symmetric"},
		{6, 9, "ddf-N-restart"},
		{6, 18, "left-symmetric-6"},
		{6, 20, "parity-first-6"},
		{6, 21, "-unknown-"},
		{10, 0x102, "near=2"},
		{10, 0x201, "far=2"},
		{10, 0x10201, "offset=2"},
		{10, 0x202, "near=2, far=2"},
		{10, 0x101, "NO REDUNDANCY"},
		{0, 1, "original"},
		{0, 2, "alternate"},
		{0, 0, "dangerous"},
		{0, 0xffffffff, "-unknown-"},
		{0, 7, "-unknown-"},
		{1, 0, ""},
		{-1, 0, ""},
	}
	for _, tt := range names {
		if got := LayoutName(tt.level, tt.layout); got != tt.want {
			t.Errorf("LayoutName(%d, %#x) = %q, want %q", tt.level, tt.layout, got, tt.want)
		}
	}
	defaults := map[int]uint32{0: 1, 1: 0, 4: 0, 5: 2, 6: 2, 10: 0x102, -1: 0}
	for l, want := range defaults {
		if got := DefaultLayout(l); got != want {
			t.Errorf("DefaultLayout(%d) = %#x, want %#x", l, got, want)
		}
	}
	for _, s := range []string{"linear", "raid0", "0", "stripe", "raid1", "1", "mirror", "raid4", "4", "raid5", "5", "raid6", "6", "raid10", "10"} {
		if _, err := ParseLevel(s); err != nil {
			t.Errorf("ParseLevel(%q): %v", s, err)
		}
	}
	if _, err := ParseLevel("RAID5"); !refusedAs(err, InvalidLevel, "RAID5") {
		t.Errorf("ParseLevel(RAID5) err = %v", err)
	}
	if n, _ := LevelName(6); n != "raid6" {
		t.Errorf("LevelName(6) = %q", n)
	}
	if n, _ := LevelName(0); n != "raid0" {
		t.Errorf("LevelName(0) = %q", n)
	}
	if len(LayoutNames(6)) != 19 || LayoutNames(5)[0] != "left-asymmetric" || LayoutNames(1) != nil {
		t.Errorf("LayoutNames: %v / %v", LayoutNames(6), LayoutNames(5))
	}
}

func TestParseSizes(t *testing.T) {
	sectors := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"100", 200, true},
		{"100K", 200, true},
		{"1M", 2048, true},
		{"2G", 4 * 1024 * 1024, true},
		{"1T", 2 * 1024 * 1024 * 1024, true},
		{"8s", 8, true},
		{"7s", 7, true},
		{" 5", 10, true},
		{"+5", 10, true},
		{"0", 0, false},
		{"-4", 0, false},
		{"", 0, false},
		{"K", 0, false},
		{"1k", 0, false},
		{"1m", 0, false},
		{"1KB", 0, false},
		{"1.5M", 0, false},
		{"0x10", 0, false},
		{"99999999999999999999", 0, false},
		{"9000000000T", 0, false},
	}
	for _, tt := range sectors {
		got, err := ParseSectors(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseSectors(%q) = %d, %v; want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidSize) {
			t.Errorf("ParseSectors(%q) err %v is not ErrInvalidSize", tt.in, err)
		}
	}
	sizes := []struct {
		in   string
		want uint64
		err  string
	}{
		{"1024", 1024, ""},
		{"1M", 1024, ""},
		{"9s", 4, ""},
		{"7s", 0, "invalid size: 7s"},
		{"x", 0, "invalid size: x"},
	}
	for _, tt := range sizes {
		got, err := ParseSize(tt.in)
		if tt.err != "" {
			if !refused(err) {
				t.Errorf("ParseSize(%q) err = %v, want %q", tt.in, err, tt.err)
			}
		} else if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	chunks := []struct {
		in   string
		want uint64
		err  string
	}{
		{"512", 512, ""},
		{"64K", 64, ""},
		{"1M", 1024, ""},
		{"4", 4, ""},
		{"2", 0, "invalid chunk/rounding value: 2"},
		{"9s", 0, "invalid chunk/rounding value: 9s"},
		{"12", 12, ""}, // mdadm accepts; Plan refuses it for raid4/5/6/10
	}
	for _, tt := range chunks {
		got, err := ParseChunk(tt.in)
		if tt.err != "" {
			if !refused(err) {
				t.Errorf("ParseChunk(%q) err = %v, want %q", tt.in, err, tt.err)
			}
		} else if err != nil || got != tt.want {
			t.Errorf("ParseChunk(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	bchunks := []struct {
		in   string
		want uint64
		err  string
	}{
		{"64M", 64 << 20, ""},
		{"4", 4096, ""},
		{"1s", 512, ""},
		{"3", 0, "invalid bitmap chunksize: 3"},
		{"0", 0, "invalid bitmap chunksize: 0"},
	}
	for _, tt := range bchunks {
		got, err := ParseBitmapChunk(tt.in)
		if tt.err != "" {
			if !refused(err) {
				t.Errorf("ParseBitmapChunk(%q) err = %v, want %q", tt.in, err, tt.err)
			}
		} else if err != nil || got != tt.want {
			t.Errorf("ParseBitmapChunk(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestPlanErrors(t *testing.T) {
	d2 := devs(64*mib, 64*mib)
	d4 := devs(64*mib, 64*mib, 64*mib, 64*mib)
	tests := []struct {
		name   string
		mod    func(o *Options)
		want   string
		status int
	}{
		{"no level", func(o *Options) { o.Level = "" }, "a RAID level is needed to create an array.", 1},
		{"bad level", func(o *Options) { o.Level = "raid7" }, "invalid raid level: raid7", 2},
		{"faulty", func(o *Options) { o.Level = "faulty" }, "level faulty is not supported", 2},
		{"container", func(o *Options) { o.Level = "container" }, "1.x metadata does not support containers", 1},
		{"metadata", func(o *Options) { o.Metadata = "2.0" }, "unrecognised metadata identifier: 2.0", 2},
		{"metadata ddf", func(o *Options) { o.Metadata = "ddf" }, "ddf metadata is not supported", 2},
		{"0.90 raid0", func(o *Options) { o.Metadata = "0.90"; o.Level = "0" }, "0.90 metadata does not support layouts for RAID0", 1},
		{"0.90 28 devices", func(o *Options) {
			o.Metadata = "0.90"
			o.Level = "1"
			o.RaidDevices = 28
			o.Devices = devs(make([]uint64, 28)...)
		}, "0.90 metadata supports at most 27 devices per array", 1},
		{"0.90 size 4T", func(o *Options) { o.Metadata = "00.90"; o.SizeKiB = 4 << 30 }, "0.90 metadata supports at most 4 terabytes per device", 1},
		{"0.90 data offset", func(o *Options) { o.Metadata = "0"; o.DataOffset = 2048 }, "data-offset not support for 0.90", 1},
		{"0.90 spares", func(o *Options) {
			o.Metadata = "0.90"
			o.RaidDevices = 2
			o.SpareDevices = 26
			o.Devices = devs(rep(64*mib, 28)...)
		}, "Too many devices: 0.90 metadata only supports 27", 1},
		{"0.90 too small", func(o *Options) { o.Metadata = "0.90"; o.Devices = devs(64*mib, 100) }, "/dev/sdb is not suitable for this array.\ncreate aborted", 1},
		{"layout raid1", func(o *Options) { o.Layout = "n2" }, "layout not meaningful for raid1 arrays.", 2},
		{"chunk raid1", func(o *Options) { o.ChunkKiB = 64 }, "specifying chunk size is forbidden for this level", 1},
		{"chunk small", func(o *Options) { o.Level = "raid0"; o.ChunkKiB = 2 }, "invalid chunk/rounding value: 2K", 2},
		{"chunk not pow2", func(o *Options) { o.Level = "raid5"; o.ChunkKiB = 48 }, "chunk size 48K is not a power of 2, which raid5 requires", 1},
		{"name long", func(o *Options) { o.Name = strings.Repeat("x", 33) }, "name '" + strings.Repeat("x", 33) + "' is too long, 32 chars max.", 2},
		{"bitmap file raid0", func(o *Options) { o.Level = "0"; o.Bitmap = "/tmp/bm" }, "bitmaps not meaningful with level raid0", 1},
		{"bitmap typo", func(o *Options) { o.Bitmap = "intern" }, "bitmap file must contain a '/', or be 'internal', or be 'clustered', or 'none'\n       not 'intern'", 2},
		{"bitmap chunk", func(o *Options) { o.Bitmap = "internal"; o.BitmapChunk = 3000 }, "invalid bitmap chunksize: 3000", 2},
		{"n1", func(o *Options) { o.RaidDevices = 1; o.SpareDevices = 1 }, "'1' is an unusual number of drives for an array, so it is probably\n     a mistake.  If you really mean it you will need to specify --force before\n     setting the number of drives.", 2},
		{"n0", func(o *Options) { o.RaidDevices = 0; o.SpareDevices = 2 }, "no raid-devices specified.", 1},
		{"spares raid0", func(o *Options) { o.Level = "raid0"; o.RaidDevices = 1; o.SpareDevices = 1; o.Force = true }, "raid level raid0 is incompatible with spare-devices setting.", 2},
		{"raid6 3", func(o *Options) { o.Level = "6"; o.RaidDevices = 2; o.SpareDevices = 0; o.Devices = d2 }, "at least 4 raid-devices needed for level 6", 1},
		{"raid5 1", func(o *Options) { o.Level = "5"; o.RaidDevices = 1; o.SpareDevices = 1; o.Force = true }, "at least 2 raid-devices needed for level 5", 1},
		{"too many devs", func(o *Options) { o.Devices = d4 }, "You have listed more devices (4) than are in the array(2)!", 1},
		{"too few devs", func(o *Options) { o.RaidDevices = 4 }, "You haven't given enough devices (real or missing) to create this array", 1},
		{"bitmap raid0", func(o *Options) { o.Level = "0"; o.Bitmap = "none" }, "bitmaps not meaningful with level raid0", 1},
		{"bitmap linear", func(o *Options) { o.Level = "linear"; o.Bitmap = "internal" }, "bitmaps not meaningful with level linear", 1},
		{"bitmap multipath", func(o *Options) { o.Level = "mp"; o.Bitmap = "internal" }, "bitmaps not meaningful with level multipath", 1},
		{"chunk multipath", func(o *Options) { o.Level = "multipath"; o.ChunkKiB = 64 }, "specifying chunk size is forbidden for this level", 1},
		{"spares multipath", func(o *Options) { o.Level = "multipath"; o.SpareDevices = 1; o.Devices = devs(64*mib, 64*mib, 64*mib) }, "This level does not support spare devices", 1},
		{"missing multipath", func(o *Options) { o.Level = "multipath"; o.Devices = devs(64*mib, 0) }, "This level does not support missing devices", 1},
		{"raid10 n3 on 2", func(o *Options) { o.Level = "10"; o.Layout = "n3" }, "that layout requires at least 3 devices", 1},
		{"raid10 n1", func(o *Options) { o.Level = "10"; o.Layout = "n1" }, "raid10 layout n1 has no redundancy", 1},
		{"size below chunk", func(o *Options) { o.Level = "0"; o.SizeKiB = 100 }, "Size cannot be smaller than chunk.", 1},
		{"duplicate", func(o *Options) {
			o.Devices = []Device{{Path: "/dev/x", Sectors: 64 * mib}, {Path: "/dev/x", Sectors: 64 * mib}}
		}, "device /dev/x is listed more than once (positions 1 and 2)", 1},
		{"too small", func(o *Options) { o.Devices = devs(64*mib, 1024) }, "device /dev/sdb is too small (512K) for required metadata!\n/dev/sdb is not suitable for this array.\ncreate aborted", 1},
		{"too small 1.0", func(o *Options) { o.Metadata = "1.0"; o.Devices = devs(64*mib, 20) }, "device /dev/sdb is too small (8K) for required metadata!\n/dev/sdb is not suitable for this array.\ncreate aborted", 1},
		{"smaller than size", func(o *Options) { o.SizeKiB = 40 * 1024; o.Devices = devs(64*mib, 32*mib) }, "/dev/sdb is smaller than given size. 31744K < 40960K + metadata\ncreate aborted", 1},
		{"all missing", func(o *Options) { o.Devices = devs(0, 0) }, "Subdevs can't be all missing", 1},
		{"missing raid0", func(o *Options) { o.Level = "0"; o.Devices = devs(64*mib, 0) }, "This level does not support missing devices", 1},
		{"raid1 all active missing", func(o *Options) { o.SpareDevices = 1; o.Devices = devs(0, 0, 64*mib) }, "too many missing devices for raid1: 2 of 2 raid devices missing, at most 1 allowed", 1},
		{"raid5 2 missing", func(o *Options) { o.Level = "5"; o.RaidDevices = 4; o.Devices = devs(64*mib, 0, 64*mib, 0) }, "too many missing devices for raid5: 2 of 4 raid devices missing, at most 1 allowed", 1},
		{"raid6 3 missing", func(o *Options) { o.Level = "6"; o.RaidDevices = 4; o.Devices = devs(64*mib, 0, 0, 0) }, "too many missing devices for raid6: 3 of 4 raid devices missing, at most 2 allowed", 1},
		{"raid10 pair missing", func(o *Options) { o.Level = "10"; o.RaidDevices = 4; o.Devices = devs(0, 0, 64*mib, 64*mib) }, "too many missing devices for raid10", 1},
		{"bad md name", func(o *Options) { o.MDDevice = "/dev/foo" }, "/dev/foo is an invalid name for an md device.  Try /dev/md/foo", 1},
		{"bitmap chunk too small", func(o *Options) { o.Bitmap = "internal"; o.BitmapChunk = 512 }, "Given bitmap chunk size not supported.", 1},
		{"data offset overlaps sb", func(o *Options) { o.DataOffset = 8 }, "data offset 8 sectors on /dev/sda overlaps the superblock", 1},
		{"bitmap over data", func(o *Options) { o.Bitmap = "internal"; o.DataOffset = 20 }, "internal bitmap does not fit before the data offset (20 sectors) on /dev/sda", 1},
		{"4Kn data offset", func(o *Options) { o.DataOffset = 2052; o.Devices[0].LogicalBlockSize = 4096 }, "data offset 2052 sectors is not a multiple of the 4096-byte logical block size of /dev/sda", 1},
		{"data offset 1.0", func(o *Options) { o.Metadata = "1.0"; o.DataOffset = 2048 }, "--data-offset cannot be used with 1.0 metadata", 1},
		{"raid0 dangerous multi-zone", func(o *Options) {
			o.Level, o.Layout, o.RaidDevices, o.SpareDevices = "0", "dangerous", 3, 0
			o.Devices = devs(64*mib, 96*mib, 128*mib)
		}, "members of different sizes need a raid0 layout, the md driver would refuse to run this array\nPlease use --layout=original or --layout=alternate", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base("raid1", 2, devs(64*mib, 64*mib))
			tt.mod(&o)
			r, err := Plan(o)
			if err == nil {
				t.Fatalf("Plan succeeded (%d members), want %q", len(r.Members), tt.want)
			}
			var pe *Refusal
			if !errors.As(err, &pe) {
				t.Fatalf("err %v is %T, want *Refusal", err, err)
			}
			if pe.Kind <= 0 || pe.Kind >= NumKinds {
				t.Errorf("refusal kind %d out of range", pe.Kind)
			}
			// The text (tt.want) and exit status (tt.status) are cmd's:
			// cmd.TestPlanRefusalText checks this table word for word.
			_, _ = tt.want, tt.status
		})
	}
}

// roles returns the first n dev_roles of a superblock.
func roles(sb *superblock.Superblock, n int) []uint16 { return sb.DevRoles[:n] }

func TestRaid5RecoverySpare(t *testing.T) {
	const S = superblock.RoleSpare
	tests := []struct {
		name       string
		mod        func(o *Options)
		numbers    map[string]uint32 // device -> dev_number
		roles      []uint16
		clean      bool
		spare      int // RecoverySpare
		slot       int
		spares     int
		missing    []int
		wantWarnOK bool
	}{
		{"default", func(o *Options) {}, map[string]uint32{"/dev/sda": 0, "/dev/sdb": 1, "/dev/sdc": 2, "/dev/sdd": 4},
			[]uint16{0, 1, 2, S, S}, true, 3, 3, 1, []int{3}, false},
		{"force", func(o *Options) { o.Force = true }, map[string]uint32{"/dev/sda": 0, "/dev/sdb": 1, "/dev/sdc": 2, "/dev/sdd": 3},
			[]uint16{0, 1, 2, 3, S}, false, -1, -1, 0, nil, false},
		{"assume-clean", func(o *Options) { o.AssumeClean = true }, map[string]uint32{"/dev/sdd": 3},
			[]uint16{0, 1, 2, 3, S}, true, -1, -1, 0, nil, false},
		{"with spare", func(o *Options) {
			o.SpareDevices = 1
			o.Devices = append(o.Devices, Device{Path: "/dev/sde", Sectors: 64 * mib})
		},
			map[string]uint32{"/dev/sdd": 5, "/dev/sde": 4},
			[]uint16{0, 1, 2, S, S, S}, true, 3, 3, 2, []int{3}, false},
		{"degraded", func(o *Options) { o.Devices[1] = Device{Path: "missing", Missing: true} },
			map[string]uint32{"/dev/sda": 0, "/dev/sdc": 2, "/dev/sdd": 3},
			[]uint16{0, S, 2, 3, S}, true, -1, -1, 0, []int{1}, false},
		{"raid4", func(o *Options) { o.Level = "4" }, map[string]uint32{"/dev/sdd": 4},
			[]uint16{0, 1, 2, S, S}, true, 3, 3, 1, []int{3}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base("raid5", 4, devs(64*mib, 64*mib, 64*mib, 64*mib))
			tt.mod(&o)
			r := mustPlan(t, o)
			got := map[string]uint32{}
			for _, m := range r.Members {
				got[m.Path] = m.DevNumber
				if m.Superblock.DevNumber != m.DevNumber {
					t.Errorf("%s: sb dev_number %d != %d", m.Path, m.Superblock.DevNumber, m.DevNumber)
				}
			}
			for d, n := range tt.numbers {
				if got[d] != n {
					t.Errorf("%s: dev_number %d, want %d", d, got[d], n)
				}
			}
			if fmt.Sprint(roles(r.Members[0].Superblock, len(tt.roles))) != fmt.Sprint(tt.roles) {
				t.Errorf("roles %v, want %v", roles(r.Members[0].Superblock, len(tt.roles)), tt.roles)
			}
			if (r.ResyncOffset == superblock.MaxSector) != tt.clean || r.NeedsResync == tt.clean {
				t.Errorf("resync_offset %#x, want clean=%v", r.ResyncOffset, tt.clean)
			}
			if r.RecoverySpare != tt.spare || r.RecoverySlot != tt.slot || r.SpareDisks != tt.spares {
				t.Errorf("recovery spare %d slot %d spares %d, want %d %d %d", r.RecoverySpare, r.RecoverySlot, r.SpareDisks, tt.spare, tt.slot, tt.spares)
			}
			if fmt.Sprint(r.MissingSlots) != fmt.Sprint(tt.missing) || r.Degraded != (len(tt.missing) > 0) {
				t.Errorf("missing slots %v degraded %v, want %v", r.MissingSlots, r.Degraded, tt.missing)
			}
			// The moved device is written last, as mdadm does.
			last := r.Members[len(r.Members)-1]
			if tt.spare >= 0 && last.Device != tt.spare {
				t.Errorf("last member written is %s, want the recovery spare", last.Path)
			}
		})
	}
}

func TestRaid6Missing(t *testing.T) {
	const S = superblock.RoleSpare
	// One missing: mdadm turns the last good device into a spare so the
	// kernel can start (recovery of both slots); two missing: clean as is.
	o := base("raid6", 4, devs(64*mib, 64*mib, 0, 64*mib))
	r := mustPlan(t, o)
	if r.ResyncOffset != superblock.MaxSector || r.RecoverySpare != 3 || r.RecoverySlot != 2 {
		t.Errorf("one missing: resync %#x spare %d slot %d", r.ResyncOffset, r.RecoverySpare, r.RecoverySlot)
	}
	if fmt.Sprint(roles(r.Members[0].Superblock, 5)) != fmt.Sprint([]uint16{0, 1, S, S, S}) {
		t.Errorf("one missing: roles %v", roles(r.Members[0].Superblock, 5))
	}
	if r.Members[2].Path != "/dev/sdd" || r.Members[2].DevNumber != 4 {
		t.Errorf("one missing: moved device %s number %d", r.Members[2].Path, r.Members[2].DevNumber)
	}
	// Missing in the last slot: the device before it becomes the spare.
	o = base("raid6", 4, devs(64*mib, 64*mib, 64*mib, 0))
	r = mustPlan(t, o)
	if r.RecoverySpare != 2 || fmt.Sprint(r.MissingSlots) != "[2 3]" {
		t.Errorf("last missing: spare %d missing %v", r.RecoverySpare, r.MissingSlots)
	}
	o = base("raid6", 4, devs(64*mib, 0, 64*mib, 0))
	r = mustPlan(t, o)
	if r.ResyncOffset != superblock.MaxSector || r.RecoverySpare != -1 {
		t.Errorf("two missing: resync %#x spare %d", r.ResyncOffset, r.RecoverySpare)
	}
	o = base("raid6", 4, devs(64*mib, 64*mib, 64*mib, 64*mib))
	r = mustPlan(t, o)
	if r.ResyncOffset != 0 || r.RecoverySpare != -1 || r.Degraded {
		t.Errorf("complete raid6: resync %#x spare %d", r.ResyncOffset, r.RecoverySpare)
	}
	// raid1 created degraded still asks for a resync (mdadm only marks
	// raid4/5/6 clean).
	o = base("raid1", 2, devs(64*mib, 0))
	r = mustPlan(t, o)
	if r.ResyncOffset != 0 || !r.Degraded || fmt.Sprint(r.MissingSlots) != "[1]" {
		t.Errorf("degraded raid1: resync %#x degraded %v", r.ResyncOffset, r.Degraded)
	}
}

func TestMetadataPlacement(t *testing.T) {
	tests := []struct {
		meta       string
		bitmap     string
		superOff   uint64 // sectors
		dataOff    uint64
		dataSize   uint64
		size       uint64
		bblOff     int32
		bitmapOff  int32
		bitmapArea int
	}{
		// 100 MiB raid1 members.
		{"1.2", "", 8, 2048, 202752, 202752, 16, 0, 0},
		{"1.1", "", 0, 2048, 202752, 202752, 16, 0, 0},
		{"1.0", "", 204784, 0, 204768, 204672, -8, 0, 0},
		{"1.2", "internal", 8, 2048, 202752, 202752, 16, 8, 4096},
		{"1.1", "internal", 0, 2048, 202752, 202752, 16, 8, 4096},
		{"1.0", "internal", 204784, 0, 204768, 204672, -8, -16, 4096},
	}
	for _, tt := range tests {
		t.Run(tt.meta+"-"+tt.bitmap, func(t *testing.T) {
			o := base("raid1", 2, devs(100*mib, 100*mib))
			o.Metadata, o.Bitmap = tt.meta, tt.bitmap
			r := mustPlan(t, o)
			sb := r.Members[1].Superblock
			if sb.SuperOffset != tt.superOff || sb.DataOffset != tt.dataOff || sb.DataSize != tt.dataSize || sb.Size != tt.size ||
				sb.BBLogOffset != tt.bblOff || sb.BBLogSize != 8 || sb.BitmapOffset != tt.bitmapOff {
				t.Errorf("super %d data %d+%d size %d bbl %d/%d bitmap %d; want %d %d+%d %d %d/8 %d",
					sb.SuperOffset, sb.DataOffset, sb.DataSize, sb.Size, sb.BBLogOffset, sb.BBLogSize, sb.BitmapOffset,
					tt.superOff, tt.dataOff, tt.dataSize, tt.size, tt.bblOff, tt.bitmapOff)
			}
			m := r.Members[1]
			if m.SuperOffset != int64(tt.superOff)*512 || m.Writes[0].Offset != m.SuperOffset {
				t.Errorf("superblock write at %d, want %d", m.SuperOffset, tt.superOff*512)
			}
			if len(m.BitmapBytes) != tt.bitmapArea {
				t.Fatalf("bitmap area %d bytes, want %d", len(m.BitmapBytes), tt.bitmapArea)
			}
			if tt.bitmapArea == 0 {
				if sb.FeatureMap != 0 || len(m.Writes) != 1 {
					t.Errorf("feature map %#x, %d writes", sb.FeatureMap, len(m.Writes))
				}
				return
			}
			if sb.FeatureMap != superblock.FeatureBitmapOffset || len(m.Writes) != 2 {
				t.Errorf("feature map %#x, %d writes", sb.FeatureMap, len(m.Writes))
			}
			wantAt := (int64(tt.superOff) + int64(tt.bitmapOff)) * 512
			if m.BitmapOffset != wantAt || m.Writes[1].Offset != wantAt {
				t.Errorf("bitmap written at %d, want %d", m.BitmapOffset, wantAt)
			}
			h, err := bitmap.Parse(m.BitmapBytes)
			if err != nil {
				t.Fatal(err)
			}
			if h.ChunkSize != 64<<20 || h.SyncSize != tt.size || h.DaemonSleep != 5 || h.UUID != sb.SetUUID ||
				h.Version != 4 || h.Events != 0 || h.State != 0 {
				t.Errorf("bitmap header %+v", h)
			}
			for i, b := range m.BitmapBytes[bitmap.HeaderSize:] {
				if b != 0xff {
					t.Fatalf("bitmap byte %d = %#x, want 0xff", bitmap.HeaderSize+i, b)
				}
			}
			// Nothing written overlaps data or the superblock.
			dataStart, dataEnd := int64(sb.DataOffset)*512, int64(sb.DataOffset+sb.DataSize)*512
			for _, w := range m.Writes {
				end := w.Offset + int64(len(w.Data))
				if w.Offset < dataEnd && end > dataStart {
					t.Errorf("write [%d,%d) overlaps data [%d,%d)", w.Offset, end, dataStart, dataEnd)
				}
			}
			if tt.bitmapOff < 0 && m.BitmapOffset+int64(len(m.BitmapBytes)) > m.SuperOffset+int64(sb.BBLogOffset)*512 {
				t.Errorf("1.0 bitmap runs into the bad-block log")
			}
		})
	}
}

func TestStripedSizes(t *testing.T) {
	tests := []struct {
		name      string
		level     string
		layout    string
		chunk     uint64
		sizes     []uint64
		meta      string
		wantSize  uint64 // sb size (sectors)
		wantArray uint64 // KiB
		wantBM    uint64 // bitmap sync_size when a bitmap is forced
		feature   uint32
		bbl       int32
	}{
		{"raid5 3x200M", "5", "", 0, []uint64{200 * mib, 200 * mib, 200 * mib}, "", 405504, 405504, 405504, 0, 16},
		{"raid6 unequal", "6", "", 64, []uint64{100 * mib, 100 * mib, 120 * mib, 100 * mib}, "", 202752, 202752, 202752, 0, 16},
		{"raid10 n2 x3", "10", "", 0, []uint64{100 * mib, 100 * mib, 100 * mib}, "", 200704, 150528, 301056, 0, 16},
		// raid10 f2 on 3 devices of 195 chunks: mdadm's bitmap covers
		// size*3/2, the kernel's array is 291 chunks.
		{"raid10 f2 x3 odd", "10", "f2", 0, []uint64{203776, 203776, 203776}, "", 199680, 148992, 299520, 0, 16},
		{"raid10 o2 x2", "10", "o2", 0, []uint64{100 * mib, 100 * mib}, "", 200704, 100352, 200704, 0, 16},
		{"raid0 equal", "0", "", 0, []uint64{100 * mib, 100 * mib}, "", 0, 200704, 0, 0, 8},
		{"raid0 unequal", "0", "", 0, []uint64{100 * mib, 120 * mib, 140 * mib}, "", 0, 362496, 0, superblock.FeatureRAID0Layout, 8},
		{"raid0 alternate", "0", "alternate", 0, []uint64{100 * mib, 120 * mib}, "", 0, 221184, 0, superblock.FeatureRAID0Layout, 8},
		{"raid0 1.0", "0", "", 0, []uint64{100 * mib, 100 * mib}, "1.0", 0, 203776, 0, 0, -8},
		{"linear", "linear", "", 0, []uint64{100 * mib, 50 * mib}, "", 0, (202752 + 100352) / 2, 0, 0, 8},
		{"linear rounding", "linear", "", 64, []uint64{100*mib + 100, 50 * mib}, "", 0, (202752 + 100352) / 2, 0, 0, 8},
		// mdadm's tests' 20000K members (00multipath): the kernel's
		// Array Size 18976, Avail Dev Size 37952, bad-block log at 16
		{"multipath", "multipath", "", 0, []uint64{40000, 40000}, "", 37952, 18976, 0, 0, 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base(tt.level, len(tt.sizes), devs(tt.sizes...))
			o.Layout, o.ChunkKiB, o.Metadata = tt.layout, tt.chunk, tt.meta
			r := mustPlan(t, o)
			if r.ComponentSectors != tt.wantSize {
				t.Errorf("component size %d, want %d", r.ComponentSectors, tt.wantSize)
			}
			wantKernel := tt.wantSize
			if tt.name == "raid10 f2 x3 odd" {
				wantKernel = 194 * 1024 // the driver uses 194 of the 195 chunks
			}
			if r.KernelComponentSectors != wantKernel {
				t.Errorf("kernel component size %d, want %d", r.KernelComponentSectors, wantKernel)
			}
			if r.ArraySizeKiB != tt.wantArray {
				t.Errorf("array %d KiB, want %d", r.ArraySizeKiB, tt.wantArray)
			}
			wantLayout := DefaultLayout(r.Level)
			if tt.layout != "" {
				wantLayout, _ = ParseLayout(r.Level, tt.layout)
			}
			for _, m := range r.Members {
				if m.Superblock.Layout != wantLayout || r.Layout != wantLayout {
					t.Errorf("%s: layout %#x, want %#x", m.Path, m.Superblock.Layout, wantLayout)
				}
				if m.Superblock.FeatureMap != tt.feature || m.Superblock.BBLogOffset != tt.bbl {
					t.Errorf("%s: feature %#x bbl %d, want %#x %d", m.Path, m.Superblock.FeatureMap, m.Superblock.BBLogOffset, tt.feature, tt.bbl)
				}
			}
			if r.Level > 0 {
				o.Rand = seq()
				o.Bitmap = "internal"
				rb := mustPlan(t, o)
				if rb.BitmapSyncSize != tt.wantBM {
					t.Errorf("bitmap sync_size %d, want %d", rb.BitmapSyncSize, tt.wantBM)
				}
			}
		})
	}
}

func TestAutoBitmapAndWarnings(t *testing.T) {
	big := uint64(201 * gib)
	o := base("raid1", 2, devs(big, big))
	r := mustPlan(t, o)
	if !r.Bitmap || !r.AutoBitmap || r.BitmapChunk != 64<<20 {
		t.Errorf("201 GiB raid1 without --bitmap: bitmap %v auto %v chunk %d", r.Bitmap, r.AutoBitmap, r.BitmapChunk)
	}
	sb := r.Members[0].Superblock
	if sb.DataOffset != 264192 || sb.BBLogOffset != 8+8 || sb.BitmapOffset != 8 {
		// bitmap of ceil(size/64MiB) bits fits one 4 KiB block
		t.Errorf("data offset %d, bbl %d, bitmap %d", sb.DataOffset, sb.BBLogOffset, sb.BitmapOffset)
	}
	o.Bitmap, o.Rand = "none", seq()
	r = mustPlan(t, o)
	if r.Bitmap || r.Members[0].Superblock.BBLogOffset != 264 {
		t.Errorf("--bitmap=none: bitmap %v bbl %d (want 264: room for a later bitmap)", r.Bitmap, r.Members[0].Superblock.BBLogOffset)
	}
	o = base("raid0", 2, devs(big, big))
	if r = mustPlan(t, o); r.Bitmap {
		t.Error("raid0 got a bitmap")
	}
	o = base("raid1", 2, devs(100*gib, 100*gib))
	if r = mustPlan(t, o); r.Bitmap {
		t.Error("100 GiB raid1 got a bitmap (only > 100 GiB components do)")
	}
	// Unequal members: the 1% warning; metadata not given: the boot note.
	o = base("raid1", 2, devs(64*mib, 80*mib))
	r = mustPlan(t, o)
	if len(r.Warnings) != 2 || r.Warnings[0] != (Warning{Kind: BootNote}) ||
		r.Warnings[1] != (Warning{Kind: LargestExceedsSize, Device: "/dev/sdb", SizeKiB: 64512}) || !r.DefaultedMetadata {
		t.Errorf("warnings %+v", r.Warnings)
	}
	o.Metadata, o.Rand = "1.2", seq()
	r = mustPlan(t, o)
	if len(r.Warnings) != 1 || r.Warnings[0].Kind != LargestExceedsSize || r.DefaultedMetadata {
		t.Errorf("with -e 1.2: warnings %+v", r.Warnings)
	}
}

func TestMaxDevAndRandom(t *testing.T) {
	n := 130
	sizes := make([]uint64, n)
	for i := range sizes {
		sizes[i] = 64 * mib
	}
	o := base("raid1", n, devs(sizes...))
	for i := range o.Devices {
		o.Devices[i].Path = fmt.Sprintf("/dev/d%d", i)
	}
	o.Force = true
	r := mustPlan(t, o)
	if r.Members[0].Superblock.MaxDev != 384 || len(r.Members[0].SuperBytes) != 1024 {
		t.Errorf("130 devices: max_dev %d, %d bytes", r.Members[0].Superblock.MaxDev, len(r.Members[0].SuperBytes))
	}
	// UUIDs: set UUID first, then one per member in write order.
	src := make([]byte, 16*(n+1))
	for i := range src {
		src[i] = byte(i / 16)
	}
	o.Rand = bytes.NewReader(src)
	r = mustPlan(t, o)
	if r.UUID != [16]byte{} {
		t.Errorf("set uuid %x, want the first 16 random bytes", r.UUID)
	}
	for i, m := range r.Members {
		if m.Superblock.DeviceUUID[0] != byte(i+1) || m.Superblock.SetUUID != r.UUID {
			t.Fatalf("member %d: device uuid %x", i, m.Superblock.DeviceUUID)
		}
	}
	o.Rand = bytes.NewReader(make([]byte, 20))
	if _, err := Plan(o); err == nil {
		t.Error("short random source: no error")
	}
	// Metadata spellings.
	for spell, minor := range map[string]int{"": 2, "1": 2, "default": 2, "1.2": 2, "1.02": 2, "01.2": 2, "1.1": 1, "1.01": 1, "1.0": 0, "1.00": 0} {
		o := base("raid1", 2, devs(64*mib, 64*mib))
		o.Metadata = spell
		r := mustPlan(t, o)
		if r.Minor != minor || r.Metadata != fmt.Sprintf("1.%d", minor) {
			t.Errorf("-e %q: minor %d (%s), want %d", spell, r.Minor, r.Metadata, minor)
		}
	}
	// An explicit data offset is used for every member.
	o = base("raid5", 3, devs(64*mib, 64*mib, 80*mib))
	o.DataOffset = 4096 + 2048
	r = mustPlan(t, o)
	for _, m := range r.Members {
		if m.Superblock.DataOffset != 6144 {
			t.Errorf("%s: data offset %d", m.Path, m.Superblock.DataOffset)
		}
	}
	if r.Members[2].Superblock.DataSize != 80*mib-6144 {
		t.Errorf("data_size %d uses the member's own size", r.Members[2].Superblock.DataSize)
	}
}

// refused reports whether err is a typed refusal (the wording is cmd's,
// tested there).
func refused(err error) bool {
	var r *Refusal
	return errors.As(err, &r) && r.Kind > 0 && r.Kind < NumKinds
}

// refusedAs reports whether err is a refusal of kind k about arg.
func refusedAs(err error, k Kind, arg string) bool {
	var r *Refusal
	return errors.As(err, &r) && r.Kind == k && r.Arg == arg
}
