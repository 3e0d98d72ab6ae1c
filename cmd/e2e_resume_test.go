package cmd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"mdtool/internal/daemon"
	"mdtool/internal/mdvm"
	"mdtool/superblock"
)

// syncAction runs mdtool action ACTION on the array and waits until it
// has finished.
func syncAction(t *testing.T, runDir, md, action string) e2eDetail {
	t.Helper()
	// md answers EBUSY only while a sync runs, and so must mdtool: no retry.
	if code, _, errs := mdtool(t, "action", "--run-dir", runDir, action, md); code != 0 {
		t.Fatalf("action %s %s: exit %d: %s", action, md, code, errs)
	}
	return waitFor(t, runDir, md, action)
}

// TestResumeKernelCrash is the other direction: the kernel crashes (power
// cut, mdvm-crash) in the middle of a raid1 resync and of a raid5
// recovery onto a spare, leaving resync_offset and recovery_offset in the
// superblocks. mdtool assembles the images and resumes from those offsets.
// The proof that it resumes rather than starts over: a block below the
// recorded offset, already synced by the kernel, is corrupted on the host
// before mdtool starts; a resumed resync/recovery leaves it alone, so a
// check finds mismatches there (a restart from 0 would have rewritten
// it). repair fixes it, a second check finds none, the contents are what
// the kernel read before the crash, and the kernel's own check agrees.
func TestResumeKernelCrash(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	requireHostMdadm(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	var r1, r5 []string
	for i := 0; i < 2; i++ {
		r1 = append(r1, sparse(t, dir, fmt.Sprintf("rs-d%d.img", i), 96<<20))
	}
	for i := 0; i < 4; i++ {
		r5 = append(r5, sparse(t, dir, fmt.Sprintf("rc-d%d.img", i), 24<<20))
	}
	var disks []mdvm.Disk
	for _, p := range append(append([]string{}, r1...), r5...) {
		disks = append(disks, mdvm.Disk{Path: p, Mode: mdvm.RW})
	}
	// vda vdb: raid1 resyncing; vdc vdd vde: raid5, vde failed and
	// replaced by the spare vdf, recovering. Both throttled to 1 MB/s,
	// so that md checkpoints (every 1/16 of the way) before the crash and
	// neither is done (~95 s and ~23 s of sync; the crash comes ~25-40 s
	// after the raid1 and ~6 s after the recovery started).
	script := `
echo 100 > /proc/sys/dev/raid/speed_limit_min
echo 1000 > /proc/sys/dev/raid/speed_limit_max
mdadm --create /dev/md0 --run -l1 -n2 --homehost=any --name=rs /dev/vda /dev/vdb
dd if=/dev/urandom of=/dev/md0 bs=1M count=6 oflag=direct 2>/dev/null
echo "MD5 rs $(md5sum /dev/md0 | cut -d' ' -f1)"
mdadm --create /dev/md1 --run -l5 -n3 -c 64 --assume-clean --homehost=any --name=rc /dev/vdc /dev/vdd /dev/vde
dd if=/dev/urandom of=/dev/md1 bs=1M oflag=direct 2>/dev/null
echo "MD5 rc $(md5sum /dev/md1 | cut -d' ' -f1)"
mdadm /dev/md1 --fail /dev/vde
mdadm /dev/md1 --remove /dev/vde
mdadm /dev/md1 --add /dev/vdf
sleep 5
echo "SYNC rs $(cat /sys/block/md0/md/sync_action) $(cat /sys/block/md0/md/sync_completed)"
echo "SYNC rc $(cat /sys/block/md1/md/sync_action) $(cat /sys/block/md1/md/sync_completed)"
# md0 records its resync checkpoint in resync_offset only while clean:
# make sure the safe-mode timer has run however slow the guest is
n=0; while [ "$(cat /sys/block/md0/md/array_state)" != clean ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done
echo "STATE rs $(cat /sys/block/md0/md/array_state)"
mdvm-crash 0
`
	out := string(mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: script, Timeout: 300 * time.Second}))
	t.Logf("kernel before the crash:\n%s", out)
	kmd5 := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^MD5 (\S+) ([0-9a-f]{32})$`).FindAllStringSubmatch(out, -1) {
		kmd5[m[1]] = m[2]
	}
	if kmd5["rs"] == "" || kmd5["rc"] == "" || !strings.Contains(out, "SYNC rs resync ") || !strings.Contains(out, "SYNC rc recover ") || !strings.Contains(out, "STATE rs clean\n") {
		t.Fatalf("the kernel was not resyncing and recovering before the crash:\n%s", out)
	}

	cases := []struct {
		name    string
		devs    []string
		field   string // the superblock field of the offset
		exDev   string // the member that records it
		corrupt string // the member to corrupt below it
		// corruptAt: byte offset from the data offset; for raid5 a
		// parity block (stripe 0's parity is on role 2, the spare's).
		corruptAt int64
		action    string
	}{
		{"rs", r1, "resync_offset", r1[0], r1[1], 4096, "resync"},
		{"rc", []string{r5[0], r5[1], r5[3]}, "recovery_offset", r5[3], r5[3], 4096, "recover"},
	}
	var sets []kernelCheck
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sb := readSB12(t, c.exDev)
			off := sb.ResyncOffset
			if c.action == "recover" {
				off = sb.RecoveryOffset
				if sb.FeatureMap&superblock.FeatureRecoveryOffset == 0 {
					t.Fatalf("%s: no recovery offset recorded", c.exDev)
				}
			}
			size := sb.Size
			dataOff := int64(readSB12(t, c.corrupt).DataOffset)
			if off <= 16 || off >= size {
				t.Fatalf("the kernel left %s %d of %d sectors: not mid-way\n%s", c.field, off, size, hostExamine(t, c.exDev))
			}
			t.Logf("%s: the kernel recorded %s %d of %d sectors", c.name, c.field, off, size)
			junk := bytes.Repeat([]byte{0x5a}, 4096)
			below := dataOff*512 + c.corruptAt
			writeAt(t, c.corrupt, junk, below)
			// raid1: a block above the offset, not yet synced by the
			// kernel, differs too; the resumed resync must copy it.
			above := dataOff*512 + (int64(off)*512+(256<<10))/4096*4096
			if c.action == "resync" {
				writeAt(t, c.corrupt, junk, above)
			}

			md := "/dev/md/" + c.name
			s := serve(t, runDir, md, c.devs...)
			d := waitFor(t, runDir, md, c.action)
			if d.ActiveDevices != len(c.devs) {
				t.Errorf("after the %s: %d active devices, want %d", c.action, d.ActiveDevices, len(c.devs))
			}
			// The member files, read directly: below the offset nothing
			// was rewritten; above it the resync did its work.
			if got := readAt(t, c.corrupt, below, 4096); !bytes.Equal(got, junk) {
				t.Errorf("the %s rewrote a block below the recorded %s %d: it started over", c.action, c.field, off)
			}
			if c.action == "resync" {
				if got, want := readAt(t, c.corrupt, above, 4096), readAt(t, c.devs[0], above, 4096); !bytes.Equal(got, want) {
					t.Errorf("the resync did not copy a block above the recorded %s %d", c.field, off)
				}
			}
			if d = syncAction(t, runDir, md, "check"); d.Sync.Mismatches == 0 {
				t.Errorf("check after the resumed %s found no mismatch: the block corrupted below %s %d was rewritten (started over?)", c.action, c.field, off)
			} else {
				t.Logf("check after the resumed %s: %d mismatched sectors (the corruption below the offset)", c.action, d.Sync.Mismatches)
			}
			syncAction(t, runDir, md, "repair")
			if d = syncAction(t, runDir, md, "check"); d.Sync.Mismatches != 0 {
				t.Errorf("check after repair: %d mismatches", d.Sync.Mismatches)
			}
			sock := daemon.PathsFor(runDir, s.name).NBD()
			if got := md5hex(readArray(t, sock, arraySize(t, runDir, s.name))); got != kmd5[c.name] {
				t.Errorf("contents md5 %s, the kernel read %s before the crash", got, kmd5[c.name])
			}
			s.stop()
			sets = append(sets, kernelCheck{name: c.name, imgs: c.devs, md5: kmd5[c.name]})
		})
	}
	if t.Failed() {
		return
	}
	kernelChecks(t, sets)
}

// readAt reads n bytes at off from a member file.
func readAt(t *testing.T, path string, off int64, n int) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}
