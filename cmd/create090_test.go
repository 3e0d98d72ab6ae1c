package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCreate090 runs the real binary: create -e 0.90 for raid1 (with an
// internal bitmap), raid4, raid5, raid6, raid10 and linear starts the
// array, its initial resync or recovery runs, and stop leaves 0.90
// superblocks that the host's mdadm 4.2 reads as a clean array with
// every member active (its -E text is mdtool's -E text); assembling
// again works. raid0 is refused as mdadm 4.2 refuses it.
func TestCreate090(t *testing.T) {
	if _, err := exec.LookPath("mdadm"); err != nil {
		t.Fatal("mdadm is needed (make deps)")
	}
	bin := mdtoolBinary(t)
	dir := t.TempDir()
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "MDTOOL_START=") {
			env = append(env, e)
		}
	}
	env = append(env, "MDTOOL_RUN_DIR="+filepath.Join(dir, "run"), "MDTOOL_CONFIG=/dev/null", "MDTOOL_DEVICE=none")
	runBin := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return code, string(out)
	}
	cases := []struct {
		name  string
		args  []string
		n     int
		state string
	}{
		{"r1", []string{"-l1", "-n3", "--bitmap=internal"}, 3, "clean"},
		{"r4", []string{"-l4", "-n3"}, 3, "clean"},
		{"r5", []string{"-l5", "-n4", "-c64"}, 4, "clean"},
		{"r6", []string{"-l6", "-n4"}, 4, "clean"},
		{"r10", []string{"-l10", "-n4", "-pf2"}, 4, "clean"},
		{"lin", []string{"-llinear", "-n2"}, 2, "clean"},
	}
	for _, c := range cases {
		var devs []string
		for i := 0; i < c.n; i++ {
			devs = append(devs, sparse(t, dir, c.name+string(rune('0'+i))+".img", 24<<20))
		}
		md := "/dev/md/" + c.name
		code, out := runBin(append(append([]string{"--create", md, "-e0.90", "--run", "--homehost=testhost"}, c.args...), devs...)...)
		if code != 0 || !strings.HasSuffix(out, "mdtool: array "+md+" started.\n") {
			t.Fatalf("%s: create: exit %d: %s", c.name, code, out)
		}
		if code, out := runBin("wait", md); code != 0 && code != 1 {
			t.Errorf("%s: wait: exit %d: %s", c.name, code, out)
		}
		// mdadm's 0.90 detail: Preferred Minor, no Name, Events as hi.lo.
		if code, out := runBin("detail", md); code != 0 || !strings.Contains(out, "Version : 0.90\n") ||
			!strings.Contains(out, "   Preferred Minor : 127\n       Persistence : Superblock is persistent\n") ||
			strings.Contains(out, "Name :") || !strings.Contains(out, "            Events : 0.") {
			t.Errorf("%s: detail: exit %d\n%s", c.name, code, out)
		}
		if code, out := runBin("stop", md); code != 0 {
			t.Fatalf("%s: stop: exit %d: %s", c.name, code, out)
		}
		for i, d := range devs {
			mout, err := exec.Command("mdadm", "-E", d).CombinedOutput()
			if err != nil {
				t.Fatalf("%s: mdadm -E %s: %v\n%s", c.name, d, err, mout)
			}
			m := string(mout)
			if _, tout := runBin("-E", d); strings.ReplaceAll(tout, "mdtool", "mdadm") != m {
				t.Errorf("%s: -E %s: mdtool\n%s\nmdadm\n%s", c.name, d, tout, m)
			}
			for _, want := range []string{"Version : 0.90.00", "State : " + c.state + "\n", "Checksum : ", " - correct",
				"Raid Devices : " + string(rune('0'+c.n)), "Failed Devices : 0"} {
				if !strings.Contains(m, want) {
					t.Errorf("%s: member %d: mdadm -E lacks %q:\n%s", c.name, i, want, m)
				}
			}
			if strings.Count(m, "active sync") != c.n+1 {
				t.Errorf("%s: member %d: not every member active sync:\n%s", c.name, i, m)
			}
		}
		code, out = runBin(append([]string{"--assemble", md}, devs...)...)
		if code != 0 {
			t.Fatalf("%s: assemble: exit %d: %s", c.name, code, out)
		}
		if code, out := runBin("stop", md); code != 0 {
			t.Fatalf("%s: stop after assemble: exit %d: %s", c.name, code, out)
		}
	}
	d0, d1 := sparse(t, dir, "z0.img", 24<<20), sparse(t, dir, "z1.img", 24<<20)
	code, out := runBin("--create", "/dev/md/z", "-e0.90", "--run", "-l0", "-n2", d0, d1)
	if code != 1 || out != "mdtool: 0.90 metadata does not support layouts for RAID0\n" {
		t.Errorf("raid0: exit %d: %q", code, out)
	}
}
