package cmd

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"mdtool/superblock"
)

// TestGrowRAID0Restart: mdadm 4.2's raid0 growth (-n4 --add on a raid0 of
// 3: raid4 of 4 roles with the parity missing, reshaped to 5 roles, the
// added device filling the old parity role as the reshape passes) killed
// mid-reshape (kill -9 at half way). Assembled again, the daemon
// finishes the reshape from the recorded position: the added member is
// in sync in role 3, the new parity role 4 missing, the data read back
// the same. As with mdadm 4.2 after a reassembly, nothing imposes the
// final level (Grow_continue returns at once for a reshape that moves
// data_offset): the array stays a raid4 of 5 (TestGrowLevelRestart).
func TestGrowRAID0Restart(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	md := "/dev/md/g0r"
	devs := mkArray(t, dir, md, 3, 16<<20, "-l0", "-n3", "-c64")
	d := startDaemon(t, runDir, md, devs, "MDTOOL_TEST_RESHAPE_PAUSE=move:0.5")
	uri := "nbd+unix:///?socket=" + d.socket()
	n := int(detailJSONOf(t, runDir, md)["array_size_kib"].(float64)) * 1024
	data := nbdWrite(t, uri, n)
	spare := sparse(t, dir, "spare.img", 16<<20)
	if code, _, errs := mdtool(t, "--grow", md, "-n4", "--add", spare, "--run-dir", runDir); code != 0 {
		t.Fatalf("grow -n4 --add: exit %d %q", code, errs)
	}
	_, pos, rec := waitReshapePause(t, d)
	t.Logf("killed at reshape_progress %d (recorded %d)", pos, rec)
	d.kill()
	sb := readSB12(t, spare)
	if sb.FeatureMap&superblock.FeatureRecoveryOffset == 0 || sb.FeatureMap&superblock.FeatureReshapeActive == 0 ||
		sb.DevRoles[sb.DevNumber] != 3 || sb.RecoveryOffset != sb.ReshapePosition/4 {
		t.Errorf("added member mid-reshape: features %#x role %d recovery_offset %d reshape_position %d, want role 3 recovering at reshape_position/4",
			sb.FeatureMap, sb.DevRoles[sb.DevNumber], sb.RecoveryOffset, sb.ReshapePosition)
	}
	d = startDaemon(t, runDir, md, append(devs, spare))
	defer d.stop()
	reshapeFinished(t, runDir, md)
	got := detailJSONOf(t, runDir, md)
	if got["raid_level"] != "raid4" || got["raid_devices"] != float64(5) {
		t.Errorf("after the restart: %v of %v devices, want raid4 of 5", got["raid_level"], got["raid_devices"])
	}
	if _, out, _ := mdtool(t, "detail", md, "--run-dir", runDir); !strings.Contains(out, fmt.Sprintf("active sync   %s\n", spare)) ||
		!strings.Contains(out, "removed") {
		t.Errorf("detail after the reshape: the added member not in sync, or the parity role not missing:\n%s", out)
	}
	if b := nbdRead(t, uri, n); !bytes.Equal(b[:n], data) {
		t.Errorf("the data read back differs")
	}
	sb = readSB12(t, spare)
	if sb.FeatureMap&(superblock.FeatureRecoveryOffset|superblock.FeatureReshapeActive) != 0 || sb.DevRoles[sb.DevNumber] != 3 {
		t.Errorf("added member after the reshape: features %#x role %d, want in sync in role 3", sb.FeatureMap, sb.DevRoles[sb.DevNumber])
	}
}
