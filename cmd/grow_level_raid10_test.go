package cmd

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"mdtool/internal/daemon"
)

// TestAnalyseLevelRAID10: analyse_change's raid10 -> raid0 and raid0 ->
// raid10 cases (mdadm 4.2 Grow.c), with mdadm's messages.
func TestAnalyseLevelRAID10(t *testing.T) {
	const n2, n3, f2, o2 = 0x102, 0x103, 0x201, 0x10102
	for _, c := range []struct {
		name                                 string
		level, layout, n, chunk              int
		newLevel, newLayout, delta, newChunk int
		immediate                            bool
		after                                int // data disks afterwards
		msg                                  string
	}{
		{"r10n2x4-r0", 10, n2, 4, 65536, 0, unset, unset, 0, true, 2, ""},
		{"r10n2x4-r0-n2", 10, n2, 4, 65536, 0, unset, -2, 0, true, 2, ""},
		{"r10n2x4-r0-same-chunk", 10, n2, 4, 65536, 0, unset, unset, 65536, true, 2, ""},
		{"r10n3x6-r0", 10, n3, 6, 65536, 0, unset, unset, 0, true, 2, ""}, // mdadm agrees; md refuses the layout
		{"r10f2-r0", 10, f2, 4, 65536, 0, unset, unset, 0, false, 0, "Cannot Grow RAID10 with far/offset layout"},
		{"r10o2-r0", 10, o2, 4, 65536, 0, unset, unset, 0, false, 0, "Cannot Grow RAID10 with far/offset layout"},
		{"r10n2x3-r0", 10, n2, 3, 65536, 0, unset, unset, 0, false, 0, "RAID10 layout too complex for Grow operation"},
		{"r10n2x4-r0-n3", 10, n2, 4, 65536, 0, unset, -1, 0, false, 0, "New number of raid-devices impossible for RAID10"},
		{"r10n2x4-r0-c32", 10, n2, 4, 65536, 0, unset, unset, 32768, false, 0, "Cannot change chunk-size with RAID10 Grow"},
		{"r10-r5", 10, n2, 4, 65536, 5, unset, unset, 0, false, 0, "RAID10 can only be changed to RAID0"},
		{"r10-r1", 10, n2, 2, 65536, 1, unset, unset, 0, false, 0, "RAID10 can only be changed to RAID0"},
		{"r0x2-r10", 0, -1, 2, 65536, 10, unset, unset, 0, true, 4, ""},
		{"r0x2-r10-n4", 0, -1, 2, 65536, 10, unset, 2, 0, true, 4, ""},
		{"r0x2-r10-n2", 0, -1, 2, 65536, 10, n2, unset, 0, true, 4, ""},
		{"r0x2-r10-f2-n4", 0, -1, 2, 65536, 10, f2, 2, 0, true, 4, ""},  // impose_level makes near=2 whatever the layout
		{"r0x2-r10-n6", 0, -1, 2, 65536, 10, unset, 4, 0, false, 6, ""}, // near=3: a raid10 reshape after the takeover
		{"r0x2-r10-n3", 0, -1, 2, 65536, 10, unset, 3, 0, false, 0, "Impossible number of devices for RAID0->RAID10"},
		{"r0x2-r10-f2", 0, -1, 2, 65536, 10, f2, unset, 0, false, 0, "New layout impossible for RAID0->RAID10"},
		{"r0x2-r10-c32", 0, -1, 2, 65536, 10, unset, unset, 32768, false, 0, "Cannot change chunk-size with RAID0->RAID10"},
	} {
		re, msg := analyseLevel(c.level, c.layout, c.n, c.chunk, 1<<16, c.newLevel, c.newLayout, c.delta, c.newChunk)
		if msg != c.msg || msg == "" && (re.immediate != c.immediate || re.afterData != c.after || re.level != c.newLevel) {
			t.Errorf("%s: immediate %v level %d after %d msg %q, want %v %d %d %q", c.name, re.immediate, re.level, re.afterData, msg,
				c.immediate, c.newLevel, c.after, c.msg)
		}
	}
}

// TestSysfsOrder: mdadm reads an array's members in kernfs's order of
// their dev-NAME entries (hash, then name), whatever order they were
// given in.
func TestSysfsOrder(t *testing.T) {
	var ms []daemon.MemberStatus
	for _, p := range []string{"/x/loop3", "/x/loop0", "", "/x/loop2", "/x/loop1"} {
		ms = append(ms, daemon.MemberStatus{Path: p, State: "in_sync"})
	}
	got := sysfsOrder(ms)
	if len(got) != 4 {
		t.Fatalf("%d members, want 4 (the empty slot left out)", len(got))
	}
	for i := 1; i < len(got); i++ {
		a, b := "dev-"+filepath.Base(got[i-1].Path), "dev-"+filepath.Base(got[i].Path)
		if ha, hb := kernfsNameHash(a), kernfsNameHash(b); ha > hb || ha == hb && a > b {
			t.Errorf("%s (%d) before %s (%d)", a, ha, b, hb)
		}
	}
	for _, name := range []string{"dev-loop0", "dev-sda1", "dev-nvme0n1p2"} {
		if h := kernfsNameHash(name); h < 2 || h >= 0x7fffffff {
			t.Errorf("%s: hash %d outside kernfs's range", name, h)
		}
	}
}

// TestGrowLevelRAID10 changes a served near-2 raid10 into a raid0 and
// back with mdadm's command lines: one member of each mirror pair is
// failed and removed first (they then hold the older superblocks), the
// data reads back the same through NBD after each change, and the
// raid10 recovers its odd roles onto the two devices --add gives.
func TestGrowLevelRAID10(t *testing.T) {
	const size = 16 << 20
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	md := "/dev/md/r10"
	devs := mkArray(t, dir, md, 4, size, "-l10", "-n4", "-c64", "--assume-clean")
	s := serve(t, runDir, md, devs...)
	defer s.stopIfRunning()
	n := int(detailJSONOf(t, runDir, md)["array_size_kib"].(float64)) * 1024
	data := nbdWrite(t, s.nbdURI(), n)
	grow := func(args ...string) (int, string) {
		code, _, errs := mdtool(t, append(append([]string{"--grow", md}, args...), "--run-dir", runDir)...)
		return code, errs
	}
	level := func(want string) {
		t.Helper()
		d := detailJSONOf(t, runDir, md)
		if lv, _ := d["raid_level"].(string); lv != want {
			t.Errorf("detail raid_level %q, want %s", lv, want)
		}
		if got := nbdRead(t, s.nbdURI(), n); !bytes.Equal(got, data) {
			t.Fatalf("at %s: the data read back differs", want)
		}
	}
	if code, errs := grow("-l5"); code != 1 || !strings.Contains(errs, "mdtool: RAID10 can only be changed to RAID0\n") {
		t.Errorf("-l5: exit %d %q", code, errs)
	}
	if code, errs := grow("-l0", "-c32"); code != 1 || errs != "mdtool: Cannot change array level in the same operation as changing chunk size.\n" {
		t.Errorf("-l0 -c32: exit %d %q", code, errs)
	}
	if d := detailJSONOf(t, runDir, md); d["active_devices"] != float64(4) {
		t.Fatalf("-l0 -c32 changed the array: %v active", d["active_devices"])
	}
	if code, errs := grow("-l0", "-n3"); code != 1 || errs != "mdtool: New number of raid-devices impossible for RAID10\n" {
		t.Errorf("-l0 -n3: exit %d %q", code, errs)
	}
	// mdadm removed the mirrors before it refused: the raid10 is degraded.
	if d := detailJSONOf(t, runDir, md); d["raid_level"] != "raid10" || d["active_devices"] != float64(2) || d["raid_devices"] != float64(4) {
		t.Fatalf("after -l0 -n3: %v, %v of %v active", d["raid_level"], d["active_devices"], d["raid_devices"])
	}
	if code, errs := grow("-l0"); code != 0 || errs != "mdtool: level of /dev/md/r10 changed to raid0\n" {
		t.Fatalf("-l0: exit %d %q", code, errs)
	}
	level("raid0")
	// md's live layout after the takeover is 0: mdadm -D prints none
	if d := detailJSONOf(t, runDir, md); d["layout"] != nil {
		t.Errorf("raid0 after the takeover: layout %v, md reports 0 (none printed)", d["layout"])
	}
	if code, errs := grow("-l10"); code != 1 || !strings.Contains(errs, "mdtool: Need 2 spares to create working array, and only have 0.\n") {
		t.Errorf("-l10 without devices: exit %d %q", code, errs)
	}
	a, b := sparse(t, dir, "a.img", size), sparse(t, dir, "b.img", size)
	code, errs := grow("-l10", "--add", a, b)
	if code != 0 || !strings.HasPrefix(errs, "mdtool: level of /dev/md/r10 changed to raid10\n") || !strings.Contains(errs, "mdtool: added "+a) {
		t.Fatalf("-l10 --add: exit %d %q", code, errs)
	}
	syncDone(t, runDir, md, "recover")
	level("raid10")
	d := detailJSONOf(t, runDir, md)
	if d["raid_devices"] != float64(4) || d["active_devices"] != float64(4) {
		t.Errorf("raid10 after the recovery: raid_devices %v, active %v", d["raid_devices"], d["active_devices"])
	}
	s.stop()
	for _, p := range []string{a, b} {
		_, out, _ := mdtool(t, "examine", p)
		for _, want := range []string{"Raid Level : raid10", "Layout : near=2", "Raid Devices : 4", "State : clean"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: examine lacks %q:\n%s", p, want, out)
			}
		}
	}
}

// TestGrowLevelRAID10Bitmap: --level=0 removes an internal bitmap first,
// as Grow_reshape does, then takes the raid10 over.
func TestGrowLevelRAID10Bitmap(t *testing.T) {
	const size = 16 << 20
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	md := "/dev/md/r10bm"
	devs := mkArray(t, dir, md, 2, size, "-l10", "-n2", "--bitmap=internal", "--assume-clean")
	if _, out, _ := mdtool(t, "examine", devs[0]); !strings.Contains(out, "Internal Bitmap") {
		t.Fatalf("no bitmap to remove:\n%s", out)
	}
	s := serve(t, runDir, md, devs...)
	defer s.stopIfRunning()
	code, _, errs := mdtool(t, "--grow", md, "-l0", "--run-dir", runDir)
	if code != 0 || errs != "mdtool: level of /dev/md/r10bm changed to raid0\n" {
		t.Fatalf("-l0: exit %d %q", code, errs)
	}
	s.stop()
	kept := 0
	for _, p := range devs {
		_, out, _ := mdtool(t, "examine", p)
		if strings.Contains(out, "Raid Level : raid0") {
			kept++
			if strings.Contains(out, "Internal Bitmap") {
				t.Errorf("%s: the raid0 still has a bitmap:\n%s", p, out)
			}
		}
	}
	if kept != 1 {
		t.Errorf("%d raid0 members, want 1", kept)
	}
}
