package cmd

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"mdtool/internal/daemon"
)

// TestManage090 is mdadm 4.2's Manage_add on a 0.90 array through the
// daemon: a zeroed device is added ("added") and recovered, a device too
// small for the component size is refused with mdadm's "not large enough
// to join array", one larger than 4 TB wants --force (mdadm's two-line
// warning, exit 1 without it), and a failed and removed member with an
// internal bitmap comes back with --re-add ("re-added").
func TestManage090(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	md := "/dev/md/m090"
	devs := mkArray(t, dir, md, 3, 16<<20, "--assume-clean", "-e0.90", "-l1", "-n3", "--bitmap=internal", "--bitmap-chunk=256K")
	s := serve(t, runDir, md, devs...)
	defer s.stopIfRunning()

	small := sparse(t, dir, "small.img", 8<<20)
	code, _, errs := mdtool(t, "manage", "--run-dir", runDir, md, "--add", small)
	if code != 1 || errs != "mdtool: "+small+" not large enough to join array\n" {
		t.Errorf("--add of an 8 MiB device: exit %d: %q", code, errs)
	}
	big := filepath.Join(dir, "big.img")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(5 << 40); err != nil {
		t.Fatalf("a 5 TiB sparse file: %v", err)
	}
	f.Close()
	code, _, errs = mdtool(t, "manage", "--run-dir", runDir, md, "--add", big)
	if want := "mdtool: " + big + " is larger than " + md + " can effectively use.\n       Add --force is you really want to add this device.\n"; code != 1 || errs != want {
		t.Errorf("--add of a 5 TiB device: exit %d: %q, want %q", code, errs, want)
	}

	manage(t, runDir, md, "--fail", devs[2])
	manage(t, runDir, md, "--remove", devs[2])
	fillRandom(t, daemon.PathsFor(runDir, "m090").NBD(), 1<<20, 64<<10, 3)
	if errs := manage(t, runDir, md, "--re-add", devs[2]); errs != "mdtool: re-added "+devs[2]+"\n" {
		t.Errorf("--re-add: %q", errs)
	}
	waitFor(t, runDir, md, "recover")
	manage(t, runDir, md, "--fail", devs[2])
	manage(t, runDir, md, "--remove", devs[2])
	if code, _, errs := mdtool(t, "--zero-superblock", devs[2]); code != 0 {
		t.Fatalf("zero-superblock: exit %d: %s", code, errs)
	}
	if errs := manage(t, runDir, md, "--add", devs[2]); errs != "mdtool: added "+devs[2]+"\n" {
		t.Errorf("--add: %q", errs)
	}
	d := waitFor(t, runDir, md, "recover")
	if code, out, _ := mdtool(t, "detail", "--run-dir", runDir, md); code != 0 || strings.Contains(out, "degraded") || !strings.Contains(out, "Active Devices : 3\n") ||
		!regexp.MustCompile(`(?m)^ +2 +0 +0 +2 +active sync +`+regexp.QuoteMeta(devs[2])+`$`).MatchString(out) {
		// (the Number of the member in slot 2 is 2 again: super_90_sync's)
		t.Errorf("detail after the recovery (%+v):\n%s", d.Sync, out)
	}
	s.stop()
	for _, dev := range devs {
		if code, out, _ := mdtool(t, "-E", dev); code != 0 || !strings.Contains(out, "Active Devices : 3\n") || !strings.Contains(out, "Spare Devices : 0\n") {
			t.Errorf("-E %s:\n%s", dev, out)
		}
	}
}
