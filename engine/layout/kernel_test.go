package layout_test

// Kernel interop: the real md driver (Linux 6.1 in the mdvm VM) creates
// arrays on member images and writes a pattern in which every 512-byte
// sector carries its own array sector number. The host then checks, for
// every array sector, that package layout maps it to exactly the member
// and member sector where the kernel put it, and, for raid4/5/6, that the
// parity blocks on disk equal package parity's output for every stripe.
//
// All arrays go through one VM boot: members are GPT partitions of one
// sparse image (written here on the host; the guest kernel scans it at
// boot), because each extra virtio disk costs about as much boot time as
// creating and filling an array, and loop devices cost seconds each to set
// up and tear down under TCG.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"mdtool/engine/layout"
	"mdtool/engine/parity"
	"mdtool/internal/mdvm"
)

const mib = 1 << 20

type vmArray struct {
	name       string
	args       string  // mdadm --create arguments besides devices and metadata
	sizes      []int64 // member image sizes in bytes
	wantLevel  int
	wantLayout int // superblock layout field mdadm must record
	// raid0: the layout the kernel must actually use (0: don't check)
	wantRAID0Effective int
	// raid0: the member sizes make the original and alternate layouts
	// place some chunks differently, so the check tells them apart
	raid0Distinct bool
}

func r(n int, size int64) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = size
	}
	return s
}

// vmArrays are the arrays the VM creates, grouped by level family.
var vmArrays = [][]vmArray{
	{
		{name: "linear", args: "--level=linear --raid-devices=3", sizes: []int64{3 * mib, 4 * mib, 3*mib + 524<<10}, wantLevel: -1},
		{name: "raid0-orig", args: "--level=0 --layout=original --chunk=64 --raid-devices=4", sizes: []int64{3 * mib, 4 * mib, 4 * mib, 5 * mib}, wantLayout: 1, wantRAID0Effective: 1, raid0Distinct: true},
		{name: "raid0-alt", args: "--level=0 --layout=alternate --chunk=64 --raid-devices=4", sizes: []int64{3 * mib, 4 * mib, 4 * mib, 5 * mib}, wantLayout: 2, wantRAID0Effective: 2, raid0Distinct: true},
		{name: "raid0-equal", args: "--level=0 --chunk=32 --raid-devices=3", sizes: r(3, 3*mib), wantLayout: -2, wantRAID0Effective: 1},
		{name: "raid0-2zone-forced", args: "--level=0 --layout=alternate --chunk=16 --raid-devices=2", sizes: []int64{3 * mib, 5 * mib}, wantLayout: 2, wantRAID0Effective: 1},
		{name: "raid1", args: "--level=1 --raid-devices=3", sizes: []int64{3 * mib, 4 * mib, 3 * mib}, wantLevel: 1},
		{name: "raid4", args: "--level=4 --chunk=64 --raid-devices=4", sizes: r(4, 3*mib), wantLevel: 4, wantLayout: -2},
	},
	{
		{name: "raid5-la", args: "--level=5 --layout=la --chunk=64 --raid-devices=4", sizes: r(4, 3*mib), wantLevel: 5, wantLayout: 0},
		{name: "raid5-ra", args: "--level=5 --layout=ra --chunk=64 --raid-devices=4", sizes: r(4, 3*mib), wantLevel: 5, wantLayout: 1},
		{name: "raid5-ls", args: "--level=5 --layout=ls --chunk=64 --raid-devices=4", sizes: r(4, 3*mib), wantLevel: 5, wantLayout: 2},
		{name: "raid5-rs", args: "--level=5 --layout=rs --chunk=32 --raid-devices=4", sizes: r(4, 3*mib), wantLevel: 5, wantLayout: 3},
		{name: "raid5-parity-first", args: "--level=5 --layout=parity-first --chunk=64 --raid-devices=4", sizes: r(4, 3*mib), wantLevel: 5, wantLayout: 4},
		{name: "raid5-parity-last", args: "--level=5 --layout=parity-last --chunk=64 --raid-devices=4", sizes: r(4, 3*mib), wantLevel: 5, wantLayout: 5},
	},
	{
		{name: "raid6-ls", args: "--level=6 --layout=ls --chunk=64 --raid-devices=5", sizes: r(5, 3*mib), wantLevel: 6, wantLayout: 2},
		{name: "raid6-la", args: "--level=6 --layout=la --chunk=64 --raid-devices=5", sizes: r(5, 3*mib), wantLevel: 6, wantLayout: 0},
		{name: "raid6-parity-first", args: "--level=6 --layout=parity-first --chunk=64 --raid-devices=4", sizes: r(4, 3*mib), wantLevel: 6, wantLayout: 4},
		{name: "raid6-parity-last", args: "--level=6 --layout=parity-last --chunk=64 --raid-devices=4", sizes: r(4, 3*mib), wantLevel: 6, wantLayout: 5},
		{name: "raid6-ls6", args: "--level=6 --layout=left-symmetric-6 --chunk=64 --raid-devices=5", sizes: r(5, 3*mib), wantLevel: 6, wantLayout: 18},
	},
	{
		{name: "raid6-rs", args: "--level=6 --layout=rs --chunk=32 --raid-devices=4", sizes: r(4, 3*mib), wantLevel: 6, wantLayout: 3},
		{name: "raid6-ra6", args: "--level=6 --layout=right-asymmetric-6 --chunk=64 --raid-devices=4", sizes: r(4, 3*mib), wantLevel: 6, wantLayout: 17},
		{name: "raid6-pf6", args: "--level=6 --layout=parity-first-6 --chunk=64 --raid-devices=4", sizes: r(4, 3*mib), wantLevel: 6, wantLayout: 20},
		{name: "raid6-ddf-zero-restart", args: "--level=6 --layout=ddf-zero-restart --chunk=64 --raid-devices=4", sizes: r(4, 3*mib), wantLevel: 6, wantLayout: 8},
		{name: "raid6-ddf-N-restart", args: "--level=6 --layout=ddf-N-restart --chunk=64 --raid-devices=5", sizes: r(5, 3*mib), wantLevel: 6, wantLayout: 9},
		{name: "raid6-ddf-N-continue", args: "--level=6 --layout=ddf-N-continue --chunk=64 --raid-devices=4", sizes: r(4, 3*mib), wantLevel: 6, wantLayout: 10},
	},
	{
		{name: "raid10-n2", args: "--level=10 --layout=n2 --chunk=64 --raid-devices=4", sizes: r(4, 3*mib), wantLevel: 10, wantLayout: 0x102},
		{name: "raid10-f2", args: "--level=10 --layout=f2 --chunk=64 --raid-devices=4", sizes: r(4, 3*mib), wantLevel: 10, wantLayout: 0x201},
		{name: "raid10-o2", args: "--level=10 --layout=o2 --chunk=64 --raid-devices=4", sizes: r(4, 3*mib), wantLevel: 10, wantLayout: 0x10201},
		{name: "raid10-n3", args: "--level=10 --layout=n3 --chunk=32 --raid-devices=3", sizes: r(3, 3*mib), wantLevel: 10, wantLayout: 0x103},
		{name: "raid10-f2-odd", args: "--level=10 --layout=f2 --chunk=64 --raid-devices=5", sizes: r(5, 3*mib), wantLevel: 10, wantLayout: 0x201},
		{name: "raid10-n2-odd", args: "--level=10 --layout=n2 --chunk=64 --raid-devices=3", sizes: r(3, 3*mib), wantLevel: 10, wantLayout: 0x102},
	},
}

const patternSectors = 16 * mib / 512

// patternSector fills b (512 bytes) with the pattern of array sector s:
// 64 words, word i = 0xA5<<56 | s<<6 | i.
func patternSector(b []byte, s uint64) {
	for i := uint64(0); i < 64; i++ {
		binary.LittleEndian.PutUint64(b[i*8:], 0xA5<<56|s<<6|i)
	}
}

func TestKernelInterop(t *testing.T) {
	mdvm.Require(t)
	dir := t.TempDir()
	pattern := filepath.Join(dir, "pattern.img")
	buf := make([]byte, patternSectors*512)
	for s := uint64(0); s < patternSectors; s++ {
		patternSector(buf[s*512:], s)
	}
	if err := os.WriteFile(pattern, buf, 0o644); err != nil {
		t.Fatal(err)
	}

	// Lay the members out in one image, 1 MiB aligned.
	type region struct{ off, size int64 }
	var arrays []vmArray
	var regions [][]region
	var end int64
	var parts []gptPart
	var script strings.Builder
	script.WriteString("set -e\n")
	end = mib // GPT before the first partition
	for _, group := range vmArrays {
		for _, a := range group {
			var rs []region
			var devs []string
			for _, size := range a.sizes {
				rs = append(rs, region{end, size})
				end += (size + mib - 1) / mib * mib
				devs = append(devs, fmt.Sprintf("/dev/vdb%d", len(parts)+len(rs)))
			}
			for _, rg := range rs {
				parts = append(parts, gptPart{rg.off / 512, rg.size / 512})
			}
			arrays = append(arrays, a)
			regions = append(regions, rs)
			fmt.Fprintf(&script, `L="%s"
t0=$(cut -d" " -f1 /proc/uptime)
if ! mdadm --create /dev/md0 --run --assume-clean --metadata=1.2 --homehost=any --name=%s %s $L >/tmp/create.log 2>&1; then
  echo "CREATE FAILED %s"; cat /tmp/create.log; exit 1
fi
t1=$(cut -d" " -f1 /proc/uptime)
dd if=/dev/vda of=/dev/md0 bs=1M oflag=direct 2>/dev/null || true
sync
t2=$(cut -d" " -f1 /proc/uptime)
echo "ARRAY %s $(cat /sys/block/md0/size) $(cat /sys/block/md0/queue/minimum_io_size) $(cat /sys/block/md0/queue/optimal_io_size) create=$t0..$t1 write=..$t2"
mdadm --stop /dev/md0 >/dev/null 2>&1
`, strings.Join(devs, " "), a.name, a.args, a.name, a.name)
		}
	}
	big := filepath.Join(dir, "members.img")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	end += mib // room for the backup GPT
	if err := f.Truncate(end); err != nil {
		t.Fatal(err)
	}
	if err := writeGPT(f, end/512, parts); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	out := mdvm.MustExec(t, mdvm.Run{
		Disks:   []mdvm.Disk{{Path: pattern, Mode: mdvm.RO}, {Path: big}},
		Script:  script.String(),
		Timeout: 600 * time.Second,
	})
	t.Logf("%d arrays, VM %.1fs", len(arrays), time.Since(start).Seconds())
	reports := map[string][3]uint64{}
	for _, line := range strings.Split(string(out), "\n") {
		fs := strings.Fields(line)
		if len(fs) >= 5 && fs[0] == "ARRAY" {
			t.Log(line)
			var v [3]uint64
			for j := range v {
				v[j], _ = strconv.ParseUint(fs[2+j], 10, 64)
			}
			reports[fs[1]] = v
		}
	}
	for ai, a := range arrays {
		t.Run(a.name, func(t *testing.T) {
			rep, ok := reports[a.name]
			if !ok {
				t.Fatalf("no report from the guest; output:\n%s", out)
			}
			imgs := make([][]byte, len(regions[ai]))
			for i, rg := range regions[ai] {
				imgs[i] = make([]byte, rg.size)
				if _, err := f.ReadAt(imgs[i], rg.off); err != nil {
					t.Fatal(err)
				}
			}
			verifyArray(t, a, imgs, rep)
		})
	}
}

type member struct {
	img                  []byte
	level, layout        int32
	features             uint32
	size, dataOffset     uint64
	dataSize, chunk      uint64
	raidDisks, devNumber uint32
	role                 int
}

func readMember(t *testing.T, i int, img []byte) member {
	t.Helper()
	sb := img[4096:]
	le := binary.LittleEndian
	if le.Uint32(sb) != 0xa92b4efc {
		t.Fatalf("member %d: no v1.2 superblock", i)
	}
	m := member{
		img:        img,
		features:   le.Uint32(sb[0x08:]),
		level:      int32(le.Uint32(sb[0x48:])),
		layout:     int32(le.Uint32(sb[0x4C:])),
		size:       le.Uint64(sb[0x50:]),
		chunk:      uint64(le.Uint32(sb[0x58:])),
		raidDisks:  le.Uint32(sb[0x5C:]),
		dataOffset: le.Uint64(sb[0x80:]),
		dataSize:   le.Uint64(sb[0x88:]),
		devNumber:  le.Uint32(sb[0xA0:]),
	}
	m.role = int(le.Uint16(sb[0x100+2*m.devNumber:]))
	return m
}

func verifyArray(t *testing.T, a vmArray, imgs [][]byte, rep [3]uint64) {
	members := make([]member, len(imgs))
	for i, img := range imgs {
		members[i] = readMember(t, i, img)
	}
	m0 := members[0]
	if int(m0.level) != a.wantLevel {
		t.Fatalf("superblock level %d, want %d", m0.level, a.wantLevel)
	}
	if a.wantLayout != -2 && int(m0.layout) != a.wantLayout {
		t.Fatalf("superblock layout %#x, want %#x", m0.layout, a.wantLayout)
	}
	byRole := make([]*member, m0.raidDisks)
	p := layout.Params{
		Level:            layout.Level(m0.level),
		Layout:           int(m0.layout),
		ChunkSectors:     m0.chunk,
		RaidDisks:        int(m0.raidDisks),
		ComponentSectors: m0.size,
		DevSectors:       make([]uint64, m0.raidDisks),
	}
	if p.Level == layout.RAID0 && m0.features&0x1000 == 0 {
		p.Layout = -1 // super_1_validate: no MD_FEATURE_RAID0_LAYOUT
	}
	for i := range members {
		m := &members[i]
		if m.level != m0.level || m.layout != m0.layout || m.chunk != m0.chunk || m.raidDisks != m0.raidDisks || m.size != m0.size {
			t.Fatalf("member %d superblock geometry differs from member 0", i)
		}
		if m.role < 0 || m.role >= len(byRole) || byRole[m.role] != nil {
			t.Fatalf("member %d: bad or duplicate role %d", i, m.role)
		}
		byRole[m.role] = m
		p.DevSectors[m.role] = m.dataSize
	}
	g, err := layout.New(p)
	if err != nil {
		t.Fatalf("layout.New(%+v): %v", p, err)
	}
	t.Logf("level %d layout %#x chunk %d size %d data_offset %d: array %d sectors, io_min %d io_opt %d (kernel %d, %d, %d)",
		m0.level, m0.layout, m0.chunk, m0.size, m0.dataOffset, g.ArraySectors(), g.IOMin(), g.IOOpt(), rep[0], rep[1], rep[2])
	if g.ArraySectors() != rep[0] {
		t.Errorf("array size %d sectors, kernel %d", g.ArraySectors(), rep[0])
	}
	wantMin, wantOpt := g.IOMin(), g.IOOpt()
	if wantMin == 0 {
		wantMin = 512 // not set by md: stacked from the virtio members
	}
	if wantMin != rep[1] || wantOpt != rep[2] {
		t.Errorf("io_min/io_opt %d/%d, kernel %d/%d", wantMin, wantOpt, rep[1], rep[2])
	}
	if a.wantRAID0Effective != 0 {
		if eff := g.(*layout.RAID0Geometry).Layout(); eff != a.wantRAID0Effective {
			t.Errorf("effective raid0 layout %d, want %d", eff, a.wantRAID0Effective)
		}
	}
	if a.raid0Distinct {
		other := p
		other.Layout = 3 - g.(*layout.RAID0Geometry).Layout()
		og, err := layout.New(other)
		if err != nil {
			t.Fatal(err)
		}
		differ := 0
		for s := uint64(0); s < g.ArraySectors(); s += g.ChunkSectors() {
			l1, _ := g.Map(s, nil)
			l2, _ := og.Map(s, nil)
			if l1[0] != l2[0] {
				differ++
			}
		}
		if differ == 0 {
			t.Fatalf("original and alternate layouts coincide for these sizes; the check cannot tell them apart")
		}
		t.Logf("%d chunks map differently under the other raid0 layout", differ)
	}
	if g.ArraySectors() > patternSectors {
		t.Fatalf("array larger than the pattern disk")
	}

	// Every data sector is where Map says.
	want := make([]byte, 512)
	bad := 0
	locs := make([]layout.Loc, 0, g.MaxCopies())
	var checked uint64
	for s := uint64(0); s < g.ArraySectors(); {
		var run uint64
		locs, run = g.Map(s, locs)
		for i := uint64(0); i < run; i++ {
			patternSector(want, s+i)
			for _, l := range locs {
				m := byRole[l.Role]
				off := (m.dataOffset + l.Sector + i) * 512
				if off+512 > uint64(len(m.img)) || !bytes.Equal(m.img[off:off+512], want) {
					if bad < 5 {
						t.Errorf("array sector %d: not at role %d sector %d (found word %#x)", s+i, l.Role, l.Sector+i, firstWord(m.img, off))
					}
					bad++
				}
				checked++
			}
		}
		s += run
	}
	if bad > 0 {
		t.Fatalf("%d of %d sector copies misplaced", bad, checked)
	}

	st, ok := g.(*layout.Striped)
	if !ok {
		return
	}
	// Every stripe's parity matches package parity.
	chunk := int(st.ChunkSectors() * 512)
	row := st.NewRow()
	blocks := make([][]byte, st.SyndromeDisks())
	dataBlocks := make([][]byte, st.DataDisks())
	pBuf, qBuf := make([]byte, chunk), make([]byte, chunk)
	chunkOf := func(role int) []byte {
		m := byRole[role]
		off := (m.dataOffset + row.Sector) * 512
		return m.img[off : off+uint64(chunk)]
	}
	badP, badQ := 0, 0
	for stripe := uint64(0); stripe < st.Stripes(); stripe++ {
		st.Row(stripe, row)
		for dd, role := range row.Data {
			dataBlocks[dd] = chunkOf(role)
		}
		parity.Xor(pBuf, dataBlocks)
		if !bytes.Equal(pBuf, chunkOf(row.P)) {
			if badP < 3 {
				t.Errorf("stripe %d: P on role %d differs", stripe, row.P)
			}
			badP++
		}
		if row.Q < 0 {
			continue
		}
		for slot, role := range row.Syndrome {
			blocks[slot] = nil
			if role >= 0 {
				blocks[slot] = chunkOf(role)
			}
		}
		parity.GenPQ(nil, qBuf, blocks)
		if !bytes.Equal(qBuf, chunkOf(row.Q)) {
			if badQ < 3 {
				t.Errorf("stripe %d: Q on role %d differs", stripe, row.Q)
			}
			badQ++
		}
	}
	if badP+badQ > 0 {
		t.Fatalf("%d P and %d Q blocks of %d stripes differ", badP, badQ, st.Stripes())
	}
	t.Logf("%d sector copies and %d stripes of parity match", checked, st.Stripes())
}

func firstWord(img []byte, off uint64) uint64 {
	if off+8 > uint64(len(img)) {
		return 0
	}
	return binary.LittleEndian.Uint64(img[off:])
}

// gptPart is one GPT partition: first LBA and length in sectors.
type gptPart struct{ first, sectors int64 }

// writeGPT writes a protective MBR and primary and backup GPT headers and
// entry arrays (128 entries of 128 bytes) describing parts on a disk of
// size sectors (UEFI spec, "GUID Partition Table (GPT) Disk Layout").
func writeGPT(w io.WriterAt, size int64, parts []gptPart) error {
	if len(parts) > 128 {
		return fmt.Errorf("%d partitions, GPT here holds 128", len(parts))
	}
	le := binary.LittleEndian
	mbr := make([]byte, 512)
	e := mbr[446:]
	e[1], e[2], e[4] = 0, 2, 0xee // CHS start 0/0/2, type: GPT protective
	e[5], e[6], e[7] = 0xff, 0xff, 0xff
	le.PutUint32(e[8:], 1)
	le.PutUint32(e[12:], uint32(min(size-1, 0xffffffff)))
	mbr[510], mbr[511] = 0x55, 0xaa
	if _, err := w.WriteAt(mbr, 0); err != nil {
		return err
	}
	entries := make([]byte, 128*128)
	for i, p := range parts {
		ent := entries[i*128:]
		copy(ent[0:16], "mdtool-raid-part") // type GUID: any non-zero value
		le.PutUint64(ent[16:], uint64(i+1)) // unique GUID
		le.PutUint64(ent[32:], uint64(p.first))
		le.PutUint64(ent[40:], uint64(p.first+p.sectors-1))
	}
	entriesCRC := crc32.ChecksumIEEE(entries)
	header := func(my, alt, entriesLBA int64) []byte {
		h := make([]byte, 512)
		copy(h, "EFI PART")
		le.PutUint32(h[8:], 0x00010000)
		le.PutUint32(h[12:], 92)
		le.PutUint64(h[24:], uint64(my))
		le.PutUint64(h[32:], uint64(alt))
		le.PutUint64(h[40:], 34)
		le.PutUint64(h[48:], uint64(size-34))
		copy(h[56:72], "mdtool-disk-guid")
		le.PutUint64(h[72:], uint64(entriesLBA))
		le.PutUint32(h[80:], 128)
		le.PutUint32(h[84:], 128)
		le.PutUint32(h[88:], entriesCRC)
		le.PutUint32(h[16:], crc32.ChecksumIEEE(h[:92]))
		return h
	}
	for _, blk := range []struct {
		lba  int64
		data []byte
	}{
		{1, header(1, size-1, 2)},
		{2, entries},
		{size - 33, entries},
		{size - 1, header(size-1, 1, size-33)},
	} {
		if _, err := w.WriteAt(blk.data, blk.lba*512); err != nil {
			return err
		}
	}
	return nil
}
