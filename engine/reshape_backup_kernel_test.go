package engine

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"mdtool/internal/mdvm"
)

// TestKernelReshapeInPlace: in-place growths by the engine with a backup
// file (mdadm's format) are finished by the kernel: a raid5 3->4 cut
// inside its critical section (superblocks at 0, the first new stripes
// torn, the backup holding the section) and a raid6 4->5 cut after it
// (reshape_position past the section, the backup forgotten). mdadm 4.2's
// --assemble --backup-file restores the first (Grow_restart) and
// continues both; the data is unchanged (md5) and check finds no
// mismatch. One VM run.
func TestKernelReshapeInPlace(t *testing.T) {
	mdvm.Require(t)
	dir := t.TempDir()
	share := filepath.Join(dir, "share")
	if err := os.Mkdir(share, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		level string
		n     int
		crit  bool // cut inside the critical section
	}{{"raid5", 3, true}, {"raid6", 4, false}}
	var disks []mdvm.Disk
	var script bytes.Buffer
	vd := 0
	want := map[string]string{}
	for k, c := range cases {
		set, bf, oldSectors, sum := inPlaceSet(t, c.level, c.n, c.crit)
		want["MD5 "+strconv.Itoa(k)] = sum
		if err := os.WriteFile(filepath.Join(share, fmt.Sprintf("b%d", k)), bf.b, 0o644); err != nil {
			t.Fatal(err)
		}
		devs := ""
		for i, d := range set {
			p := filepath.Join(dir, fmt.Sprintf("s%d-%d.img", k, i))
			b := make([]byte, d.Geometry().Size)
			if _, err := d.Reopen().ReadAt(b, 0); err != nil {
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
cat /proc/mdstat
for i in $(seq 1 150); do
  [ "$(cat /sys/block/md%[1]d/md/sync_action 2>/dev/null)" = idle ] && [ "$(cat /sys/block/md%[1]d/md/reshape_position 2>/dev/null)" = none ] && break
  sleep 1
done
cat /proc/mdstat
for f in array_state sync_action sync_max sync_completed suspend_lo suspend_hi reshape_position; do echo "$f: $(cat /sys/block/md%[1]d/md/$f)"; done
[ "$(cat /sys/block/md%[1]d/md/reshape_position 2>/dev/null)" = none ] || { dmesg | tail -25; ps; }
echo "RD %[1]d $(cat /sys/block/md%[1]d/md/raid_disks)"
echo "POS %[1]d $(cat /sys/block/md%[1]d/md/reshape_position)"
echo "MD5 %[1]d $(dd if=/dev/md%[1]d bs=512 count=%[3]d 2>/dev/null | md5sum | cut -d' ' -f1)"
echo check > /sys/block/md%[1]d/md/sync_action
sleep 1
for i in $(seq 1 150); do [ "$(cat /sys/block/md%[1]d/md/sync_action)" = idle ] && break; sleep 1; done
echo "MM %[1]d $(cat /sys/block/md%[1]d/md/mismatch_cnt)"
mdadm -S /dev/md%[1]d >/dev/null 2>&1
`, k, devs, oldSectors)
		want["RD "+strconv.Itoa(k)] = strconv.Itoa(c.n + 1)
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
		t.Error("mdadm did not restore the critical section of the set cut inside it")
	}
}

// inPlaceSet makes the members of an array of n devices plus a spare,
// filled with random data, grown in place by one device with a backup
// file and cut inside the critical section (crit: at the checkpoint
// before the section's end is recorded, the first chunk of each member
// torn) or after it (closed without moving more). It returns the members,
// the backup file, the old array's sectors and their md5.
func inPlaceSet(t *testing.T, level string, n int, crit bool) ([]*MemDevice, *memBackup, int64, string) {
	t.Helper()
	mems := create(t, spec{level: level, n: n, chunkKiB: 64, devMiB: []int{8}})
	a := open(t, mems, recoverOptions())
	data := make([]byte, a.Size())
	fillPattern(newRand(uint64(n)), data)
	if _, err := a.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	spare := NewMemDevice(8 << 20)
	if _, err := a.AddDevice(spare, AddOptions{Replacement: -1}); err != nil {
		t.Fatal(err)
	}
	all := append(append([]*MemDevice(nil), mems...), spare)
	sb0 := readSB(t, mems[0])
	bf := &memBackup{}
	var snap []*MemDevice
	var snapBF *memBackup
	if crit {
		ReshapeHook = func(point string, pos, recorded, total uint64) {
			if point == "checkpoint" && recorded == 0 && snap == nil {
				for _, d := range all {
					snap = append(snap, cloneMem(t, d))
				}
				snapBF = bf.clone()
			}
		}
		defer func() { ReshapeHook = nil }()
	}
	if err := a.StartReshape(ReshapeStart{RaidDisks: n + 1, Backup: bf}); err != nil {
		t.Fatal(err)
	}
	ReshapeHook = nil
	a.Close()
	sum := md5.Sum(data)
	if !crit {
		return all, bf, int64(len(data)) >> 9, hex.EncodeToString(sum[:])
	}
	if snap == nil {
		t.Fatal("no checkpoint inside the critical section")
	}
	for _, d := range snap {
		d.WriteAt(make([]byte, 64<<10), int64(sb0.DataOffset)*512)
	}
	return snap, snapBF, int64(len(data)) >> 9, hex.EncodeToString(sum[:])
}
