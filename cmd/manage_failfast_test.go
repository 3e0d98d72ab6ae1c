package cmd

import (
	"path/filepath"
	"strings"
	"testing"
)

// --add --failfast and --add --nofailfast (mdadm 4.2's tests/05r1-failfast):
// the added member's devflags, also for a former member whose superblock
// had the flag.
func TestManageFailFast(t *testing.T) {
	bin := mdtoolBinary(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	run := combinedRunner(t, bin, runDir)
	var d []string
	for _, n := range []string{"a", "b", "c"} {
		d = append(d, sparse(t, dir, n+".img", 20<<20))
	}
	t.Cleanup(func() { run("-Ss") })
	steps := [][]string{
		{"-CR", "/dev/md0", "-l1", "-n2", "--failfast", "--assume-clean", d[0], d[1]},
		{"-S", "/dev/md0"},
		{"-A", "--run", "/dev/md0", d[1]},
		{"/dev/md0", "-a", "--nofailfast", d[0]},
		{"--wait", "/dev/md0"},
		{"/dev/md0", "-a", "--failfast", d[2]},
		{"-S", "/dev/md0"},
	}
	for _, s := range steps {
		if code, out := run(s...); code != 0 && s[0] != "--wait" {
			t.Fatalf("%v: %d %s", s, code, out)
		}
	}
	for i, want := range []bool{false, true, true} {
		_, out := run("-E", d[i])
		if got := strings.Contains(out, "Flags : failfast\n"); got != want {
			t.Errorf("-E %s: failfast %v, want %v\n%s", d[i], got, want, out)
		}
	}
}
