package cmd

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestGrowRaidDevices: `--grow --raid-devices=5` on a served raid5 of 4
// is refused without a spare; with one, the daemon's engine reshapes
// onto it (sync action "reshape") and the members end as a 5-device
// raid5 whose data_offset moved down by mdadm's 512 sectors.
func TestGrowRaidDevices(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	md := "/dev/md/gr"
	devs := mkArray(t, dir, md, 4, 32<<20, "-l5", "-n4", "-c64", "--assume-clean")
	_, before, _ := mdtool(t, "examine", devs[0])
	s := serve(t, runDir, md, devs...)
	defer s.stopIfRunning()
	if code, _, errs := mdtool(t, "--grow", md, "--raid-devices=5", "--run-dir", runDir); code != 1 ||
		errs != "mdtool: Need 1 spare to avoid degraded array, and only have 0.\n       Use --force to over-ride this check.\n" {
		t.Fatalf("grow without a spare: exit %d %q", code, errs)
	}
	spare := sparse(t, dir, "gr-spare.img", 32<<20)
	if code, _, errs := mdtool(t, md, "--add", spare, "--run-dir", runDir); code != 0 {
		t.Fatalf("--add: exit %d %s", code, errs)
	}
	if code, _, errs := mdtool(t, "--grow", md, "--raid-devices=5", "--run-dir", runDir); code != 0 || errs != "" {
		t.Fatalf("grow: exit %d %q", code, errs)
	}
	syncDone(t, runDir, md, "reshape")
	if d := detailJSONOf(t, runDir, md); d["raid_devices"] != float64(5) {
		t.Errorf("detail after the reshape: raid_devices %v", d["raid_devices"])
	}
	s.stop()
	for _, p := range append(devs, spare) {
		_, out, _ := mdtool(t, "examine", p)
		if !strings.Contains(out, "Raid Devices : 5") || strings.Contains(out, "Reshape") ||
			!strings.Contains(out, "Data Offset : 1536 sectors") {
			t.Errorf("%s after the reshape:\n%s\n(before:\n%s)", p, out, before)
		}
	}
}
