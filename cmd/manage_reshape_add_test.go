package cmd

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"mdtool/engine"
)

// reReshapeField are examine's lines of the reshape and the data area.
var reReshapeField = regexp.MustCompile(`(?m)^\s*(Reshape pos'n|Delta Devices|New Offset|Data Offset|Raid Devices|New Layout|New Chunksize) : .*$`)

// TestManageAddDuringReshape: `--add` while a reshape runs (md 6.1
// accepts it): the device joins as a spare whose superblock records the
// reshape as the members' do, with a member failed it takes no role
// until the reshape ends, and then the array recovers onto it; at the
// end it has the members' data offset and raid_disks.
func TestManageAddDuringReshape(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	md := "/dev/md/ra"
	devs := mkArray(t, dir, md, 4, 32<<20, "-l5", "-n4", "-c64", "--assume-clean")
	s := serve(t, runDir, md, devs...)
	defer s.stopIfRunning()
	spare := sparse(t, dir, "ra-spare.img", 32<<20)
	if code, _, errs := mdtool(t, md, "--add", spare, "--run-dir", runDir); code != 0 {
		t.Fatalf("--add: exit %d %s", code, errs)
	}
	held, release := make(chan struct{}), make(chan struct{})
	first := true
	engine.ReshapeHook = func(p string, _, _, _ uint64) {
		if p == "move" && first {
			first = false
			close(held)
			<-release
		}
	}
	released := false
	defer func() {
		if !released {
			close(release)
		}
		engine.ReshapeHook = nil
	}()
	if code, _, errs := mdtool(t, "--grow", md, "--raid-devices=5", "--run-dir", runDir); code != 0 || errs != "" {
		t.Fatalf("grow: exit %d %q", code, errs)
	}
	select {
	case <-held:
	case <-time.After(2 * time.Minute):
		t.Fatal("the reshape did not start within 2 minutes")
	}
	if code, _, errs := mdtool(t, md, "--fail", devs[1], "--run-dir", runDir); code != 0 {
		t.Fatalf("--fail during the reshape: exit %d %s", code, errs)
	}
	added := sparse(t, dir, "ra-added.img", 32<<20)
	if code, _, errs := mdtool(t, md, "--add", added, "--run-dir", runDir); code != 0 || errs != "mdtool: added "+added+"\n" {
		t.Fatalf("--add during the reshape: exit %d %q", code, errs)
	}
	_, ex0, _ := mdtool(t, "examine", devs[0])
	_, exA, _ := mdtool(t, "examine", added)
	f0, fA := reReshapeField.FindAllString(ex0, -1), reReshapeField.FindAllString(exA, -1)
	if strings.Join(f0, "\n") != strings.Join(fA, "\n") || !strings.Contains(exA, "Reshape pos'n") ||
		!strings.Contains(exA, "Device Role : spare") {
		t.Fatalf("the added device's superblock:\n%s\nmember 0's:\n%s", exA, ex0)
	}
	d := detailJSONOf(t, runDir, md)
	if d["spare_devices"] != float64(1) || d["active_devices"] != float64(4) || d["failed_devices"] != float64(1) {
		t.Fatalf("detail during the reshape: active %v spare %v failed %v", d["active_devices"], d["spare_devices"], d["failed_devices"])
	}
	released = true
	close(release)
	waitHealthy(t, runDir, md)
	d = detailJSONOf(t, runDir, md)
	if d["raid_devices"] != float64(5) || d["active_devices"] != float64(5) || d["spare_devices"] != float64(0) {
		t.Fatalf("after the reshape: raid_devices %v active %v spare %v", d["raid_devices"], d["active_devices"], d["spare_devices"])
	}
	s.stop()
	_, ex0, _ = mdtool(t, "examine", devs[0])
	_, exA, _ = mdtool(t, "examine", added)
	if !strings.Contains(exA, "Device Role : Active device 1") || !strings.Contains(exA, "Raid Devices : 5") ||
		strings.Contains(exA, "Reshape pos'n") || !strings.Contains(exA, "Data Offset : 1536 sectors") || !strings.Contains(ex0, "Data Offset : 1536 sectors") {
		t.Fatalf("the added device at the end:\n%s\nmember 0:\n%s", exA, ex0)
	}
}
