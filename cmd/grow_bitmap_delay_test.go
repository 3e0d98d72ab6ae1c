package cmd

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestGrowBitmapDelay: grow --bitmap=internal --delay=N (mdadm 4.2's
// tests/05r1-grow-internal) writes N as the bitmap's daemon sleep, as
// add_internal_bitmap does with c->delay; without it mdadm's default (5);
// parse_num's refusals are mdadm's.
func TestGrowBitmapDelay(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	r1 := mkArray(t, dir, "/dev/md/gd1", 2, 8<<20, "-l1", "-n2", "--assume-clean")
	s1 := serve(t, runDir, "/dev/md/gd1", r1...)
	defer s1.stop()
	for _, bad := range []string{"0", "x"} {
		code, _, errs := mdtool(t, "grow", "/dev/md/gd1", "--bitmap=internal", "--delay="+bad, "--run-dir", runDir)
		if code != 2 || errs != "mdtool: invalid delay: "+bad+"\n" {
			t.Errorf("--delay=%s: exit %d %q", bad, code, errs)
		}
	}
	for _, c := range []struct {
		args  []string
		sleep string
	}{
		{[]string{"--bitmap=internal", "--bitmap-chunk=4", "--delay=1"}, "1s"},
		{[]string{"--bitmap=none"}, ""},
		{[]string{"-b", "internal", "-d", "17"}, "17s"},
		{[]string{"--bitmap=none"}, ""},
		{[]string{"--bitmap=internal"}, "5s"},
	} {
		args := append(append([]string{"--grow", "/dev/md/gd1"}, c.args...), "--run-dir", runDir)
		if code, out, errs := mdtool(t, args...); code != 0 {
			t.Fatalf("%v: exit %d %q %q", c.args, code, out, errs)
		}
		if c.sleep == "" {
			continue
		}
		if code, out, _ := mdtool(t, "-X", r1[1]); code != 0 || !strings.Contains(out, "          Daemon : "+c.sleep+" flush period\n") {
			t.Errorf("-X after %v: exit %d\n%s", c.args, code, out)
		}
	}
}
