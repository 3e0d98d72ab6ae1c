package cmd

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestManageReplace replaces a working raid1 member by a spare (md's
// want_replacement): the spare is rebuilt while the old member works, then
// the old one is faulty and can be removed.
func TestManageReplace(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	md := "/dev/md/rp"
	devs := mkArray(t, dir, md, 2, 32<<20, "-l1", "-n2", "--assume-clean", "--bitmap=internal")
	s := serve(t, runDir, md, devs...)
	data := nbdWrite(t, s.nbdURI(), 4<<20)
	m := func(args ...string) (int, string) {
		t.Helper()
		code, _, errs := mdtool(t, append(append([]string{md}, args...), "--run-dir", runDir)...)
		return code, errs
	}
	spare := sparse(t, dir, "spare.img", 32<<20)
	if code, _, errs := mdtool(t, "action", "--sync-speed-max", "3000", "--run-dir", runDir, md); code != 0 {
		t.Fatalf("action --sync-speed-max: %d %s", code, errs)
	}
	code, errs := m("--add", spare, "--replace", devs[0], "--with", spare)
	if code != 0 || errs != "mdtool: added "+spare+"\nmdtool: Marked "+devs[0]+" (device 0 in "+md+
		") for replacement\nmdtool: Marked "+spare+" in "+md+" as replacement for device 0\n" {
		t.Fatalf("--replace --with: exit %d %q", code, errs)
	}
	// While it runs, mdadm 4.2 shows the replacement as a spare
	// rebuilding in the same role, right after the member it replaces
	// (as for the kernel's array in the VM).
	time.Sleep(time.Second) // past the safe-mode delay after nbdWrite
	out := detailWhen(t, runDir, md, "recovering \n")
	for _, want := range []string{
		"             State : clean, recovering \n    Active Devices : 2\n   Working Devices : 3\n    Failed Devices : 0\n     Spare Devices : 1\n",
		"    Rebuild Status : ",
		"        0      active sync   " + devs[0] + "\n       2       0        0        0      spare rebuilding   " + spare + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("detail during the replace lacks %q:\n%s", want, out)
		}
	}
	mdtool(t, "action", "--sync-speed-max", "0", "--run-dir", runDir, md)
	waitHealthy(t, runDir, md)
	_, out, _ = mdtool(t, "detail", "--run-dir", runDir, md)
	for _, want := range []string{"             State : clean \n", "      active sync   " + spare + "\n", "      faulty   " + devs[0] + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("detail after the replace lacks %q:\n%s", want, out)
		}
	}
	if code, errs := m("--remove", "failed"); code != 0 || errs != "mdtool: hot removed "+devs[0]+" from "+md+"\n" {
		t.Errorf("--remove failed: exit %d %q", code, errs)
	}
	if got := nbdRead(t, s.nbdURI(), len(data)); !bytes.Equal(got, data) {
		t.Error("data differs after the replace")
	}
	// Without --with, any spare is used.
	spare2 := sparse(t, dir, "spare2.img", 32<<20)
	if code, errs := m("--add", spare2, "--replace", devs[1]); code != 0 ||
		errs != "mdtool: added "+spare2+"\nmdtool: Marked "+devs[1]+" (device 1 in "+md+") for replacement\n" {
		t.Fatalf("--replace: exit %d %q", code, errs)
	}
	waitHealthy(t, runDir, md)
	s.stop()
	e, _ := exec.Command("mdadm", "--examine", spare2).CombinedOutput()
	if !strings.Contains(string(e), "   Array State : AA ") || !strings.Contains(string(e), "   Device Role : Active device 1\n") {
		t.Errorf("mdadm --examine %s:\n%s", spare2, e)
	}
}
