package cmd

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestGrowRaidDevicesBitmap: `--grow --raid-devices=5` on a served raid5
// of 4 with an internal bitmap goes ahead as with mdadm 4.2 + Linux 6.1
// (no "Bitmap must be removed" refusal: md 6.1 reshapes raid4/5/6 under a
// bitmap). The members end as a 5-device raid5, data_offset moved down by
// mdadm's 512 sectors, and the bitmap as md keeps it: the same offset,
// chunk size and sync size, no dirty chunk after the stop.
func TestGrowRaidDevicesBitmap(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	md := "/dev/md/grb"
	devs := mkArray(t, dir, md, 4, 32<<20, "-l5", "-n4", "-c64", "--assume-clean", "--bitmap=internal", "--bitmap-chunk=256K")
	xField := func(out, name string) string {
		for _, l := range strings.Split(out, "\n") {
			if k, v, ok := strings.Cut(l, " : "); ok && strings.TrimSpace(k) == name {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}
	_, xBefore, _ := mdtool(t, "-X", devs[0])
	s := serve(t, runDir, md, devs...)
	defer s.stopIfRunning()
	spare := sparse(t, dir, "grb-spare.img", 32<<20)
	if code, _, errs := mdtool(t, md, "--add", spare, "--run-dir", runDir); code != 0 {
		t.Fatalf("--add: exit %d %s", code, errs)
	}
	if code, _, errs := mdtool(t, "--grow", md, "--raid-devices=5", "--run-dir", runDir); code != 0 || errs != "" {
		t.Fatalf("grow with a bitmap: exit %d %q", code, errs)
	}
	syncDone(t, runDir, md, "reshape")
	s.stop()
	for _, p := range append(devs, spare) {
		_, out, _ := mdtool(t, "examine", p)
		if !strings.Contains(out, "Raid Devices : 5") || strings.Contains(out, "Reshape") ||
			!strings.Contains(out, "Data Offset : 1536 sectors") || !strings.Contains(out, "Internal Bitmap : 8 sectors from superblock") {
			t.Errorf("%s after the reshape:\n%s", p, out)
		}
		_, x, _ := mdtool(t, "-X", p)
		for _, f := range []string{"Chunksize", "Sync Size"} {
			if xField(x, f) != xField(xBefore, f) || xField(x, f) == "" {
				t.Errorf("%s: -X %s %q, before the reshape %q", p, f, xField(x, f), xField(xBefore, f))
			}
		}
		if b := xField(x, "Bitmap"); !strings.Contains(b, " 0 dirty") {
			t.Errorf("%s: -X Bitmap %q after a clean stop", p, b)
		}
	}
}
