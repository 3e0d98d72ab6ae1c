package cmd

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
)

// TestKernelAdd090 runs the sequence of mdadm's tests/05r1-n3-bitmapfile
// on 0.90 arrays (raid1 with an internal bitmap, raid5) in two worlds
// from the same starting images (created and filled by mdtool): assemble,
// --fail dev2, stop, assemble without dev2, --zero-superblock dev2,
// --add dev2, wait for the recovery, stop. mdadm 4.2 and Linux 6.1 do it
// in the VM on one copy, mdtool on the host on the other (one boot).
// Host mdadm -E of every member must be the same text in both worlds
// (events, disk table, counts, this_disk; times, checksums and the
// device numbers of the table normalised), and the kernel assembles
// mdtool's result clean with the contents written, mismatch_cnt 0 after
// a check and no dirty bitmap chunks.
func TestKernelAdd090(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	arrays := []*kernelArray{
		{name: "md20", n: 3, mib: 16, create: []string{"-e0.90", "-l1", "-n3", "--bitmap=internal", "--bitmap-chunk=256K"}, bitmap: true},
		{name: "md21", n: 3, mib: 16, create: []string{"-e0.90", "-l5", "-n3", "-c64"}},
	}
	var disks []mdvm.Disk
	guest := func() string { return "/dev/vd" + string(rune('a'+len(disks))) }
	kernelImgs := map[string][]string{}
	hostSnaps := map[string]string{}
	var script strings.Builder
	script.WriteString("snap() { sync; echo 3 > /proc/sys/vm/drop_caches; for d in $3; do echo \"SNAP $1-$2-$d BEGIN\"; mdadm -E $d 2>&1; echo \"SNAP END\"; done; }\n")
	for _, a := range arrays {
		md := "/dev/" + a.name
		devs := mkArray(t, dir, md, a.n, a.mib<<20, append([]string{"--assume-clean"}, a.create...)...)
		s := serve(t, runDir, md, devs...)
		a.md5 = scribble(t, s.nbdURI(), arraySize(t, runDir, a.name))
		s.stop()
		// the kernel's copy
		var kg []string
		for i, d := range devs {
			k := filepath.Join(dir, fmt.Sprintf("k-%s-d%d.img", a.name, i))
			run(t, "cp", "--sparse=always", d, k)
			kernelImgs[a.name] = append(kernelImgs[a.name], k)
			kg = append(kg, guest())
			disks = append(disks, mdvm.Disk{Path: k, Mode: mdvm.RW})
		}
		all := strings.Join(kg, " ")
		snap := func(step string) {
			fmt.Fprintf(&script, "snap %s %s '%s'\n", a.name, step, all)
			for i, d := range devs {
				hostSnaps[fmt.Sprintf("%s-%s-%s", a.name, step, kg[i])] = examine090Any(d)
			}
		}
		fmt.Fprintf(&script, "mdadm --assemble %s %s\n", md, all)
		s = serve(t, runDir, md, devs...)
		snap("1assembled")
		fmt.Fprintf(&script, "mdadm %s --fail %s\n", md, kg[2])
		manage(t, runDir, md, "--fail", devs[2])
		snap("2failed")
		fmt.Fprintf(&script, "mdadm --stop %s\n", md)
		s.stop()
		snap("3stopped")
		fmt.Fprintf(&script, "mdadm --assemble --run %s %s\n", md, strings.Join(append(kg[:2:2], kg[3:]...), " "))
		s = serve(t, runDir, md, append([]string{"--run"}, append(devs[:2:2], devs[3:]...)...)...)
		snap("4degraded")
		fmt.Fprintf(&script, "mdadm --zero-superblock %s\n", kg[2])
		if code, _, errs := mdtool(t, "--zero-superblock", devs[2]); code != 0 {
			t.Fatalf("zero-superblock: exit %d: %s", code, errs)
		}
		fmt.Fprintf(&script, "mdadm %s --add %s\n", md, kg[2])
		fmt.Fprintf(&script, "sleep 0.2; mdadm --wait %s; cat /proc/mdstat\n", md)
		manage(t, runDir, md, "--add", devs[2])
		waitFor(t, runDir, md, "recover")
		snap("5recovered")
		fmt.Fprintf(&script, "mdadm --stop %s\n", md)
		s.stop()
		a.devs = devs
		for _, d := range devs {
			a.guest = append(a.guest, guest())
			disks = append(disks, mdvm.Disk{Path: d, Mode: mdvm.COW})
		}
	}
	script.WriteString(checkScript(arrays, 30))
	out := mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: script.String(), Timeout: 900 * time.Second})
	res := parseRes(string(out))
	for _, a := range arrays {
		r, ok := res[a.name]
		switch {
		case !ok:
			t.Errorf("%s: no result:\n%s", a.name, out)
		case r.state != "clean" || r.mismatch != "0" || r.md5 != a.md5 || (a.bitmap && r.dirty != "0"):
			t.Errorf("%s: the kernel sees mdtool's result in state %q, mismatch_cnt %s, md5 %s (written %s), dirty bitmap chunks %s",
				a.name, r.state, r.mismatch, r.md5, a.md5, r.dirty)
		}
		for i := range a.devs {
			want := examine090(t, kernelImgs[a.name][i])
			got := examine090(t, a.devs[i])
			if want != got {
				t.Errorf("%s member %d at the end: mdadm -E of the kernel's\n%s\nand of mdtool's\n%s", a.name, i, want, got)
			}
		}
	}
	// every step: the kernel's superblocks (mdadm -E in the guest) and mdtool's
	guestSnaps := map[string]string{}
	for _, g := range reSnap.FindAllStringSubmatch(strings.ReplaceAll(string(out), "\r", ""), -1) {
		guestSnaps[g[1]] = normalise090(g[2], g[1][strings.LastIndex(g[1], "-")+1:])
	}
	keys := make([]string, 0, len(hostSnaps))
	for k := range hostSnaps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t.Logf("%d superblocks compared at 5 steps, %d from the guest", len(keys), len(guestSnaps))
	for _, k := range keys {
		if g, ok := guestSnaps[k]; !ok {
			t.Errorf("%s: no snapshot from the guest", k)
		} else if g != hostSnaps[k] {
			t.Errorf("%s: mdadm -E in the kernel's world\n%s\nin mdtool's\n%s", k, g, hostSnaps[k])
		}
	}
}

var reSnap = regexp.MustCompile(`(?s)SNAP (\S+) BEGIN\n(.*?)SNAP END\n`)

// examine090Any is examine090 of a device that may hold no superblock.
func examine090Any(path string) string {
	out, _ := exec.Command("mdadm", "-E", path).CombinedOutput()
	return normalise090(string(out), path)
}

var (
	reExamine090Disk  = regexp.MustCompile(`(?m)^(this|\s+\d+)\s+(\d+)\s+\d+\s+\d+\s+(\d+)\s+(.*?)\s*(/dev/\S*)?\s*$`)
	reExamine090Local = regexp.MustCompile(` \(local to host [^)]*\)`)
)

// examine090 is host mdadm -E of a 0.90 member with what differs between
// the worlds by nature normalised: times, the checksum, the homehost
// note, the member's path and the device numbers of the disk table.
func examine090(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("mdadm", "-E", path).CombinedOutput()
	if err != nil {
		t.Fatalf("mdadm -E %s: %v\n%s", path, err, out)
	}
	return normalise090(string(out), path)
}

// normalise090 is examine090's normalisation of mdadm -E's text of path.
func normalise090(s, path string) string {
	s = reExamine090Disk.ReplaceAllString(s, "$1 $2 MAJ MIN $3 $4")
	s = strings.ReplaceAll(s, path, "DEV")
	s = reMdTime.ReplaceAllString(s, "TIME")
	s = reMdChecksum.ReplaceAllString(s, "Checksum : CSUM - ")
	return reExamine090Local.ReplaceAllString(s, "")
}
