package cmd

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"mdtool/engine/backupfile"
	"mdtool/internal/daemon"
	"mdtool/internal/mdvm"
	"mdtool/superblock"
)

// TestKernelReshapeCrashBackup: an in-place reshape run by Linux 6.1 and
// mdadm 4.2's backup child (--backup-file on ext4 in the guest) is cut by
// a guest crash a third of the way, and both tools restart it from what
// the kernel and mdadm left: mdtool from copies of the members and the
// backup file, mdadm 4.2 and the kernel from the originals in a second
// boot.
//   - cs: raid5 4 devices, chunk 64K -> 128K (the same data devices:
//     every window goes through the backup file).
//   - sh: raid5 4 -> 3 devices (3 -> 2 data devices: a shrink, backwards
//     from the end).
//
// mdtool must refuse cs without the file (Grow_restart), finish both with
// it to exactly the contents the kernel's restart gives, and the kernel
// must find mdtool's result clean (check: mismatch_cnt 0, same md5). The
// shrink must lose nothing: md's safety rule records every row it could
// not otherwise restart from.
//
// The chunk change may lose data in both worlds, and the test says so
// without failing: mdadm 4.2's start_reshape sets sync_max to "max" for
// native metadata and md 6.1 refuses to lower it while the reshape runs
// (EBUSY), so its child cannot hold md back to what it has backed up; md
// runs ahead of the backup and of the recorded position, and rows it
// moved beyond the backup are read in the old layout by any restart.
// When md has run so far that the backup's section lies wholly behind
// the recorded position (seen on a loaded host), Grow_restart finds it
// not needed and has no rule to go on for the same count: mdtool must
// refuse the restart with the file too, and so must mdadm 4.2. When the
// crash finds mdadm's header empty (its child had just forgotten a
// part), mdadm 4.2 refuses and mdtool restarts from the recorded
// position: a known difference, logged, not yet fixed (slideForgotten
// cannot tell that header from its own clean stop).
func TestKernelReshapeCrashBackup(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	const memberSize = 24 << 20
	var cs, sh []string
	for i := 0; i < 4; i++ {
		cs = append(cs, sparse(t, dir, fmt.Sprintf("cs-d%d.img", i), memberSize))
	}
	for i := 0; i < 4; i++ {
		sh = append(sh, sparse(t, dir, fmt.Sprintf("sh-d%d.img", i), memberSize))
	}
	fsImg := filepath.Join(dir, "fs.img")
	if o, err := exec.Command("mkfs.ext4", "-q", "-F", fsImg, "16M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v %s", err, o)
	}
	// the data both arrays are filled with, from the host: a difference
	// can be located
	data := make([]byte, 4*memberSize)
	rand.New(rand.NewSource(7)).Read(data)
	dataImg := filepath.Join(dir, "data.img")
	if err := os.WriteFile(dataImg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var disks []mdvm.Disk
	for _, p := range append(append(append([]string{}, cs...), sh...), fsImg) {
		disks = append(disks, mdvm.Disk{Path: p, Mode: mdvm.RW})
	}
	disks = append(disks, mdvm.Disk{Path: dataImg, Mode: mdvm.COW})
	// Both reshapes throttled to 1 MB/s (mdadm's child raises
	// sync_speed_min for a same-count reshape: the loop lowers it again);
	// the guest crashes once each has done a third of its work.
	script := `
mkdir -p /bk; mount -t ext4 /dev/vdi /bk || echo MOUNT FAILED
mdadm --create /dev/md0 --run -l5 -n4 -c64 --assume-clean --homehost=any --name=cs /dev/vda /dev/vdb /dev/vdc /dev/vdd || echo CREATE FAILED
mdadm --create /dev/md1 --run -l5 -n4 -c64 --assume-clean --homehost=any --name=sh /dev/vde /dev/vdf /dev/vdg /dev/vdh || echo CREATE FAILED
dd if=/dev/vdj of=/dev/md0 bs=1M oflag=direct 2>/dev/null
dd if=/dev/vdj of=/dev/md1 bs=1M oflag=direct 2>/dev/null
echo "MD5 cs $(md5sum /dev/md0 | cut -d' ' -f1)"
mdadm --grow /dev/md1 --array-size=$(( $(cat /sys/block/md1/md/component_size) * 2 )) || echo ARRAYSIZE FAILED
echo "MD5 sh $(md5sum /dev/md1 | cut -d' ' -f1)"
echo 1000 > /proc/sys/dev/raid/speed_limit_min
echo 1000 > /proc/sys/dev/raid/speed_limit_max
mdadm --grow /dev/md0 --chunk=128 --backup-file=/bk/cs || echo GROW FAILED
mdadm --grow /dev/md1 --raid-devices=3 --backup-file=/bk/sh || echo GROW FAILED
third() { set -- $(cat /sys/block/$1/md/sync_completed); [ "$1" != none ] && [ $(( $1 * 3 )) -ge "$3" ]; }
n=0
while [ $n -lt 3000 ]; do
	for m in md0 md1; do echo 1000 > /sys/block/$m/md/sync_speed_min; echo 1000 > /sys/block/$m/md/sync_speed_max; done
	third md0 && third md1 && break
	grep -q reshape /sys/block/md0/md/sync_action && grep -q reshape /sys/block/md1/md/sync_action || break
	sleep 0.1; n=$((n+1))
done
for m in md0 md1; do echo "SYNC $m $(cat /sys/block/$m/md/sync_action) $(cat /sys/block/$m/md/sync_completed) pos=$(cat /sys/block/$m/md/reshape_position)"; done
mdvm-crash 0
`
	out := string(mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: script, Modules: []string{"ext4"}, Timeout: 600 * time.Second}))
	t.Logf("kernel before the crash:\n%s", out)
	if strings.Contains(out, "FAILED") {
		t.Fatalf("VM:\n%s", out)
	}
	kmd5 := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^MD5 (\S+) ([0-9a-f]{32})$`).FindAllStringSubmatch(out, -1) {
		kmd5[m[1]] = m[2]
	}
	if kmd5["cs"] == "" || kmd5["sh"] == "" || !strings.Contains(out, "SYNC md0 reshape ") || !strings.Contains(out, "SYNC md1 reshape ") {
		t.Fatalf("the kernel was not reshaping both arrays before the crash:\n%s", out)
	}
	// the crash may leave the backup files' last writes in the journal
	e2fsckReplay(t, fsImg)

	cases := []struct {
		name   string
		devs   []string
		chunk  string // the new chunk in KiB
		disks  float64
		refuse bool // assemble without the file must refuse
	}{
		{"cs", cs, "128", 4, true},
		{"sh", sh, "64", 3, false},
	}
	// mdtool restarts copies; the kernel restarts the originals in the
	// second boot, with mdadm and the same backup file
	mine := map[string][]string{}
	mmd5 := map[string]string{}
	refused := map[string]bool{} // mdtool refused the restart with the file too
	var sets []kernelCheck
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bu := filepath.Join(dir, c.name+".backup")
			debugfsDump(t, fsImg, "/"+c.name, bu)
			sb := readSB12(t, c.devs[0])
			if sb.FeatureMap&superblock.FeatureReshapeActive == 0 {
				t.Fatalf("the crash left no reshape in progress:\n%s", hostExamine(t, c.devs[0]))
			}
			pos := sb.ReshapePosition
			hb, err := os.ReadFile(bu)
			if err != nil {
				t.Fatal(err)
			}
			if h, err := backupfile.Decode(hb); err != nil {
				t.Logf("%s: recorded position %d, backup header: %v", c.name, pos, err)
			} else {
				t.Logf("%s: recorded position %d, backup sections %+v", c.name, pos, h.Sections())
			}
			var devs []string
			for i, p := range c.devs {
				q := filepath.Join(dir, fmt.Sprintf("mt-%s-%d.img", c.name, i))
				copyFile(t, p, q)
				devs = append(devs, q)
			}
			mine[c.name] = devs
			md := "/dev/md/" + c.name
			if c.refuse {
				args := append([]string{"--assemble", "--foreground", md, "--run-dir", runDir}, devs...)
				if code, _, errs := mdtool(t, args...); code != 1 || !strings.Contains(errs, "Failed to restore critical section") {
					t.Fatalf("assemble without the backup file: exit %d %q", code, errs)
				}
			}
			mbu := bu + ".mdtool"
			copyFile(t, bu, mbu)
			s, code := tryServe(t, runDir, md, append([]string{"--backup-file=" + mbu}, devs...)...)
			if s == nil {
				// md ran past mdadm's backup, whose section now lies
				// wholly behind the recorded position, or mdadm's child
				// had just forgotten its part (forget_backup: an empty
				// header, md possibly far past the position): Grow_restart
				// finds nothing needed and, for the same count, no rule
				// lets it go on; mdtool refuses as it does (the kernel's
				// side must refuse too, below)
				if code != 1 {
					t.Fatalf("assemble with the backup file: exit %d", code)
				}
				refused[c.name] = true
				t.Logf("%s: the backup lies behind the recorded position %d: refused with the file too", c.name, pos)
				return
			}
			reshapeFinished(t, runDir, md)
			d := detailJSONOf(t, runDir, md)
			if d["raid_devices"] != c.disks || fmt.Sprint(d["chunk_size_kib"]) != c.chunk {
				t.Errorf("after the restart: raid_devices %v chunk %v, want %v %s", d["raid_devices"], d["chunk_size_kib"], c.disks, c.chunk)
			}
			sock := daemon.PathsFor(runDir, s.name).NBD()
			got := readArray(t, sock, arraySize(t, runDir, s.name))
			mmd5[c.name] = md5hex(got)
			if mmd5[c.name] != kmd5[c.name] {
				first, last := -1, 0
				for off := 0; off < len(got); off += 4096 {
					if !bytes.Equal(got[off:off+4096], data[off:off+4096]) {
						if first < 0 {
							first = off
						}
						last = off + 4096
					}
				}
				t.Logf("%s: mdtool's restart reads other data than the kernel before the crash: array sectors [%d, %d) differ", c.name, first>>9, last>>9)
			}
			s.stop()
			sets = append(sets, kernelCheck{name: c.name, imgs: devs, md5: mmd5[c.name]})
		})
	}
	if t.Failed() {
		return
	}
	// The second boot: mdadm 4.2 restarts the kernel's originals with the
	// backup files (Grow_restart), the kernel finishes the reshapes; then
	// it checks mdtool's results.
	disks = disks[:0]
	var b strings.Builder
	b.WriteString("mkdir -p /bk; mount -t ext4 /dev/vdi /bk || echo MOUNT FAILED\n")
	for _, p := range append(append(append([]string{}, cs...), sh...), fsImg) {
		disks = append(disks, mdvm.Disk{Path: p, Mode: mdvm.COW})
	}
	for i, c := range cases {
		// mdadm 4.2 starts the array, then dies of a segmentation fault
		// in the guest (its reshape continuation): the kernel goes on
		fmt.Fprintf(&b, "mdadm --assemble /dev/md%d --backup-file=/bk/%s %s; echo \"RESTART %s rc=$?\"\n", i, c.name, guestDevs(4*i, 4), c.name)
		fmt.Fprintf(&b, "mdadm --wait /dev/md%d; sleep 1; mdadm --wait /dev/md%d\n", i, i)
		fmt.Fprintf(&b, "echo \"KSTATE %s $(cat /sys/block/md%d/md/array_state 2>/dev/null || echo none)\"\n", c.name, i)
		fmt.Fprintf(&b, "echo \"KRESTART %s $(cat /sys/block/md%d/md/raid_disks) $(cat /sys/block/md%d/md/chunk_size) $(md5sum /dev/md%d | cut -d' ' -f1)\"\n", c.name, i, i, i)
		fmt.Fprintf(&b, "mdadm --stop /dev/md%d\n", i)
	}
	b.WriteString("umount /bk\n")
	for i, k := range sets {
		n := len(disks)
		for _, p := range k.imgs {
			disks = append(disks, mdvm.Disk{Path: p, Mode: mdvm.COW})
		}
		md, sys := fmt.Sprintf("/dev/md%d", 10+i), fmt.Sprintf("/sys/block/md%d/md", 10+i)
		fmt.Fprintf(&b, "mdadm --assemble %s %s || echo ASSEMBLY FAILED %s\n", md, guestDevs(n, len(k.imgs)), k.name)
		fmt.Fprintf(&b, "echo check > %s/sync_action; sleep 0.2; mdadm --wait %s\n", sys, md)
		fmt.Fprintf(&b, "echo \"RES %s state=$(cat %s/array_state) mismatch=$(cat %s/mismatch_cnt) last=$(cat %s/last_sync_action) md5=$(md5sum %s | cut -d' ' -f1)\"\n", k.name, sys, sys, sys, md)
		fmt.Fprintf(&b, "mdadm --stop %s\n", md)
	}
	out = string(mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: b.String(), Modules: []string{"ext4"}, Timeout: 600 * time.Second}))
	t.Logf("the kernel's restart and check:\n%s", out)
	if strings.Contains(out, "FAILED") {
		t.Fatalf("VM:\n%s", out)
	}
	for _, c := range cases {
		if refused[c.name] {
			st := regexp.MustCompile(`(?m)^KSTATE ` + c.name + ` (\S+)$`).FindStringSubmatch(out)
			if st == nil || st[1] != "none" && st[1] != "inactive" && st[1] != "clear" {
				t.Errorf("%s: mdtool refused the restart, the kernel's array is %v", c.name, st)
			} else {
				t.Logf("%s: mdtool and mdadm 4.2 both refuse the restart (array %s)", c.name, st[1])
			}
			continue
		}
		if st := regexp.MustCompile(`(?m)^KSTATE ` + c.name + ` (\S+)$`).FindStringSubmatch(out); st != nil && (st[1] == "none" || st[1] == "inactive") {
			t.Errorf("%s: mdadm 4.2 refused the restart, mdtool restarted it (md5 %s, before the crash %s)", c.name, mmd5[c.name], kmd5[c.name])
			continue
		}
		m := regexp.MustCompile(`(?m)^KRESTART ` + c.name + ` (\d+) (\d+) ([0-9a-f]{32})$`).FindStringSubmatch(out)
		switch {
		case m == nil:
			t.Errorf("%s: no result from the kernel's restart", c.name)
		case m[1] != fmt.Sprint(c.disks) || m[2] != fmt.Sprint(kib(c.chunk)): // chunk_size: bytes
			t.Errorf("%s: the kernel's restart ended with %s devices, chunk %s", c.name, m[1], m[2])
		case m[3] != mmd5[c.name]:
			t.Errorf("%s: mdtool's restart reads md5 %s, mdadm 4.2 and the kernel's %s (before the crash: %s)", c.name, mmd5[c.name], m[3], kmd5[c.name])
		case m[3] != kmd5[c.name]:
			t.Logf("%s: mdtool and the kernel restart to the same contents, which differ from those before the crash: md ran ahead of mdadm 4.2's backup", c.name)
		default:
			t.Logf("%s: mdtool and the kernel restart to the contents before the crash", c.name)
		}
	}
	if kmd5["sh"] != mmd5["sh"] {
		t.Errorf("sh: the shrink lost data (md5 %s, before the crash %s)", mmd5["sh"], kmd5["sh"])
	}
	for _, k := range sets {
		m := regexp.MustCompile(`(?m)^RES ` + k.name + ` state=(\S*) mismatch=(\S*) last=(\S*) md5=(\S*)$`).FindStringSubmatch(out)
		if m == nil || m[1] != "clean" || m[2] != "0" || m[3] != "check" || m[4] != k.md5 {
			t.Errorf("%s: the kernel's check of mdtool's result: %v (want clean, 0 after check, md5 %s)", k.name, m, k.md5)
		}
	}
}

// kib is a KiB count in bytes.
func kib(s string) int {
	n, _ := strconv.Atoi(s)
	return n << 10
}

// guestDevs names n guest disks from the i-th: /dev/vda ...
func guestDevs(i, n int) string {
	var d []string
	for j := i; j < i+n; j++ {
		d = append(d, "/dev/vd"+string(rune('a'+j)))
	}
	return strings.Join(d, " ")
}
