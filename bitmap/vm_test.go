package bitmap

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
)

// vmPoke is one mutation of the bitmap superblock of both members of a
// stopped raid1 (1.2, bitmap at byte 8192 of each member).
type vmPoke struct {
	name string
	off  int
	b    []byte
}

var vmPokes = []vmPoke{
	{"none", 0, nil},
	{"daemon-2p31", 56, []byte{0, 0, 0, 0x80}},
	{"daemon-2p30", 56, []byte{0, 0, 0, 0x40}},
	{"daemon-0", 56, []byte{0, 0, 0, 0}},
	{"wb-16384", 60, []byte{0x00, 0x40, 0, 0}},
	{"wb-16383", 60, []byte{0xff, 0x3f, 0, 0}},
	{"chunk-12K", 52, []byte{0, 0x30, 0, 0}},
	{"chunk-256", 52, []byte{0, 0x01, 0, 0}},
	{"chunk-512", 52, []byte{0, 0x02, 0, 0}},
	{"version-2", 4, []byte{2, 0, 0, 0}},
	{"version-3", 4, []byte{3, 0, 0, 0}},
	{"version-5", 4, []byte{5, 0, 0, 0}},
	{"version-6", 4, []byte{6, 0, 0, 0}},
	{"uuid", 8, []byte{0x5a}},
	{"state-writeerror", 48, []byte{4, 0, 0, 0}},
	{"state-stale", 48, []byte{2, 0, 0, 0}},
	{"events-0", 24, make([]byte, 8)},
}

func octal(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		fmt.Fprintf(&s, `\%03o`, c)
	}
	return s.String()
}

const vmScriptHead = `exec 2>&1
C="--run --level=1 --raid-devices=2 --metadata=1.2 --assume-clean --homehost=any --name=t"
for c in 8K 16K; do
  if mdadm --create /dev/md0 $C --bitmap=internal --bitmap-chunk=$c /dev/vda /dev/vdb >/tmp/o 2>&1; then
    echo "create-$c ok"
    dd if=/dev/vda of=/share/bm-$c.bin bs=4096 skip=2 count=1 2>/dev/null
    mdadm --stop /dev/md0 >/dev/null 2>&1
  else
    echo "create-$c refused"
  fi
  mdadm --zero-superblock /dev/vda /dev/vdb >/dev/null 2>&1
done
mdadm --create /dev/md0 $C --bitmap=internal --delay=60 /dev/vda /dev/vdb >/tmp/o 2>&1 || { cat /tmp/o; exit 1; }
dd if=/dev/urandom of=/dev/md0 bs=4096 count=4 oflag=direct 2>/dev/null
mdadm --stop /dev/md0 >/dev/null 2>&1
sync; echo 3 > /proc/sys/vm/drop_caches
dd if=/dev/vda of=/share/stopped.bin bs=4096 skip=2 count=1 2>/dev/null
dd if=/dev/vda of=/tmp/a bs=4096 count=16 2>/dev/null
dd if=/dev/vdb of=/tmp/b bs=4096 count=16 2>/dev/null
poke() { for d in /dev/vda /dev/vdb; do printf "$2" | dd of=$d bs=1 seek=$((8192+$1)) conv=notrunc 2>/dev/null; done; }
try() {
  sync; echo 3 > /proc/sys/vm/drop_caches
  dmesg -c >/dev/null
  mdadm --assemble /dev/md0 /dev/vda /dev/vdb >/dev/null 2>&1
  st=$(cat /sys/block/md0/md/array_state 2>/dev/null)
  case "$st" in clean|active|active-idle|readonly|read-auto) r=ok;; *) r=refused;; esac
  if dmesg | grep -q "out of date"; then r="$r stale"; fi
  echo "case $1 $r"
  mdadm --stop /dev/md0 >/dev/null 2>&1
  dd if=/tmp/a of=/dev/vda bs=4096 count=16 conv=notrunc 2>/dev/null
  dd if=/tmp/b of=/dev/vdb bs=4096 count=16 conv=notrunc 2>/dev/null
}
`

// kernelVerdict is what the kernel should do with the header, according to
// Parse and CheckFor: "refused", "ok stale" or "ok".
func kernelVerdict(b []byte, uuid [16]byte, events uint64) string {
	h, err := Parse(b)
	if err != nil {
		return "refused"
	}
	err = h.CheckFor(uuid, events)
	var se *StaleError
	switch {
	case errors.As(err, &se):
		return "ok stale"
	case err != nil:
		return "refused"
	}
	return "ok"
}

// TestKernelAcceptance runs the reference kernel (Debian 6.1) and mdadm 4.2
// in the VM: mdadm's bitmap chunk refusal and initial bitmap area, and
// which bitmap superblocks the kernel refuses, accepts, or accepts as stale
// (full recovery), compared with ChooseChunk, NewArea, Parse and CheckFor.
func TestKernelAcceptance(t *testing.T) {
	mdvm.Require(t)
	dir := t.TempDir()
	share := filepath.Join(dir, "share")
	if err := os.Mkdir(share, 0o755); err != nil {
		t.Fatal(err)
	}
	var disks []mdvm.Disk
	for _, n := range []string{"a.img", "b.img"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 256<<20); err != nil {
			t.Fatal(err)
		}
		disks = append(disks, mdvm.Disk{Path: p})
	}
	var script strings.Builder
	script.WriteString(vmScriptHead)
	for _, p := range vmPokes {
		if p.b != nil {
			fmt.Fprintf(&script, "poke %d '%s'; ", p.off, octal(p.b))
		}
		fmt.Fprintf(&script, "try %s\n", p.name)
	}
	out := mdvm.MustExec(t, mdvm.Run{Disks: disks, Share: share, Script: script.String(), Timeout: 400 * time.Second})
	got := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) >= 2 {
			switch {
			case f[0] == "case" && len(f) >= 3:
				got[f[1]] = strings.Join(f[2:], " ")
			case strings.HasPrefix(f[0], "create-"):
				got[f[0]] = f[1]
			}
		}
	}
	read := func(n string) []byte {
		b, err := os.ReadFile(filepath.Join(share, n))
		if err != nil {
			t.Fatalf("%v\nVM output:\n%s", err, out)
		}
		return b
	}

	// mdadm's chunk choice: room is 8 sectors (4 KiB) on a member <= 8 GiB.
	bm16 := read("bm-16K.bin")
	h16, err := Parse(bm16)
	if err != nil {
		t.Fatalf("16K bitmap: %v", err)
	}
	for _, c := range []struct {
		name  string
		chunk uint64
	}{{"create-8K", 8 << 10}, {"create-16K", 16 << 10}} {
		_, err := ChooseChunk(int64(ChooseSpace(h16.SyncSize)), h16.SyncSize, c.chunk)
		want := "ok"
		if err != nil {
			want = "refused"
		}
		if got[c.name] != want {
			t.Errorf("%s: mdadm %q, ChooseChunk says %q (%v)", c.name, got[c.name], want, err)
		}
	}
	// The 16K area as mdadm wrote it: header, 0xff bits and padding to 4 KiB.
	if h16.ChunkSize != 16<<10 || h16.Chunks() < 8*256 {
		t.Fatalf("16K bitmap header %+v", h16)
	}
	if a := NewArea(h16, 0xff, AreaAlign(8)); !bytes.Equal(a, bm16) {
		t.Errorf("NewArea differs from mdadm's area at byte %d", firstDiff(a, bm16))
	}

	stopped := read("stopped.bin")
	hs, err := Parse(stopped)
	if err != nil {
		t.Fatalf("stopped bitmap: %v", err)
	}
	if hs.Events == 0 {
		t.Fatalf("events still 0 after writes; the stale-by-events case tests nothing")
	}
	for _, p := range vmPokes {
		b := append([]byte(nil), stopped...)
		copy(b[p.off:], p.b)
		want := kernelVerdict(b, hs.UUID, hs.Events)
		if got[p.name] != want {
			t.Errorf("%s: kernel %q, Parse/CheckFor say %q", p.name, got[p.name], want)
		}
	}
	if t.Failed() {
		t.Logf("VM output:\n%s", out)
	}
}
