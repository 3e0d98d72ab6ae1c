package engine

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"mdtool/engine/layout"
	"mdtool/internal/mdvm"
)

// TestKernelReshapeInPlaceSlide: in-place reshapes by the engine through
// a backup file that keep or lower the data devices, killed mid-way (the
// members and the file copied at a hook point, the stripes in flight
// torn), are finished by mdadm 4.2 --assemble --backup-file (Grow_restart,
// then its child) in the kernel: a raid6 layout change cut after a
// window's backup, a raid5 3->2 shrink cut after its bottom section's
// backup, and a raid6 5->4 shrink cut at a record above it. The data is
// unchanged (md5 of what mdtool served), check finds no mismatch, the
// reshape ends. One VM run.
func TestKernelReshapeInPlaceSlide(t *testing.T) {
	mdvm.Require(t)
	dir := t.TempDir()
	share := filepath.Join(dir, "share")
	if err := os.Mkdir(share, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		c     slideCase
		point string
		nth   int
	}{
		{slideCase{s: spec{level: "raid6", n: 4, chunkKiB: 64, devMiB: []int{21}},
			rq: ReshapeStart{Layout: layout.DDFNContinue, SetLayout: true}}, "backup", 6},
		{slideCase{s: spec{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{21}},
			rq: ReshapeStart{RaidDisks: 2}}, "backup", 1},
		{slideCase{s: spec{level: "raid6", n: 5, chunkKiB: 64, devMiB: []int{21}},
			rq: ReshapeStart{RaidDisks: 4}}, "checkpoint", 3},
	}
	var disks []mdvm.Disk
	var script bytes.Buffer
	vd := 0
	want := map[string]string{}
	for k, c := range cases {
		set, bf, sectors, sum := slideKillSet(t, c.c, c.point, c.nth)
		want["MD5 "+strconv.Itoa(k)] = sum
		if err := os.WriteFile(filepath.Join(share, fmt.Sprintf("b%d", k)), bf.b, 0o644); err != nil {
			t.Fatal(err)
		}
		devs := ""
		for i, d := range set {
			p := filepath.Join(dir, fmt.Sprintf("s%d-%d.img", k, i))
			b := make([]byte, d.Geometry().Size)
			if _, err := d.ReadAt(b, 0); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			disks = append(disks, mdvm.Disk{Path: p})
			devs += " /dev/vd" + string(rune('a'+vd))
			vd++
		}
		fmt.Fprintf(&script, `cp /share/b%[1]d /tmp/b%[1]d
mdadm --assemble /dev/md%[1]d --backup-file=/tmp/b%[1]d%[2]s >/tmp/a%[1]d 2>&1; echo "ASM %[1]d $?"; cat /tmp/a%[1]d
for i in $(seq 1 300); do
  [ "$(cat /sys/block/md%[1]d/md/sync_action 2>/dev/null)" = idle ] && [ "$(cat /sys/block/md%[1]d/md/reshape_position 2>/dev/null)" = none ] && break
  sleep 1
done
cat /proc/mdstat
[ "$(cat /sys/block/md%[1]d/md/reshape_position 2>/dev/null)" = none ] || { dmesg | tail -25; ps; }
echo "POS %[1]d $(cat /sys/block/md%[1]d/md/reshape_position)"
echo "MD5 %[1]d $(dd if=/dev/md%[1]d bs=512 count=%[3]d 2>/dev/null | md5sum | cut -d' ' -f1)"
echo check > /sys/block/md%[1]d/md/sync_action
sleep 1
for i in $(seq 1 150); do [ "$(cat /sys/block/md%[1]d/md/sync_action)" = idle ] && break; sleep 1; done
echo "MM %[1]d $(cat /sys/block/md%[1]d/md/mismatch_cnt)"
mdadm -S /dev/md%[1]d >/dev/null 2>&1
`, k, devs, sectors)
		want["POS "+strconv.Itoa(k)] = "none"
		want["MM "+strconv.Itoa(k)] = "0"
		want["ASM "+strconv.Itoa(k)] = "0"
	}
	start := time.Now()
	out := execRetry(t, mdvm.Run{Disks: disks, Share: share, Script: script.String(), Timeout: 900 * time.Second}, nil)
	t.Logf("kernel run: %v\n%s", time.Since(start), out)
	got := vmLines(out)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: kernel says %q, want %q", k, got[k], v)
		}
	}
	if !bytes.Contains(out, []byte("restoring critical section")) {
		t.Error("mdadm restored no critical section")
	}
}

// slideKillSet runs c's reshape in the engine and returns the members and
// the backup file as they were at the nth hook point of the kind given
// (the stripes in flight there torn), the array's sectors and their md5.
func slideKillSet(t *testing.T, c slideCase, point string, nth int) ([]*MemDevice, *memBackup, int64, string) {
	t.Helper()
	mems := create(t, c.s)
	a := open(t, mems, recoverOptions())
	if c.rq.RaidDisks != 0 {
		nd := uint64(c.rq.RaidDisks - (c.s.n - a.striped.DataDisks()))
		ch := a.striped.ChunkSectors()
		if err := a.SetArraySize(a.striped.DevSectors(0) / ch * ch * nd); err != nil {
			t.Fatal(err)
		}
	}
	data := make([]byte, a.Size())
	fillPattern(newRand(uint64(c.s.n)), data)
	if _, err := a.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	sb0 := readSB(t, mems[0])
	bf := &memBackup{}
	var snap *slideSnap
	seen := 0
	ReshapeHook = func(p string, pos, recorded, total uint64) {
		if p != point || snap != nil {
			return
		}
		if seen++; seen < nth {
			return
		}
		snap = &slideSnap{point: p, pos: pos, recorded: recorded, bf: bf.clone(), dataOffSect: sb0.DataOffset,
			torn: [2]uint64{min(pos, recorded), max(pos, recorded)}}
		for _, d := range mems {
			snap.devs = append(snap.devs, cloneMem(t, d))
		}
	}
	defer func() { ReshapeHook = nil }()
	rq := c.rq
	rq.Backup = bf
	if err := a.StartReshape(rq); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := a.Reshape(ctx); err != nil {
		t.Fatal(err)
	}
	ReshapeHook = nil
	checkContent(t, a, &model{b: data})
	nd := uint64(a.striped.DataDisks())
	a.Close()
	if snap == nil {
		t.Fatalf("no %s point number %d", point, nth)
	}
	lo, hi := snap.torn[0]/nd, (snap.torn[1]+nd-1)/nd
	for _, d := range snap.devs {
		d.WriteAt(make([]byte, (hi-lo)<<9), int64(snap.dataOffSect+lo)<<9)
	}
	t.Logf("%s: cut at %s %d (recorded %d)", c.s, point, snap.pos, snap.recorded)
	sum := md5.Sum(data)
	return snap.devs, snap.bf, int64(len(data)) >> 9, hex.EncodeToString(sum[:])
}
