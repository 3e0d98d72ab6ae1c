package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// 0.90 arrays by their preferred minor (mdadm 4.2's tests/03r5assem and
// 04r0update): -m N and an ARRAY line's super-minor=N pick the members
// whose superblock has it, other members have the "wrong super-minor",
// and --update=super-minor stores the md device's minor.
func TestAssembleSuperMinor(t *testing.T) {
	bin := mdtoolBinary(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	run := combinedRunner(t, bin, runDir)
	var devs []string
	for i := 0; i < 2; i++ {
		devs = append(devs, sparse(t, dir, "d"+string(rune('0'+i))+".img", 16<<20))
	}
	extra := sparse(t, dir, "empty.img", 16<<20)
	t.Cleanup(func() { run("-Ss") })
	if code, out := run(append([]string{"-CR", "-e0.90", "/dev/md1", "-l1", "-n2", "--assume-clean"}, devs...)...); code != 0 {
		t.Fatalf("create: %d %s", code, out)
	}
	run("-S", "/dev/md1")
	all := append(append([]string{}, devs...), extra)
	code, out := run(append([]string{"-A", "/dev/md1", "-m", "1"}, all...)...)
	if code != 0 || !strings.HasSuffix(out, "mdtool: /dev/md1 has been started with 2 drives.\n") ||
		!strings.Contains(out, "mdtool: No super block found on "+extra+" (Expected magic a92b4efc, got 00000000)\nmdtool: no RAID superblock on "+extra+"\n") {
		t.Errorf("-A -m 1: %d %q", code, out)
	}
	run("-S", "/dev/md1")
	code, out = run(append([]string{"-A", "/dev/md1", "-m", "3"}, devs...)...)
	if code == 0 || !strings.Contains(out, "mdtool: "+devs[0]+" has wrong super-minor.\n") {
		t.Errorf("-A -m 3: %d %q", code, out)
	}
	conf := filepath.Join(dir, "mdadm.conf")
	if err := os.WriteFile(conf, []byte("DEVICE "+strings.Join(devs, " ")+"\narray /dev/md1 super-minor=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := run("-As", "-c", conf); code != 0 || !strings.Contains(out, "/dev/md1 has been started with 2 drives.") {
		t.Errorf("-As super-minor=1: %d %q", code, out)
	}
	run("-S", "/dev/md1")
	if code, out := run(append([]string{"-A", "/dev/md2", "--update=super-minor"}, devs...)...); code != 0 {
		t.Errorf("--update=super-minor: %d %q", code, out)
	}
	run("-S", "/dev/md2")
	if _, out := run("-E", devs[0]); !strings.Contains(out, "Preferred Minor : 2\n") {
		t.Errorf("-E after --update=super-minor:\n%s", out)
	}
}
