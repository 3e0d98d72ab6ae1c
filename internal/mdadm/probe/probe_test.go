package probe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdadm/plan"
	"mdtool/superblock"
)

// sparse is an in-memory device of Size bytes: zeros except the regions
// written.
type sparse struct {
	size    int64
	regions map[int64][]byte
}

func newSparse(size int64) *sparse { return &sparse{size: size, regions: map[int64][]byte{}} }

func (s *sparse) put(off int64, b []byte) *sparse {
	s.regions[off] = append([]byte(nil), b...)
	return s
}

func (s *sparse) ReadAt(p []byte, off int64) (int, error) {
	if off >= s.size {
		return 0, io.EOF
	}
	n := len(p)
	if off+int64(n) > s.size {
		n = int(s.size - off)
	}
	clear(p[:n])
	for ro, b := range s.regions {
		lo, hi := max(off, ro), min(off+int64(n), ro+int64(len(b)))
		if lo < hi {
			copy(p[lo-off:hi-off], b[lo-ro:hi-ro])
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

const mib = 1 << 20

// planned returns the members' writes of a planned array on devices of
// devBytes bytes.
func planned(t *testing.T, meta, level string, n int, devBytes int64) (*plan.Result, []*sparse) {
	t.Helper()
	o := plan.Options{
		MDDevice: "/dev/md/probe", Metadata: meta, Level: level, RaidDevices: n,
		SystemHostname: "host", Now: time.Unix(1700000000, 0),
		UUID: &[16]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10},
	}
	for i := 0; i < n; i++ {
		o.Devices = append(o.Devices, plan.Device{Path: fmt.Sprintf("/dev/sd%c", 'a'+i), Sectors: uint64(devBytes / 512)})
	}
	r, err := plan.Plan(o)
	if err != nil {
		t.Fatal(err)
	}
	var out []*sparse
	for _, m := range r.Members {
		s := newSparse(devBytes)
		for _, w := range m.Writes {
			s.put(w.Offset, w.Data)
		}
		out = append(out, s)
	}
	return r, out
}

func le16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// block builds a byte slice of n bytes with fields at offsets.
func block(n int, fields map[int][]byte) []byte {
	b := make([]byte, n)
	for off, f := range fields {
		copy(b[off:], f)
	}
	return b
}

func extSB(compat, incompat, ro uint32, label string) []byte {
	return block(1024, map[int][]byte{
		56: le16(0xef53), 92: le32(compat), 96: le32(incompat), 100: le32(ro),
		104: {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 120: []byte(label),
	})
}

func v090(t *testing.T) []byte {
	t.Helper()
	sb := &superblock.SuperblockV090{
		MajorVersion: 0, MinorVersion: 90, SetUUID0: 0x11111111, SetUUID1: 0x22222222, SetUUID2: 0x33333333, SetUUID3: 0x44444444,
		Level: 1, RaidDisks: 2, NrDisks: 2,
	}
	sb.Magic = superblock.Magic
	return sb.MarshalWithChecksum()
}

func TestProbeSynthetic(t *testing.T) {
	r12, m12 := planned(t, "1.2", "raid5", 3, 64*mib)
	_, m11 := planned(t, "1.1", "raid1", 2, 64*mib)
	_, m10 := planned(t, "1.0", "raid1", 2, 64*mib+3*512) // odd size: 1.0 rounds
	uuid := superblock.FormatUUID(r12.UUID)

	bad := newSparse(64 * mib)
	for off, b := range m12[0].regions {
		b = append([]byte(nil), b...)
		if off == 4096 {
			b[0x20] ^= 1 // change the name, not the checksum
		}
		bad.put(off, b)
	}
	moved := newSparse(64*mib).put(0, m12[0].regions[4096]) // 1.2 sb at the 1.1 place
	combo := newSparse(64*mib).put(0, m12[0].regions[4096]).put(4096, m12[0].regions[4096])
	for off, b := range m11[0].regions {
		combo.put(off, b)
	}
	gptHdr := block(92, map[int][]byte{0: []byte("EFI PART"), 24: le64(1), 56: {0x28, 0x73, 0x2a, 0xc1, 0x1f, 0xf8, 0xd2, 0x11, 0xba, 0x4b, 0x00, 0xa0, 0xc9, 0x3e, 0xc9, 0x3b}})
	pmbr := block(512, map[int][]byte{446 + 4: {0xee}, 510: {0x55, 0xaa}})
	mbr := block(512, map[int][]byte{440: le32(0xcafe1234), 446: {0x80}, 446 + 4: {0x83}, 510: {0x55, 0xaa}})
	mbrEmpty := block(512, map[int][]byte{510: {0x55, 0xaa}})
	fat32 := block(512, map[int][]byte{0: {0xeb, 0x58, 0x90}, 67: le32(0x1234abcd), 71: []byte("BOOT       "), 82: []byte("FAT32   "), 510: {0x55, 0xaa}})
	fat16 := block(512, map[int][]byte{0: {0xeb, 0x3c, 0x90}, 39: le32(0x00010002), 43: []byte("NO NAME    "), 54: []byte("FAT16   "), 510: {0x55, 0xaa}})
	grubMBR := block(512, map[int][]byte{0: {0xeb, 0x63, 0x90}, 446: {0x80}, 446 + 4: {0x83}, 510: {0x55, 0xaa}})
	zfs := newSparse(8 * mib)
	for i := int64(0); i < 4; i++ {
		zfs.put(128<<10+i*1024, le64(0x00bab10c))
	}
	zfs2 := newSparse(8*mib).put(128<<10, le64(0x00bab10c)).put(129<<10, le64(0x00bab10c))
	luks2 := block(512, map[int][]byte{0: []byte("LUKS\xba\xbe"), 6: {0, 2}, 24: []byte("secret"), 168: []byte("8d1f7c56-aaaa-bbbb-cccc-0123456789ab")})
	lvm := block(512, map[int][]byte{0: []byte("LABELONE"), 8: le64(1), 24: []byte("LVM2 001"), 32: []byte("abcdefGHIJKLmnopQRSTuvwxYZ012345")})

	type want struct {
		typ, version, uuid, label, desc, note string
		off                                   int64
	}
	tests := []struct {
		name string
		dev  io.ReaderAt
		size int64
		want []want
	}{
		{"empty", newSparse(64 * mib), 64 * mib, nil},
		{"tiny", newSparse(100), 100, nil},
		{"md 1.2", m12[1], 64 * mib, []want{{typ: "linux_raid_member", version: "1.2", uuid: uuid, label: "host:probe", off: 4096,
			desc: "md superblock v1.2 (array " + uuid + ", name \"host:probe\", raid5, 3 devices)"}}},
		{"md 1.1", m11[0], 64 * mib, []want{{typ: "linux_raid_member", version: "1.1", uuid: uuid, label: "host:probe", off: 0}}},
		{"md 1.0", m10[1], 64*mib + 3*512, []want{{typ: "linux_raid_member", version: "1.0", uuid: uuid, off: ((64*mib+3*512)/512 - 16) &^ 7 * 512}}},
		{"md bad checksum", bad, 64 * mib, []want{{typ: "linux_raid_member", version: "1.2", note: "bad checksum", off: 4096,
			desc: "md superblock v1.2 (array " + uuid + ", name \"iost:probe\", raid5, 3 devices, bad checksum)"}}},
		{"md wrong place", moved, 64 * mib, nil},
		{"md 1.1 over stale copies", combo, 64 * mib, []want{{typ: "linux_raid_member", version: "1.1", off: 0}, {typ: "linux_raid_member", version: "1.2", off: 4096}}},
		{"md 0.90", newSparse(64*mib+5000).put(int64(superblock.Offset090(64*mib+5000)), v090(t)), 64*mib + 5000,
			[]want{{typ: "linux_raid_member", version: "0.90", uuid: "11111111:22222222:33333333:44444444", off: 64*mib - 64<<10,
				desc: "md superblock v0.90 (array 11111111:22222222:33333333:44444444, raid1, 2 devices)"}}},
		{"ext2", newSparse(mib).put(1024, extSB(0, 0x2, 0x3, "")), mib, []want{{typ: "ext2", off: 1080, uuid: "deadbeef-0102-0304-0506-0708090a0b0c", desc: "ext2 filesystem"}}},
		{"ext3", newSparse(mib).put(1024, extSB(0x4, 0x2, 0x3, "old")), mib, []want{{typ: "ext3", off: 1080, label: "old", desc: "ext3 filesystem (label \"old\")"}}},
		{"ext4", newSparse(mib).put(1024, extSB(0x4, 0x2c2, 0x73, "data")), mib, []want{{typ: "ext4", off: 1080, label: "data"}}},
		{"ext4 no journal", newSparse(mib).put(1024, extSB(0, 0x40, 0, "")), mib, []want{{typ: "ext4", off: 1080}}},
		{"jbd", newSparse(mib).put(1024, extSB(0x4, 0x8, 0, "")), mib, []want{{typ: "jbd", off: 1080, desc: "ext3/ext4 external journal"}}},
		{"xfs", newSparse(mib).put(0, block(512, map[int][]byte{0: []byte("XFSB"), 108: []byte("xlabel")})), mib, []want{{typ: "xfs", off: 0, label: "xlabel"}}},
		{"btrfs", newSparse(mib).put(65536, block(4096, map[int][]byte{64: []byte("_BHRfS_M"), 299: []byte("pool")})), mib, []want{{typ: "btrfs", off: 65600, label: "pool"}}},
		{"swap", newSparse(mib).put(1024, block(44, map[int][]byte{28: []byte("sw")})).put(4086, []byte("SWAPSPACE2")), mib, []want{{typ: "swap", off: 4086, label: "sw", version: "1", desc: "swap space (label \"sw\")"}}},
		{"swap 64K pages", newSparse(mib).put(65526, []byte("SWAPSPACE2")), mib, []want{{typ: "swap", off: 65526}}},
		{"swap old", newSparse(mib).put(4086, []byte("SWAP-SPACE")), mib, []want{{typ: "swap", off: 4086, version: "0"}}},
		{"vfat32", newSparse(mib).put(0, fat32), mib, []want{{typ: "vfat", version: "FAT32", off: 82, label: "BOOT", uuid: "1234-ABCD", desc: "vfat filesystem (FAT32) (label \"BOOT\")"}}},
		{"vfat16", newSparse(mib).put(0, fat16), mib, []want{{typ: "vfat", version: "FAT16", off: 54, uuid: "0001-0002"}}},
		{"ntfs", newSparse(mib).put(0, block(512, map[int][]byte{0: {0xeb, 0x52, 0x90}, 3: []byte("NTFS    "), 510: {0x55, 0xaa}})), mib, []want{{typ: "ntfs", off: 3}}},
		{"exfat", newSparse(mib).put(0, block(512, map[int][]byte{3: []byte("EXFAT   "), 510: {0x55, 0xaa}})), mib, []want{{typ: "exfat", off: 3}}},
		{"mbr", newSparse(mib).put(0, mbr), mib, []want{{typ: "dos", off: 510, uuid: "cafe1234", desc: "partition table (dos)"}}},
		{"grub mbr", newSparse(mib).put(0, grubMBR), mib, []want{{typ: "dos", off: 510}}},
		{"mbr no entries", newSparse(mib).put(0, mbrEmpty), mib, nil},
		{"gpt", newSparse(mib).put(0, pmbr).put(512, gptHdr), mib, []want{{typ: "PMBR", off: 510, desc: "protective MBR (gpt)"},
			{typ: "gpt", off: 512, uuid: "c12a7328-f81f-11d2-ba4b-00a0c93ec93b", desc: "partition table (gpt)"}}},
		{"gpt 4Kn", newSparse(mib).put(0, pmbr).put(4096, gptHdr), mib, []want{{typ: "PMBR", off: 510}, {typ: "gpt", off: 4096, desc: "partition table (gpt, 4096-byte sectors)"}}},
		{"gpt backup lba", newSparse(mib).put(512, block(92, map[int][]byte{0: []byte("EFI PART"), 24: le64(2047)})), mib, nil},
		{"luks1", newSparse(mib).put(0, block(512, map[int][]byte{0: []byte("LUKS\xba\xbe"), 6: {0, 1}, 168: []byte("uuid-1")})), mib, []want{{typ: "crypto_LUKS", version: "1", uuid: "uuid-1", off: 0, desc: "LUKS1 encrypted volume"}}},
		{"luks2", newSparse(mib).put(0, luks2), mib, []want{{typ: "crypto_LUKS", version: "2", label: "secret", uuid: "8d1f7c56-aaaa-bbbb-cccc-0123456789ab", off: 0}}},
		{"lvm2", newSparse(mib).put(512, lvm), mib, []want{{typ: "LVM2_member", off: 536, uuid: "abcdef-GHIJ-KLmn-opQR-STuv-wxYZ-012345", desc: "LVM2 physical volume"}}},
		{"lvm2 wrong sector", newSparse(mib).put(1024, lvm), mib, nil},
		{"iso9660", newSparse(mib).put(32768, block(2048, map[int][]byte{0: {1}, 1: []byte("CD001"), 40: []byte("CDROM                           ")})), mib, []want{{typ: "iso9660", off: 32769, label: "CDROM"}}},
		{"bcache", newSparse(mib).put(4096, block(208, map[int][]byte{24: bcacheMagic})), mib, []want{{typ: "bcache", off: 4120}}},
		{"reiserfs", newSparse(mib).put(65536+52, []byte("ReIsEr2Fs\x00")), mib, []want{{typ: "reiserfs", off: 65588}}},
		{"zfs", zfs, 8 * mib, []want{{typ: "zfs_member", off: 128 << 10}}},
		{"zfs too few", zfs2, 8 * mib, nil},
		{"md over ext4 and gpt", func() *sparse {
			s := newSparse(64*mib).put(0, pmbr).put(512, gptHdr).put(1024, extSB(0x4, 0x2c2, 0x73, ""))
			for off, b := range m12[2].regions {
				s.put(off, b)
			}
			return s
		}(), 64 * mib, []want{{typ: "PMBR", off: 510}, {typ: "gpt", off: 512}, {typ: "ext4", off: 1080}, {typ: "linux_raid_member", off: 4096}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Probe(tt.dev, tt.size)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d signatures %+v, want %d", len(got), got, len(tt.want))
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Type != w.typ || g.Offset != w.off {
					t.Errorf("[%d] %s at %d, want %s at %d", i, g.Type, g.Offset, w.typ, w.off)
				}
				check := func(field, got, want string) {
					if want != "" && got != want {
						t.Errorf("[%d] %s %s = %q, want %q", i, g.Type, field, got, want)
					}
				}
				check("version", g.Version, w.version)
				check("uuid", g.UUID, w.uuid)
				check("label", g.Label, w.label)
				check("description", g.Description, w.desc)
				check("note", g.Note, w.note)
				if g.Description == "" || g.Kind == "" || len(g.Magic) == 0 {
					t.Errorf("[%d] incomplete signature %+v", i, g)
				}
				// The magic bytes are really there.
				b := make([]byte, len(g.Magic))
				if _, err := tt.dev.ReadAt(b, g.Offset); err != nil || !bytes.Equal(b, g.Magic) {
					t.Errorf("[%d] %s: magic %x not at %d (found %x, %v)", i, g.Type, g.Magic, g.Offset, b, err)
				}
			}
		})
	}
}

type failingReader struct{}

func (failingReader) ReadAt(p []byte, off int64) (int, error) { return 0, errors.New("I/O error") }

func TestProbeReadError(t *testing.T) {
	_, err := Probe(failingReader{}, 64*mib)
	if !errors.Is(err, ErrRead) || !strings.Contains(err.Error(), "I/O error") {
		t.Fatalf("err = %v, want ErrRead wrapping the I/O error", err)
	}
}

// requireTool finds a host tool; without it the test is skipped, except
// under CI where it fails.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is needed in CI: %v", name, err)
		}
		t.Skipf("%s not installed", name)
	}
	return p
}

// blkid runs `blkid -p -o export` (low-level probe) on a file.
func blkid(t *testing.T, path string) map[string]string {
	t.Helper()
	bin := requireTool(t, "blkid")
	out, err := exec.Command(bin, "-p", "-o", "export", path).Output()
	if err != nil {
		t.Fatalf("blkid -p %s: %v", path, err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

// TestProbeRealFilesystems makes real filesystems and swap with the host
// tools and compares Probe with libblkid's low-level probe.
func TestProbeRealFilesystems(t *testing.T) {
	tests := []struct {
		tool  string
		args  []string
		size  int64
		typ   string
		label string
	}{
		{"mkfs.ext4", []string{"-q", "-F", "-L", "data"}, 16 * mib, "ext4", "data"},
		{"mkfs.ext4", []string{"-q", "-F", "-t", "ext3"}, 16 * mib, "ext3", ""},
		{"mkfs.ext4", []string{"-q", "-F", "-t", "ext2", "-L", "two"}, 16 * mib, "ext2", "two"},
		{"mkfs.vfat", []string{"-n", "ESP"}, 8 * mib, "vfat", "ESP"},
		{"mkfs.vfat", []string{"-F", "32", "-n", "BIG"}, 40 * mib, "vfat", "BIG"},
		{"mkswap", []string{"-L", "sw"}, 8 * mib, "swap", "sw"},
	}
	for _, tt := range tests {
		t.Run(tt.tool+"-"+tt.typ+"-"+tt.label, func(t *testing.T) {
			bin := requireTool(t, tt.tool)
			p := filepath.Join(t.TempDir(), "fs.img")
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, tt.size); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(bin, append(tt.args, p)...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", tt.tool, err, out)
			}
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := Probe(f, tt.size)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("got %+v, want one %s signature", got, tt.typ)
			}
			g := got[0]
			b := blkid(t, p)
			if g.Type != tt.typ || b["TYPE"] != tt.typ {
				t.Errorf("type %q, blkid %q, want %q", g.Type, b["TYPE"], tt.typ)
			}
			if g.Label != tt.label || b["LABEL"] != tt.label {
				t.Errorf("label %q, blkid %q, want %q", g.Label, b["LABEL"], tt.label)
			}
			if !strings.EqualFold(g.UUID, b["UUID"]) {
				t.Errorf("uuid %q, blkid %q", g.UUID, b["UUID"])
			}
			if tt.typ == "vfat" && g.Version != b["VERSION"] {
				t.Errorf("FAT version %q, blkid %q", g.Version, b["VERSION"])
			}
		})
	}
}

// TestProbePlannedMembersWithBlkid writes planned md members to files and
// checks that libblkid agrees on version, UUID and name.
func TestProbePlannedMembersWithBlkid(t *testing.T) {
	for _, meta := range []string{"1.0", "1.1", "1.2"} {
		t.Run(meta, func(t *testing.T) {
			r, members := planned(t, meta, "raid1", 2, 32*mib)
			p := filepath.Join(t.TempDir(), "m.img")
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(32 * mib); err != nil {
				t.Fatal(err)
			}
			for off, b := range members[0].regions {
				if _, err := f.WriteAt(b, off); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Probe(f, 32*mib)
			if err != nil || len(got) != 1 {
				t.Fatalf("Probe = %+v, %v", got, err)
			}
			b := blkid(t, p)
			if b["TYPE"] != "linux_raid_member" || b["VERSION"] != got[0].Version || b["LABEL"] != got[0].Label ||
				!sameUUID(b["UUID"], r.UUID) {
				t.Errorf("blkid %v, probe %+v", b, got[0])
			}
		})
	}
}

// sameUUID compares blkid's dashed UUID text with raw bytes.
func sameUUID(s string, u [16]byte) bool {
	return strings.ReplaceAll(s, "-", "") == fmt.Sprintf("%x", u[:])
}

func FuzzProbe(f *testing.F) {
	seed := func(s *sparse) []byte {
		b := make([]byte, s.size)
		s.ReadAt(b, 0)
		return b
	}
	f.Add(seed(newSparse(128<<10).put(1024, extSB(0x4, 0x2c2, 0x73, "x"))))
	f.Add(seed(newSparse(128<<10).put(0, block(512, map[int][]byte{440: le32(1), 446: {0x80}, 446 + 4: {0x83}, 510: {0x55, 0xaa}}))))
	f.Add(seed(newSparse(128<<10).put(65536+64, []byte("_BHRfS_M"))))
	f.Add(seed(newSparse(128<<10).put(32769, []byte("CD001"))))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Probe(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("Probe on an in-memory image: %v", err)
		}
		for _, s := range got {
			if s.Offset < 0 || s.Offset+int64(len(s.Magic)) > int64(len(data)) {
				t.Fatalf("signature %s at %d (+%d) outside the %d-byte image", s.Type, s.Offset, len(s.Magic), len(data))
			}
			if !bytes.Equal(data[s.Offset:s.Offset+int64(len(s.Magic))], s.Magic) {
				t.Fatalf("%s: magic %x not at %d", s.Type, s.Magic, s.Offset)
			}
		}
	})
}
