package cmd

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
)

// TestKernel090 checks 0.90 metadata both ways with Linux 6.1 and mdadm
// 4.2 (mdvm, one boot):
//
//  1. 0.90 arrays created (-e 0.90), written (full stripes and 4 KiB
//     writes) and stopped by mdtool are assembled by the kernel clean,
//     with the same contents, mismatch_cnt 0 after a check and no dirty
//     bitmap bits; host mdadm -E of every member prints mdtool's -E text;
//  2. 0.90 arrays mdadm creates and writes in the VM are assembled and
//     served by mdtool with the contents the kernel wrote.
func TestKernel090(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	ours := []*kernelArray{
		{name: "n1", n: 2, mib: 32, create: []string{"-e0.90", "-l1", "-n2", "--bitmap=internal"}, bitmap: true},
		{name: "n5", n: 3, mib: 32, create: []string{"-e0.90", "-l5", "-n3", "-c64"}},
		{name: "n6", n: 4, mib: 24, create: []string{"-e0.90", "-l6", "-n4", "-c64"}},
		{name: "n10", n: 4, mib: 24, create: []string{"-e0.90", "-l10", "-n4", "-c64", "-p", "f2"}},
		{name: "nlin", n: 2, mib: 24, create: []string{"-e0.90", "-llinear", "-n2"}},
	}
	theirs := []*kernelArray{
		{name: "k1", n: 2, mib: 32, create: []string{"-e0.90", "-l1", "-n2", "--bitmap=internal"}},
		{name: "k5", n: 3, mib: 32, create: []string{"-e0.90", "-l5", "-n3", "-c64"}},
		{name: "k10", n: 4, mib: 24, create: []string{"-e0.90", "-l10", "-n4", "-c64"}},
	}
	var disks []mdvm.Disk
	guest := func() string { return "/dev/vd" + string(rune('a'+len(disks))) }
	for _, a := range ours {
		opts := append([]string{"--assume-clean"}, a.create...)
		a.devs = mkArray(t, dir, "/dev/md/"+a.name, a.n, a.mib<<20, opts...)
		s := serve(t, runDir, "/dev/md/"+a.name, a.devs...)
		a.md5 = scribble(t, s.nbdURI(), arraySize(t, runDir, a.name))
		s.stop()
		for _, d := range a.devs {
			a.guest = append(a.guest, guest())
			disks = append(disks, mdvm.Disk{Path: d, Mode: mdvm.COW})
			mout, err := exec.Command("mdadm", "-E", d).CombinedOutput()
			if err != nil {
				t.Fatalf("mdadm -E %s: %v\n%s", d, err, mout)
			}
			// mdtool runs with the host name testhost here, mdadm with the
			// machine's: only mdtool says "local to host".
			code, tout, errs := mdtool(t, "-E", d)
			if tout = strings.Replace(tout, " (local to host testhost)", "", 1); code != 0 || tout != string(mout) {
				t.Errorf("%s: -E %s: mdtool (exit %d, %s)\n%s\nmdadm\n%s", a.name, d, code, errs, tout, mout)
			}
		}
	}
	var script strings.Builder
	script.WriteString(checkScript(ours, 0))
	for i, a := range theirs {
		for j := 0; j < a.n; j++ {
			a.devs = append(a.devs, sparse(t, dir, fmt.Sprintf("%s-d%d.img", a.name, j), a.mib<<20))
			a.guest = append(a.guest, guest())
			disks = append(disks, mdvm.Disk{Path: a.devs[j], Mode: mdvm.RW})
		}
		md := fmt.Sprintf("/dev/md%d", 10+i)
		fmt.Fprintf(&script, "mdadm --create %s --run %s %s\n", md, strings.Join(a.create, " "), strings.Join(a.guest, " "))
		fmt.Fprintf(&script, "mdadm --wait %s || true\n", md)
		fmt.Fprintf(&script, "dd if=/dev/urandom of=%s bs=1M oflag=direct 2>/dev/null || true\n", md)
		fmt.Fprintf(&script, "dd if=/dev/urandom of=%s bs=4k count=300 seek=77 oflag=direct 2>/dev/null\n", md)
		fmt.Fprintf(&script, "echo \"KMD5 %s $(md5sum %s | cut -d' ' -f1)\"\n", a.name, md)
		fmt.Fprintf(&script, "mdadm --stop %s\n", md)
	}
	out := mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: script.String(), Timeout: 900 * time.Second})
	res := parseRes(string(out))
	t.Logf("kernel on mdtool's 0.90 arrays: %+v", res)
	for _, a := range ours {
		r, ok := res[a.name]
		switch {
		case !ok:
			t.Errorf("%s: no result:\n%s", a.name, out)
		case r.state != "clean" || (r.mismatch != "0" && !(a.name == "nlin" && r.mismatch == "")) || r.md5 != a.md5 || (a.bitmap && r.dirty != "0"):
			// (linear has no sync_action, so no mismatch_cnt)
			t.Errorf("%s: kernel sees state %q, mismatch_cnt %s, md5 %s (mdtool wrote %s), dirty bitmap chunks %s",
				a.name, r.state, r.mismatch, r.md5, a.md5, r.dirty)
		}
	}
	kmd5 := map[string]string{}
	for _, g := range regexp.MustCompile(`(?m)^KMD5 (\S+) (\S+)$`).FindAllStringSubmatch(string(out), -1) {
		kmd5[g[1]] = g[2]
	}
	for _, a := range theirs {
		if kmd5[a.name] == "" {
			t.Fatalf("%s: the kernel did not report its contents:\n%s", a.name, out)
		}
		s := serve(t, runDir, "/dev/md/"+a.name, a.devs...)
		if got := readMD5(t, s.nbdURI(), arraySize(t, runDir, a.name)); got != kmd5[a.name] {
			t.Errorf("%s: mdtool reads md5 %s, the kernel wrote %s", a.name, got, kmd5[a.name])
		}
		s.stop()
	}
}
