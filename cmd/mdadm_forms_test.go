package cmd

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTranslateMissingForms: mdadm forms that used to be refused: long
// prefixes of a mode option (getopt_long), a manage operation as the
// first option (the md device follows it), --manage --stop.
func TestTranslateMissingForms(t *testing.T) {
	cases := []struct{ in, want string }{
		{"--zero /dev/sda", "zero-superblock /dev/sda"},
		{"--zero-super /dev/sda /dev/sdb", "zero-superblock /dev/sda /dev/sdb"},
		{"--examine-bit /dev/sda", "examine-bitmap /dev/sda"},
		{"--exam /dev/sda", "--exam /dev/sda"}, // ambiguous for getopt_long too
		{"--ex /dev/sda", "--ex /dev/sda"},     // ambiguous: examine, examine-bitmap, export, ...
		// mdadm 4.2's -r takes a value (mdadm_remove42.go): /dev/md0 here
		{"-r /dev/md0 /dev/sdb", "manage --remove /dev/sdb"},
		{"/dev/md0 -r /dev/sdb", "manage /dev/md0 --remove"},
		{"/dev/md0 -r /dev/sdb /dev/sdc", "manage /dev/md0 --remove /dev/sdc"},
		{"-ro /dev/md0", "manage --remove /dev/md0"},
		{"/dev/md0 -r", "manage /dev/md0 -r"},
		{"manage /dev/md0 -r /dev/sdb", "manage /dev/md0 -r /dev/sdb"},
		{"-F -r 5 --scan", "monitor -r 5 --scan"},
		{"--remove /dev/md0 /dev/sdb", "manage --remove /dev/md0 /dev/sdb"},
		{"--fail /dev/md0 /dev/sdb", "manage --fail /dev/md0 /dev/sdb"},
		{"-a /dev/md0 /dev/sdb", "manage -a /dev/md0 /dev/sdb"},
		{"--manage /dev/md0 --remove /dev/sdb", "manage /dev/md0 --remove /dev/sdb"},
		{"--manage --stop /dev/md0", "manage --stop /dev/md0"},
		{"--manage /dev/md0 --stop", "manage /dev/md0 --stop"},
	}
	env, _, _ := testEnv("")
	root := NewRoot(env)
	for _, c := range cases {
		got := strings.Join(translateMdadmArgs(root, strings.Fields(c.in)), " ")
		if got != c.want {
			t.Errorf("translate(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestManageFormsOnRunningArray: --remove MD DEV and --fail MD DEV act on the
// array; --manage --stop stops it with mdadm's "stopped" line; -Ss stops
// every array and, as mdadm's stop_scan, prints nothing (nor when no
// array runs).
func TestManageFormsOnRunningArray(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/mf", 3, 16<<20, "-l1", "-n3", "--assume-clean")
	s := serve(t, runDir, "/dev/md/mf", devs...)
	code, _, errs := mdtool(t, "--fail", "/dev/md/mf", devs[2], "--run-dir", runDir)
	if code != 0 || errs != "mdtool: set "+devs[2]+" faulty in /dev/md/mf\n" {
		t.Errorf("--fail MD DEV: exit %d: %q", code, errs)
	}
	// mdadm 4.2: "MD -r DEV" takes DEV for -r's value and does nothing.
	code, _, errs = mdtool(t, "/dev/md/mf", "-r", devs[2], "--run-dir", runDir)
	if code != 0 || errs != "" {
		t.Errorf("MD -r DEV: exit %d: %q", code, errs)
	}
	code, _, errs = mdtool(t, "--remove", "/dev/md/mf", devs[2], "--run-dir", runDir)
	if code != 0 || errs != "mdtool: hot removed "+devs[2]+" from /dev/md/mf\n" {
		t.Errorf("--remove MD DEV: exit %d: %q", code, errs)
	}
	code, _, errs = mdtool(t, "--manage", "/dev/md/mf", "--stop", "--run-dir", runDir)
	if code != 0 || errs != "mdtool: stopped /dev/md/mf\n" {
		t.Errorf("--manage MD --stop: exit %d: %q", code, errs)
	}
	s.wait()

	s = serve(t, runDir, "/dev/md/mf", devs[0], devs[1], "--run")
	code, out, errs := mdtool(t, "-Ss", "--run-dir", runDir)
	if code != 0 || out != "" || errs != "" {
		t.Errorf("-Ss: exit %d: %q %q", code, out, errs)
	}
	s.wait()
	code, out, errs = mdtool(t, "-Ss", "--run-dir", runDir)
	if code != 0 || out != "" || errs != "" {
		t.Errorf("-Ss with nothing running: exit %d: %q %q", code, out, errs)
	}
}

// TestCreateDelay: --delay/-d sets the bitmap's daemon sleep as mdadm's
// add_internal_bitmap writes it; mdadm's parse_num refuses 0 and words.
func TestCreateDelay(t *testing.T) {
	dir := t.TempDir()
	a := sparse(t, dir, "a.img", 16<<20)
	b := sparse(t, dir, "b.img", 16<<20)
	code, _, errs := mdtool(t, "-C", "/dev/md/dl", "-R", "--start=false", "-l1", "-n2", "-binternal", "-d", "17", a, b)
	if code != 0 {
		t.Fatalf("create --delay: exit %d: %s", code, errs)
	}
	want, _ := exec.Command("mdadm", "-E", a).Output()
	code, out, _ := mdtool(t, "-X", a)
	if code != 0 || !strings.Contains(out, "          Daemon : 17s flush period\n") || !strings.Contains(string(want), "Internal Bitmap") {
		t.Errorf("-X after --delay 17: exit %d\n%s", code, out)
	}
	for _, bad := range []string{"0", "x", "-3"} {
		code, _, errs = mdtool(t, "-C", "/dev/md/dl", "-R", "--start=false", "-l1", "-n2", "--delay="+bad, a, b)
		if code != 2 || errs != "mdtool: invalid delay: "+bad+"\n" {
			t.Errorf("--delay=%s: exit %d %q", bad, code, errs)
		}
	}
}

// TestUpdateWords: --update=? lists the words on stdout (exit 0), an
// unknown word is refused with the list (exit 2), as the host's mdadm 4.2
// does; words mdtool does not do are refused with exit 2.
func TestUpdateWords(t *testing.T) {
	for _, w := range []string{"?", "foo"} {
		cmd := exec.Command("mdadm", "-A", "/dev/md/uw", "--update="+w, "/nonexistent")
		var mo, me strings.Builder
		cmd.Stdout, cmd.Stderr = &mo, &me
		err := cmd.Run()
		mcode := 0
		if ee, ok := err.(*exec.ExitError); ok {
			mcode = ee.ExitCode()
		}
		code, out, errs := mdtool(t, "-A", "/dev/md/uw", "--update="+w, "/nonexistent")
		conv := func(s string) string { return strings.ReplaceAll(s, "mdtool:", "mdadm:") }
		if code != mcode || conv(out) != mo.String() || conv(errs) != me.String() || mo.Len()+me.Len() == 0 {
			t.Errorf("--update=%s: exit %d\n%s%s\nmdadm 4.2: exit %d\n%s%s", w, code, out, errs, mcode, mo.String(), me.String())
		}
	}
	if code, _, errs := mdtool(t, "-A", "/dev/md/uw", "--update=ppl", "/nonexistent"); code != 2 || errs != "mdtool: --update=ppl is not supported by mdtool\n" {
		t.Errorf("--update=ppl: exit %d %q", code, errs)
	}
}
