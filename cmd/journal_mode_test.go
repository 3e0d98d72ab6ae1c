package cmd

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestActionJournalMode: action --journal-mode sets md's journal_mode of a
// journaled raid5 served by the daemon and detail --json reads it back
// (only for an array with a journal); md's refusals are worded as a sysfs
// write's: write-back on a degraded array is EINVAL, any mode on an array
// without a journal ENODEV; a name md does not know is a usage error.
func TestActionJournalMode(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	jdev := sparse(t, dir, "jm-journal.img", 8<<20)
	devs := mkArray(t, dir, "/dev/md/jm", 4, 8<<20, "-l5", "-n4", "--assume-clean", "--write-journal", jdev)
	s := serve(t, runDir, "/dev/md/jm", append(devs, jdev)...)
	defer s.stopIfRunning()
	plain := mkArray(t, dir, "/dev/md/nj", 3, 8<<20, "-l5", "-n3", "--assume-clean")
	p := serve(t, runDir, "/dev/md/nj", plain...)
	defer p.stopIfRunning()

	mode := func(md string) any { return detailJSONOf(t, runDir, md)["journal_mode"] }
	if got := mode("/dev/md/jm"); got != "write-through" {
		t.Errorf("a journaled array starts with journal_mode %v, want write-through", got)
	}
	if got, ok := detailJSONOf(t, runDir, "/dev/md/nj")["journal_mode"]; ok {
		t.Errorf("detail --json of an array without a journal has journal_mode %v", got)
	}
	for _, tc := range []struct {
		name string
		args []string // before --run-dir
		fail string   // a member to --fail first
		code int
		errs string
		want any // journal_mode of /dev/md/jm after the step
	}{
		{"write-back", []string{"action", "--journal-mode=write-back", "/dev/md/jm"}, "", 0, "", "write-back"},
		{"write-back again", []string{"action", "--journal-mode", "write-back", "/dev/md/jm"}, "", 0, "", "write-back"},
		{"write-through with an action", []string{"action", "check", "--journal-mode=write-through", "/dev/md/jm"}, "", 0, "", "write-through"},
		{"mdadm form", []string{"--action=idle", "--journal-mode=write-back", "/dev/md/jm"}, "", 0, "", "write-back"},
		{"bad value", []string{"action", "--journal-mode=write-around", "/dev/md/jm"}, "", 2, "", "write-back"},
		{"empty value", []string{"action", "--journal-mode=", "/dev/md/jm"}, "", 2, "", "write-back"},
		{"no journal", []string{"action", "--journal-mode=write-back", "/dev/md/nj"}, "", 1,
			"mdtool: cannot set journal_mode of /dev/md/nj: No such device\n", "write-back"},
		{"no journal, write-through", []string{"action", "--journal-mode=write-through", "/dev/md/nj"}, "", 1,
			"mdtool: cannot set journal_mode of /dev/md/nj: No such device\n", "write-back"},
		{"not running", []string{"action", "--journal-mode=write-back", "/dev/md/none"}, "", 1,
			"mdtool: Couldn't open /dev/md/none: No such file or directory\n", "write-back"},
		// md's raid5_error turns write-back off when a member fails
		// (r5c_update_on_rdev_error, in a work item: waited for below)
		{"degraded", []string{"action", "--journal-mode=write-back", "/dev/md/jm"}, devs[1], 1,
			"mdtool: cannot set journal_mode of /dev/md/jm: Invalid argument\n", "write-through"},
		{"degraded, write-through", []string{"action", "--journal-mode=write-through", "/dev/md/jm"}, "", 0, "", "write-through"},
	} {
		if tc.fail != "" {
			if got := mode("/dev/md/jm"); got != "write-back" {
				t.Fatalf("%s: journal_mode %v before the --fail, want write-back", tc.name, got)
			}
			manage(t, runDir, "/dev/md/jm", "--fail", tc.fail)
			for deadline := time.Now().Add(time.Minute); mode("/dev/md/jm") != "write-through"; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: still write-back a minute after a member failed", tc.name)
				}
			}
		}
		code, out, errs := mdtool(t, append(tc.args, "--run-dir", runDir)...)
		if code != tc.code || out != "" || (tc.code != 2 && errs != tc.errs) || (tc.code == 2 && !strings.Contains(errs, "--journal-mode must be")) {
			t.Errorf("%s: %v: exit %d %q %q, want %d %q", tc.name, tc.args, code, out, errs, tc.code, tc.errs)
		}
		if got := mode("/dev/md/jm"); got != tc.want {
			t.Errorf("%s: journal_mode %v, want %v", tc.name, got, tc.want)
		}
	}
	if got, ok := detailJSONOf(t, runDir, "/dev/md/nj")["journal_mode"]; ok {
		t.Errorf("detail --json of an array without a journal has journal_mode %v", got)
	}
	// -D's text has no such line (mdadm's Detail prints none).
	_, out, _ := mdtool(t, "-D", "/dev/md/jm", "--run-dir", runDir)
	for _, w := range []string{"journal_mode", "Journal Mode", "write-back", "write-through"} {
		if !strings.Contains(out, "Consistency Policy : journal") || strings.Contains(out, w) {
			t.Errorf("-D mentions the journal mode (%q):\n%s", w, out)
		}
	}
	s.stop()
	p.stop()
}
