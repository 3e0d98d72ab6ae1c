package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An -A given the members of an array that -I has begun to collect skips
// the waiting ones as busy, merges them ("Merging with already-assembled")
// and starts the array under the waiting set's name; the set is gone
// afterwards (mdadm 4.2's tests/03assem-incr: a later -I counts from 1).
func TestAssembleMergesIncremental(t *testing.T) {
	bin := mdtoolBinary(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/mg", 3, 16<<20, "-l5", "-n3", "--assume-clean")
	run := combinedRunner(t, bin, runDir)
	t.Cleanup(func() { mdtool(t, "stop", "--run-dir", runDir, "/dev/md/mg") })
	steps := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"-I", "--config=none", devs[1]}, 0, "mdtool: " + devs[1] + " attached to /dev/md/mg, not enough to start (1).\n"},
		{append([]string{"-A", "/dev/md0"}, devs...), 0, "mdtool: " + devs[1] + " is busy - skipping\n" +
			"mdtool: Merging with already-assembled /dev/md/mg\nmdtool: /dev/md/mg has been started with 3 drives.\n"},
		{[]string{"-S", "/dev/md/mg"}, 0, "mdtool: stopped /dev/md/mg\n"},
		{[]string{"-I", "--config=none", devs[2]}, 0, "mdtool: " + devs[2] + " attached to /dev/md/mg, not enough to start (1).\n"},
		// given its own name, -A merges without saying so
		{append([]string{"-A", "/dev/md/mg"}, devs...), 0, "mdtool: " + devs[2] + " is busy - skipping\nmdtool: /dev/md/mg has been started with 3 drives.\n"},
	}
	for _, s := range steps {
		code, out := run(s.args...)
		if code != s.code || out != s.out {
			t.Errorf("%v: exit %d %q, want %d %q", s.args, code, out, s.code, s.out)
		}
	}
	if m, _ := os.ReadFile(filepath.Join(runDir, "map")); strings.TrimSpace(string(m)) != "" {
		t.Errorf("map after the merge: %q", m)
	}
}
