package cmd

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadOnlyReadWrite: mdadm -o / -w on a running array (misc mode and
// --manage MD -o): writes through NBD fail while read-only and work again
// after -w, detail says "readonly", and md's refusals are worded as
// mdadm words them (read-only twice: ENXIO, -w on a writable array:
// EBUSY, not running).
func TestReadOnlyReadWrite(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/ro", 2, 16<<20, "-l1", "-n2", "--assume-clean")
	s := serve(t, runDir, "/dev/md/ro", devs...)
	uri := s.nbdURI()
	before := nbdWrite(t, uri, 1<<20)

	code, out, errs := mdtool(t, "-o", "/dev/md/ro", "--run-dir", runDir)
	if code != 0 || out != "" || errs != "" {
		t.Fatalf("-o: exit %d %q %q", code, out, errs)
	}
	_, out, _ = mdtool(t, "-D", "/dev/md/ro", "--run-dir", runDir)
	// mdadm's Detail prints array_state only for raid0 and linear.
	if !strings.Contains(out, "             State : clean \n") {
		t.Errorf("detail of a read-only raid1:\n%s", out)
	}
	src := filepath.Join(dir, "zeros")
	run(t, "truncate", "-s", "1M", src)
	if o, err := exec.Command("nbdcopy", "--", src, uri).CombinedOutput(); err == nil {
		t.Errorf("a write to a read-only array succeeded: %s", o)
	}
	if got := nbdRead(t, uri, 1<<20); !bytes.Equal(got, before) {
		t.Error("the read-only array's data changed")
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--readonly", "/dev/md/ro"}, "mdtool: failed to set readonly for /dev/md/ro: No such device or address\n"},
		{[]string{"--manage", "/dev/md/ro", "-o"}, "mdtool: failed to set readonly for /dev/md/ro: No such device or address\n"},
		{[]string{"-o", "/dev/md/none"}, "mdtool: /dev/md/none does not appear to be active.\n"},
	} {
		code, _, errs := mdtool(t, append(tc.args, "--run-dir", runDir)...)
		if code != 1 || errs != tc.msg {
			t.Errorf("%v: exit %d %q, want 1 %q", tc.args, code, errs, tc.msg)
		}
	}
	code, _, errs = mdtool(t, "-w", "/dev/md/ro", "--run-dir", runDir)
	if code != 0 || errs != "" {
		t.Fatalf("-w: exit %d %q", code, errs)
	}
	code, _, errs = mdtool(t, "--readwrite", "/dev/md/ro", "--run-dir", runDir)
	if code != 1 || errs != "mdtool: failed to set writable for /dev/md/ro: Device or resource busy\n" {
		t.Errorf("-w on a writable array: exit %d %q", code, errs)
	}
	run(t, "nbdcopy", "--", src, uri)
	if got := nbdRead(t, uri, 1<<20); !bytes.Equal(got, make([]byte, 1<<20)) {
		t.Error("the write after -w did not land")
	}
	if code, _, errs := mdtool(t, "--manage", "/dev/md/ro", "-o", "--run-dir", runDir); code != 0 {
		t.Errorf("--manage MD -o: exit %d %q", code, errs)
	}
	s.stop()
}

// TestAssembleReadOnly: assemble --readonly serves the array read-only
// (writes fail, the members are not written) and -o on it is md's ENXIO.
func TestAssembleReadOnly(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/aro", 2, 16<<20, "-l1", "-n2", "--assume-clean")
	before := hashAll(t, devs)
	s := serve(t, runDir, "/dev/md/aro", append([]string{"--readonly"}, devs...)...)
	src := filepath.Join(dir, "zeros")
	run(t, "truncate", "-s", "1M", src)
	if o, err := exec.Command("nbdcopy", "--", src, s.nbdURI()).CombinedOutput(); err == nil {
		t.Errorf("a write to an array assembled --readonly succeeded: %s", o)
	}
	code, _, errs := mdtool(t, "-o", "/dev/md/aro", "--run-dir", runDir)
	if code != 1 || errs != "mdtool: failed to set readonly for /dev/md/aro: No such device or address\n" {
		t.Errorf("-o on an array assembled --readonly: exit %d %q", code, errs)
	}
	s.stop()
	after := hashAll(t, devs)
	for _, d := range devs {
		if before[d] != after[d] {
			t.Errorf("%s was written by a read-only assembly", d)
		}
	}
}
