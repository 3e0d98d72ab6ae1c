package wib

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"mdtool/bitmap"
	"mdtool/internal/mdadm/member"
	"mdtool/internal/mdvm"
)

// fileTarget writes the bitmap into member image files (write + fsync).
type fileTarget struct {
	files map[int]*os.File
	geoms []MemberGeom
}

func (f *fileTarget) Members() []MemberGeom { return f.geoms }

func (f *fileTarget) WriteBitmap(m int, off int64, p []byte) error {
	for _, g := range f.geoms {
		if g.Index == m {
			if _, err := f.files[m].WriteAt(p, g.BitmapStart+off); err != nil {
				return err
			}
			return f.files[m].Sync()
		}
	}
	return fmt.Errorf("no member %d", m)
}

// mirror is a raid1 pair of member images as the host sees them.
type mirror struct {
	paths [2]string
	mem   [2]*member.Member
	v1    [2]*member.V1
	h     *bitmap.Header
	bits  []byte
	tgt   *fileTarget
	cs    uint64 // chunk sectors
}

// openMirror loads superblocks and bitmap of a raid1 pair. ioOpt is the
// io_opt the members pretend to have.
func openMirror(t *testing.T, paths [2]string, mode member.Mode, ioOpt uint32) *mirror {
	t.Helper()
	m := &mirror{paths: paths, tgt: &fileTarget{files: map[int]*os.File{}}}
	for i, p := range paths {
		mm, err := member.Open(p, mode)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mm.Close() })
		v, err := mm.LoadV1(-1)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		off, ok := v.BitmapOffset()
		if !ok {
			t.Fatalf("%s: no internal bitmap", p)
		}
		h, area, err := mm.ReadBitmap(off, 0)
		if err != nil {
			t.Fatalf("%s: bitmap: %v", p, err)
		}
		limit := int64(v.SB.DataOffset) * 512
		if v.SB.BitmapOffset < 0 {
			limit = int64(v.Offset) * 512 // 1.0: the superblock
		}
		m.mem[i], m.v1[i] = mm, v
		if i == 0 {
			m.h, m.bits = h, area[bitmap.HeaderSize:]
		}
		m.tgt.files[i] = mm.File
		m.tgt.geoms = append(m.tgt.geoms, MemberGeom{Index: i, LogicalBlock: 512, PhysicalBlock: 512,
			IOOpt: ioOpt, BitmapStart: off, Limit: limit})
	}
	m.cs = uint64(m.h.ChunkSize) / 512
	return m
}

// dataAt returns the member byte offset of sync-space sector s.
func (m *mirror) dataAt(i int, s uint64) int64 {
	return int64(m.v1[i].SB.DataOffset+s) * 512
}

// markDirty does what md does when an array goes active, in md's order:
// bitmap events first, then the superblocks with events+1 and
// resync_offset 0 ("not clean").
func (m *mirror) markDirty(t *testing.T, b *Bitmap) {
	t.Helper()
	ev := m.v1[0].SB.Events + 1
	if err := b.SetEvents(ev, false); err != nil {
		t.Fatal(err)
	}
	for i := range m.mem {
		sb := *m.v1[i].SB
		sb.Events = ev
		sb.ResyncOffset = 0
		if _, err := m.mem[i].File.WriteAt(sb.MarshalWithChecksum(), int64(m.v1[i].Offset)*512); err != nil {
			t.Fatal(err)
		}
		if err := m.mem[i].File.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

func randomBlock(t *testing.T, n uint64) []byte {
	p := make([]byte, n)
	if _, err := rand.Read(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestKernelInterop checks crash recovery across the two implementations
// with the real Linux 6.1 md driver and mdadm 4.2:
//
//  1. mdtool crashes mid-write: the runtime sets bits (StartWrite without
//     EndWrite) in a 1.2 raid1 (bitmap of three pages, 4 KiB chunks, last
//     page partial; members with io_opt 4096) and a 1.0 raid1 (bitmap
//     before the superblock), data is written to both mirrors or only one
//     inside those chunks, and also to one mirror of a chunk whose bit is
//     clear. mdadm -X must count exactly those bits, the kernel must resync
//     exactly those chunks (the clean chunk stays different), and after the
//     clean chunk is rewritten, `check` finds no mismatch.
//  2. The kernel crashes mid-write (mdvm-crash right after O_DIRECT
//     writes): the runtime, loading the images, reports exactly the chunks
//     written as dirty, matching mdadm -X.
func TestKernelInterop(t *testing.T) {
	mdvm.Require(t)
	dir := t.TempDir()
	img := func(name string, size int64) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		f.Close()
		return p
	}
	a := [2]string{img("a0.img", 256<<20), img("a1.img", 256<<20)}
	c := [2]string{img("c0.img", 64<<20), img("c1.img", 64<<20)}
	disks := func(mode mdvm.Mode) []mdvm.Disk {
		return []mdvm.Disk{{Path: a[0], Mode: mode}, {Path: a[1], Mode: mode}, {Path: c[0], Mode: mode}, {Path: c[1], Mode: mode}}
	}

	// Run 1: md0 = 1.2 raid1 whose 4 KiB-chunk bitmap is added by --grow
	// (mdadm only allows a multi-page bitmap there: at create time a
	// member below 8 GiB gets 4 KiB of bitmap room); md1 = 1.0 raid1 with
	// the bitmap before the superblock.
	start := time.Now()
	out := mdvm.MustExec(t, mdvm.Run{Disks: disks(mdvm.RW), Timeout: 240 * time.Second, Script: `
set -e
mdadm --create /dev/md0 --run --level=1 --raid-devices=2 --metadata=1.2 --bitmap=none --assume-clean --homehost=any --name=a /dev/vda /dev/vdb
mdadm --stop /dev/md0
mdadm --assemble /dev/md0 --update=no-bbl /dev/vda /dev/vdb
mdadm --grow /dev/md0 --bitmap=internal --bitmap-chunk=4K
mdadm --stop /dev/md0
mdadm --create /dev/md1 --run --level=1 --raid-devices=2 --metadata=1.0 --bitmap=internal --bitmap-chunk=4K --assume-clean --homehost=any --name=c /dev/vdc /dev/vdd
mdadm --stop /dev/md1
echo "X0 $(mdadm -X /dev/vda | sed -n 's/^ *Bitmap : //p')"
echo "X1 $(mdadm -X /dev/vdc | sed -n 's/^ *Bitmap : //p')"
`})
	t.Logf("setup (%v):\n%s", time.Since(start).Round(time.Second), out)
	kv := parseKV(out)
	if !strings.HasSuffix(kv["X0"], " 0 dirty (0.0%)") || !strings.HasSuffix(kv["X1"], " 0 dirty (0.0%)") {
		t.Fatalf("bitmaps not clean after the kernel's stop: %q %q", kv["X0"], kv["X1"])
	}

	// Host: mdtool "crashes" mid-write.
	type plan struct {
		m             *mirror
		set, differ   []uint64 // chunks StartWrite'd; of those, mirrors made different
		clean         uint64   // a chunk without its bit, made different
		chunks, pages uint64
		wantPlacement string
	}
	plans := []*plan{
		{m: openMirror(t, a, member.ReadWrite, 4096), set: []uint64{5, 20000, 33000, 40000, 65000},
			differ: []uint64{20000, 65000}, clean: 50000, wantPlacement: "1.2"},
		{m: openMirror(t, c, member.ReadWrite, 0), wantPlacement: "1.0"},
	}
	{
		p := plans[1]
		n := p.m.h.Chunks()
		p.set = []uint64{1, n / 2, n - 1}
		p.differ = []uint64{n / 2}
		p.clean = n / 3
	}
	for i, p := range plans {
		m := p.m
		p.chunks = m.h.Chunks()
		p.pages = bitmap.FilePages(m.h.Bytes())
		t.Logf("md%d: %s, bitmap at member byte %d (limit %d), %d chunks of %d sectors, %d bytes, %d pages",
			i, p.wantPlacement, m.tgt.geoms[0].BitmapStart, m.tgt.geoms[0].Limit, p.chunks, m.cs, m.h.Bytes(), p.pages)
		if i == 0 && (p.pages != 3 || m.h.Bytes()%bitmap.PageSize == 0) {
			t.Fatalf("md0 bitmap has %d pages (%d bytes), want 3 with a partial last page", p.pages, m.h.Bytes())
		}
		if i == 1 && m.v1[0].SB.BitmapOffset >= 0 {
			t.Fatalf("md1: bitmap offset %d, want a 1.0 bitmap before the superblock", m.v1[0].SB.BitmapOffset)
		}
		b, err := New(Config{Header: *m.h, Bits: m.bits, SubPage: true}, m.tgt)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range p.set {
			s := ch * m.cs
			if err := b.StartWrite(s, m.cs); err != nil {
				t.Fatal(err)
			}
			data := randomBlock(t, m.cs*512)
			targets := []int{0, 1}
			if slices.Contains(p.differ, ch) {
				targets = []int{0}
			}
			for _, mi := range targets {
				if _, err := m.mem[mi].File.WriteAt(data, m.dataAt(mi, s)); err != nil {
					t.Fatal(err)
				}
			}
			// no EndWrite: the "crash" happens with the writes in flight
		}
		if _, err := m.mem[0].File.WriteAt(randomBlock(t, m.cs*512), m.dataAt(0, p.clean*m.cs)); err != nil {
			t.Fatal(err)
		}
		m.markDirty(t, b)
		st := b.Stats()
		t.Logf("md%d: %d flushes, %d writes, %d bytes", i, st.Flushes, st.Writes, st.Bytes)
		// The images now hold exactly the bits of p.set.
		for mi := range m.mem {
			h, area, err := m.mem[mi].ReadBitmap(m.tgt.geoms[mi].BitmapStart, 0)
			if err != nil {
				t.Fatal(err)
			}
			bits := bitmap.BitsOf(area)
			for ch := uint64(0); ch < p.chunks; ch++ {
				if bits.Test(ch) != slices.Contains(p.set, ch) {
					t.Fatalf("md%d member %d: on-disk bit of chunk %d is %v", i, mi, ch, bits.Test(ch))
				}
			}
			if h.Events != m.v1[0].SB.Events+1 {
				t.Fatalf("md%d member %d: bitmap events %d", i, mi, h.Events)
			}
		}
	}

	// Run 2: the kernel recovers mdtool's crash, then crashes itself.
	var sc strings.Builder
	sc.WriteString(`set -e
xb() { mdadm -X $1 | sed -n 's/^ *Bitmap : //p'; }
sum() { dd if=$1 bs=512 skip=$2 count=$3 iflag=direct 2>/dev/null | md5sum | cut -c1-32; }
cmpchunk() { # name dev0 dev1 doff cs chunk
	x=$(( $4 + $6 * $5 ))
	if [ "$(sum $2 $x $5)" = "$(sum $3 $x $5)" ]; then echo "CMP_$1_$6 same"; else echo "CMP_$1_$6 differ"; fi
}
echo "XA0 $(xb /dev/vda)"; echo "XA1 $(xb /dev/vdb)"
echo "XC0 $(xb /dev/vdc)"; echo "XC1 $(xb /dev/vdd)"
mdadm --assemble /dev/md0 /dev/vda /dev/vdb
mdadm --assemble /dev/md1 /dev/vdc /dev/vdd
cat /proc/mdstat
sleep 1
mdadm --wait /dev/md0 /dev/md1 || true
echo "LAST_md0 $(cat /sys/block/md0/md/last_sync_action)"
echo "LAST_md1 $(cat /sys/block/md1/md/last_sync_action)"
echo "DONE_md0 $(cat /sys/block/md0/md/sync_completed)"
`)
	// md writes members with bios, not through their page cache: drop it
	// before reading members directly.
	sc.WriteString("echo 3 > /proc/sys/vm/drop_caches\n")
	devs := [][2]string{{"/dev/vda", "/dev/vdb"}, {"/dev/vdc", "/dev/vdd"}}
	for i, p := range plans {
		doff := p.m.v1[0].SB.DataOffset
		for _, ch := range append(append([]uint64(nil), p.set...), p.clean) {
			fmt.Fprintf(&sc, "cmpchunk md%d %s %s %d %d %d\n", i, devs[i][0], devs[i][1], doff, p.m.cs, ch)
		}
		// rewrite the clean chunk through md: mirror 0's data to both
		fmt.Fprintf(&sc, "dd if=%s of=/dev/md%d bs=512 skip=%d seek=%d count=%d iflag=direct oflag=direct 2>/dev/null\n",
			devs[i][0], i, doff+p.clean*p.m.cs, p.clean*p.m.cs, p.m.cs)
		sc.WriteString("echo 3 > /proc/sys/vm/drop_caches\n")
		fmt.Fprintf(&sc, "cmpchunk md%d_fixed %s %s %d %d %d\n", i, devs[i][0], devs[i][1], doff, p.m.cs, p.clean)
	}
	sc.WriteString(`echo check > /sys/block/md0/md/sync_action
echo check > /sys/block/md1/md/sync_action
sleep 1
mdadm --wait /dev/md0 /dev/md1 || true
echo "CHECK_md0 $(cat /sys/block/md0/md/last_sync_action) $(cat /sys/block/md0/md/mismatch_cnt)"
echo "CHECK_md1 $(cat /sys/block/md1/md/last_sync_action) $(cat /sys/block/md1/md/mismatch_cnt)"
mdadm --stop /dev/md0 /dev/md1
echo "XA2 $(xb /dev/vda)"; echo "XC2 $(xb /dev/vdc)"
mdadm --assemble /dev/md0 /dev/vda /dev/vdb
mdadm --assemble /dev/md1 /dev/vdc /dev/vdd
# a slow (TCG, loaded host) guest must not get to clear bits or mark the
# array clean before the crash
for m in md0 md1; do
	echo 3600 > /sys/block/$m/md/bitmap/time_base
	echo 3600 > /sys/block/$m/md/safe_mode_delay
done
`)
	kernelSet := [][]uint64{{7, 30000, 36000, 65279}, {2, plans[1].chunks / 4, plans[1].chunks - 2}}
	for i, ks := range kernelSet {
		for _, ch := range ks {
			fmt.Fprintf(&sc, "dd if=/dev/urandom of=/dev/md%d bs=512 seek=%d count=%d oflag=direct 2>/dev/null\n",
				i, ch*plans[i].m.cs, plans[i].m.cs)
		}
	}
	sc.WriteString("echo CRASH\nmdvm-crash 0\n")
	start = time.Now()
	out = mdvm.MustExec(t, mdvm.Run{Disks: disks(mdvm.RW), Timeout: 300 * time.Second, Script: sc.String()})
	t.Logf("recovery and kernel crash (%v):\n%s", time.Since(start).Round(time.Second), out)
	kv = parseKV(out)
	for i, p := range plans {
		name := map[int]string{0: "A", 1: "C"}[i]
		want := fmt.Sprintf("%d bits (chunks), %d dirty", p.chunks, len(p.set))
		for _, mi := range []string{"0", "1"} {
			if got := kv["X"+name+mi]; !strings.HasPrefix(got, want) {
				t.Errorf("md%d member %s before assembly: mdadm -X says %q, want %q", i, mi, got, want)
			}
		}
		if got := kv[fmt.Sprintf("LAST_md%d", i)]; got != "resync" {
			t.Errorf("md%d: last_sync_action %q, want resync", i, got)
		}
		for _, ch := range p.set {
			if got := kv[fmt.Sprintf("CMP_md%d_%d", i, ch)]; got != "same" {
				t.Errorf("md%d chunk %d (dirty, differ=%v): mirrors %q after the resync", i, ch, slices.Contains(p.differ, ch), got)
			}
		}
		if got := kv[fmt.Sprintf("CMP_md%d_%d", i, p.clean)]; got != "differ" {
			t.Errorf("md%d clean chunk %d: mirrors %q after the resync, want differ (the kernel resynced a chunk whose bit was clear)", i, p.clean, got)
		}
		if got := kv[fmt.Sprintf("CMP_md%d_fixed_%d", i, p.clean)]; got != "same" {
			t.Errorf("md%d clean chunk %d: %q after rewriting it through md", i, p.clean, got)
		}
		if got := kv[fmt.Sprintf("CHECK_md%d", i)]; got != "check 0" {
			t.Errorf("md%d: check says %q, want \"check 0\"", i, got)
		}
		if got := kv["X"+name+"2"]; !strings.HasPrefix(got, fmt.Sprintf("%d bits (chunks), 0 dirty", p.chunks)) {
			t.Errorf("md%d after resync and stop: mdadm -X says %q", i, got)
		}
	}
	if _, ok := kv["CRASH"]; !ok {
		t.Fatal("the kernel crash step did not run")
	}

	// The kernel crashed with writes just done: load its bitmaps.
	start = time.Now()
	x := mdvm.MustExec(t, mdvm.Run{Disks: disks(mdvm.RO), Timeout: 120 * time.Second, Script: `
for d in vda vdb vdc vdd; do echo "X_$d $(mdadm -X /dev/$d | sed -n 's/^ *Bitmap : //p')"; done
`})
	t.Logf("after the kernel crash (%v):\n%s", time.Since(start).Round(time.Second), x)
	kv = parseKV(x)
	for i, ks := range kernelSet {
		m := openMirror(t, [][2]string{a, c}[i], member.ReadOnly, 0)
		if m.v1[0].SB.ResyncOffset != 0 {
			t.Errorf("md%d: resync_offset %d after the crash, want 0 (active)", i, m.v1[0].SB.ResyncOffset)
		}
		b, err := New(Config{Header: *m.h, Bits: m.bits, SubPage: true}, m.tgt)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range ks {
			if !b.Dirty(ch*m.cs) || !b.Dirty(ch*m.cs+m.cs-1) {
				t.Errorf("md%d: chunk %d written by the kernel before its crash is not dirty", i, ch)
			}
			if need, _ := b.StartSync(ch*m.cs, false); !need {
				t.Errorf("md%d: chunk %d does not need a resync", i, ch)
			}
		}
		if n := b.DirtyChunks(); n != uint64(len(ks)) {
			t.Errorf("md%d: %d dirty chunks, want %d", i, n, len(ks))
		}
		for _, d := range [][]string{{"vda", "vdb"}, {"vdc", "vdd"}}[i] {
			want := fmt.Sprintf("%d bits (chunks), %d dirty", m.h.Chunks(), b.DirtyChunks())
			if got := kv["X_"+d]; !strings.HasPrefix(got, want) {
				t.Errorf("md%d %s: mdadm -X says %q, runtime %q", i, d, got, want)
			}
		}
	}
}

// parseKV maps the first word of each output line to the rest.
func parseKV(out []byte) map[string]string {
	kv := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		kv[k] = v
	}
	return kv
}
