package cmd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mdtool/internal/daemon"
	"mdtool/superblock"
)

// TestAnalyseRestripe: mdadm 4.2's analyse_change for the restriping
// forms (the level the restripe runs at, the data disks before and
// after, compute_backup_blocks and min_offset_change) and the request
// the daemon gets (raid_disks, layout and chunk at that level, and the
// level imposed when it ends).
func TestAnalyseRestripe(t *testing.T) {
	const ls, ra, pl, ls6 = superblock.LayoutLeftSymmetric, superblock.LayoutRightAsymmetric, superblock.LayoutParityLast, superblock.LayoutLeftSymmetric6
	const comp = 1 << 16 // sectors
	const k64 = 65536
	type want struct {
		level, before, after, parity int
		backup, minOff, newSize      uint64
		disks, layout                int // the request: raid_disks; layout (-1: none)
		chunk                        uint64
		final                        int // -1: none
	}
	for _, c := range []struct {
		name                                 string
		level, layout, n, chunk              int
		newLevel, newLayout, delta, newChunk int
		w                                    want
	}{
		{"raid5 -n5", 5, ls, 4, k64, 5, unset, 1, 0, want{5, 3, 4, 1, 1536, 512, 4 * comp, 5, -1, 0, -1}},
		{"raid5 -n3", 5, ls, 4, k64, 5, unset, -1, 0, want{5, 3, 2, 1, 768, 256, 2 * comp, 3, -1, 0, -1}},
		{"raid5 -c128", 5, ls, 4, k64, 5, unset, unset, 2 * k64, want{5, 3, 3, 1, 768, 256, 3 * comp, 4, -1, 256, -1}},
		{"raid5 --layout=ra", 5, ls, 4, k64, 5, ra, unset, 0, want{5, 3, 3, 1, 384, 128, 3 * comp, 4, ra, 0, -1}},
		{"raid6 -n6", 6, ls, 5, k64, 6, unset, 1, 0, want{6, 3, 4, 2, 1536, 512, 4 * comp, 6, -1, 0, -1}},
		{"raid0 -n4", 0, -1, 3, k64, 0, unset, 1, 0, want{4, 3, 4, 1, 1536, 512, 4 * comp, 5, -1, 0, 0}},
		{"raid0 -l5", 0, -1, 3, k64, 5, unset, unset, 0, want{5, 3, 3, 1, 384, 128, 3 * comp, 4, ls, 0, -1}},
		{"raid5ls -l0", 5, ls, 4, k64, 0, unset, unset, 0, want{5, 3, 3, 1, 384, 128, 3 * comp, 4, pl, 0, 0}},
		{"raid5 -l6 -n4", 5, ls, 3, k64, 6, unset, 1, 0, want{6, 2, 2, 2, 256, 128, 2 * comp, 4, ls, 0, -1}},
		{"raid6ls -l5", 6, ls, 5, k64, 5, unset, unset, 0, want{6, 3, 3, 2, 384, 128, 3 * comp, 5, ls6, 0, 5}},
	} {
		r, msg := analyseRestripe("/dev/md0", c.level, c.layout, c.n, c.chunk, comp, c.newLevel, c.newLayout, c.delta, c.newChunk)
		if msg != "" {
			t.Errorf("%s: refused: %s", c.name, msg)
			continue
		}
		req := restripeRequest(r)
		layout, final := -1, -1
		if req.Layout != nil {
			layout = *req.Layout
		}
		if req.FinalLevel != nil {
			final = *req.FinalLevel
		}
		got := want{r.re.level, r.re.beforeData, r.re.afterData, r.re.parity, r.backupBlocks, r.minOffset, r.newSize,
			req.RaidDisks, layout, req.ChunkSectors, final}
		if got != c.w || r.re.immediate {
			t.Errorf("%s: got %+v (immediate %v), want %+v", c.name, got, r.re.immediate, c.w)
		}
	}
	for _, c := range []struct {
		name               string
		level, n, newLevel int
		component          uint64
		newChunk           int
		msg                string
	}{
		{"chunk does not divide", 5, 4, 5, 1000, k64, "New chunk size (64K) does not evenly divide device size (500k)\n" +
			"mdtool: After shrinking any filesystem, \"mdadm --grow /dev/md0 --size 448\"\n" +
			"mdtool: will shrink the array so the given chunk size would work."},
		{"chunk raid1", 1, 2, 1, comp, k64, "chunk size not meaningful for this level"},
		{"raid10 to raid5", 10, 4, 5, comp, 0, "RAID10 can only be changed to RAID0"},
		{"raid6 to raid0", 6, 5, 0, comp, 0, "Impossible level change requested"},
		{"raid4 to raid6", 4, 4, 6, comp, 0, ""},
	} {
		if _, msg := analyseRestripe("/dev/md0", c.level, ls, c.n, k64, c.component, c.newLevel, unset, unset, c.newChunk); msg != c.msg {
			t.Errorf("%s: %q, want %q", c.name, msg, c.msg)
		}
	}
	// As mdadm 4.2 words them (seen in the VM: grow-r5shrink).
	if got := noBackupFile("/dev/md0", restripe{re: levelChange{beforeData: 3, afterData: 2}, backupBlocks: 768}, 1).Error(); got != "Need to backup 384K of critical section..\n"+
		"mdtool: /dev/md0: Cannot grow - need backup-file\nmdtool:  Please provide one with \"--backup=...\"" {
		t.Errorf("shrink without room: %q", got)
	}
	if got := noBackupFile("/dev/md0", restripe{re: levelChange{beforeData: 3, afterData: 3}, backupBlocks: 384}, 1).Error(); got != "/dev/md0: Cannot grow - need backup-file\n"+
		"mdtool:  Please provide one with \"--backup=...\"" {
		t.Errorf("in place without room: %q", got)
	}
	if got := noBackupFile("/dev/md0", restripe{re: levelChange{beforeData: 3, afterData: 4}, backupBlocks: 1536}, 0).Error(); got != "Need to backup 768K of critical section..\n"+
		"mdtool: /dev/md0: Cannot grow - need a spare or backup-file to backup critical section" {
		t.Errorf("growth without room or spare: %q", got)
	}
}

// TestGrowRestripe runs each restriping form of mdadm 4.2's --grow on a
// served array: raid5 --chunk, --layout and a shrink (after --array-size
// and --size), raid0 growth (by raid4), raid0 -> raid5, raid5 -> raid0,
// raid5 -> raid6 and raid6 -> raid5. Either the change is made (the
// reshape ends, the daemon imposes the final level, the geometry is the
// new one and the data written before reads back the same) or the
// engine refuses it and nothing changed (same level, devices, layout,
// chunk and data). mdadm's refusals before anything changes are checked
// word for word.
func TestGrowRestripe(t *testing.T) {
	const size = 16 << 20
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	type geo struct {
		level, layout string
		devices       int
		chunk         int64
	}
	geoOf := func(d map[string]any) geo {
		g := geo{level: fmt.Sprint(d["raid_level"]), devices: int(d["raid_devices"].(float64))}
		if l, ok := d["layout"].(string); ok {
			g.layout = l
		}
		if c, ok := d["chunk_size_kib"].(float64); ok {
			g.chunk = int64(c)
		}
		return g
	}
	for _, c := range []struct {
		name   string
		create []string
		pre    [][]string // grow commands that must succeed first
		args   []string
		final  geo
	}{
		{"c5", []string{"-l5", "-n4", "-c64"}, nil, []string{"--chunk=128"}, geo{"raid5", "left-symmetric", 4, 128}},
		{"p5", []string{"-l5", "-n4", "-c64"}, nil, []string{"--layout=right-asymmetric"}, geo{"raid5", "right-asymmetric", 4, 64}},
		{"s5", []string{"-l5", "-n4", "-c64"}, [][]string{{"--array-size=29696"}, {"--size=14848"}}, []string{"-n3"},
			geo{"raid5", "left-symmetric", 3, 64}},
		{"g0", []string{"-l0", "-n3", "-c64"}, nil, []string{"-n4", "--add", "SPARE"}, geo{"raid0", "", 4, 64}},
		{"l05", []string{"-l0", "-n3", "-c64"}, nil, []string{"-l5", "--add", "SPARE"}, geo{"raid5", "left-symmetric", 4, 64}},
		{"l50", []string{"-l5", "-n4", "-c64"}, nil, []string{"-l0"}, geo{"raid0", "", 3, 64}},
		// impose_level removes the spare before it fails the parity member
		{"l50s", []string{"-l5", "-n4", "-x1", "-c64"}, nil, []string{"-l0"}, geo{"raid0", "", 3, 64}},
		{"l56", []string{"-l5", "-n3", "-c64"}, nil, []string{"-l6", "-n4", "--add", "SPARE"}, geo{"raid6", "left-symmetric", 4, 64}},
		{"l65", []string{"-l6", "-n5", "-c64"}, nil, []string{"-l5"}, geo{"raid5", "left-symmetric", 4, 64}},
	} {
		t.Run(c.name, func(t *testing.T) {
			md := "/dev/md/" + c.name
			n := 0
			for _, a := range c.create {
				if strings.HasPrefix(a, "-n") || strings.HasPrefix(a, "-x") {
					n += int(a[2] - '0')
				}
			}
			devs := mkArray(t, dir, md, n, size, append(c.create, "--assume-clean")...)
			s := serve(t, runDir, md, devs...)
			defer s.stopIfRunning()
			for _, p := range c.pre {
				if code, _, errs := mdtool(t, append(append([]string{"--grow", md}, p...), "--run-dir", runDir)...); code != 0 {
					t.Fatalf("grow %v: exit %d %q", p, code, errs)
				}
			}
			d := detailJSONOf(t, runDir, md)
			before := geoOf(d)
			bytesN := int(d["array_size_kib"].(float64)) * 1024
			data := nbdWrite(t, s.nbdURI(), bytesN)
			args := append([]string(nil), c.args...)
			for i, a := range args {
				if a == "SPARE" {
					args[i] = sparse(t, dir, c.name+"-spare.img", size)
				}
			}
			code, _, errs := mdtool(t, append(append([]string{"--grow", md}, args...), "--run-dir", runDir)...)
			want := before
			switch code {
			case 0:
				// The reshape ends, the daemon imposes the final level, a
				// spare given recovers a missing role.
				want = c.final
				mdtool(t, "wait", md, "--run-dir", runDir)
				deadline := time.Now().Add(2 * time.Minute)
				for {
					d := detailJSONOf(t, runDir, md)
					sy, _ := d["sync"].(map[string]any)
					if d["reshape"] == nil && sy["action"] == "idle" && geoOf(d).level == want.level &&
						!strings.Contains(fmt.Sprint(d["state"]), "degraded") {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("grow %v: not done: %v", c.args, d)
					}
					time.Sleep(50 * time.Millisecond)
				}
			case 1:
				if c.name == "g0" { // raid0 growth through raid4 (engine/reshape_spares.go)
					t.Fatalf("grow %v refused: %q", c.args, errs)
				}
				if !strings.Contains(errs, "mdtool: Cannot set device shape for "+md+": ") {
					t.Fatalf("grow %v: exit 1 %q", c.args, errs)
				}
				t.Logf("grow %v refused by the engine: %q", c.args, errs)
			default:
				t.Fatalf("grow %v: exit %d %q", c.args, code, errs)
			}
			got := geoOf(detailJSONOf(t, runDir, md))
			if code == 1 && want.level == "raid0" && got.layout == "" {
				// Taken over to raid4 and back: md's layout is then 0
				// (no Layout line), where it read -1 at assembly.
				got.layout = want.layout
			}
			if got != want {
				t.Errorf("grow %v (exit %d): geometry %+v, want %+v", c.args, code, got, want)
			}
			if got := nbdRead(t, s.nbdURI(), bytesN); !bytes.Equal(got, data) {
				t.Errorf("grow %v (exit %d): the data read back differs", c.args, code)
			}
			s.stop()
		})
	}
}

// TestGrowRestripeRefusals: mdadm 4.2's refusals that come before
// anything changes, word for word, and the array left as it was.
func TestGrowRestripeRefusals(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	md := "/dev/md/rr"
	devs := mkArray(t, dir, md, 4, 16<<20, "-l5", "-n4", "-c64", "--assume-clean")
	s := serve(t, runDir, md, devs...)
	defer s.stopIfRunning()
	before := detailJSONOf(t, runDir, md)
	comp := uint64(before["used_dev_size_kib"].(float64))
	for _, c := range []struct {
		args []string
		code int
		errs string
	}{
		{[]string{"-l6", "-c128"}, 1, "mdtool: Cannot change array level in the same operation as changing chunk size.\n"},
		{[]string{"-n3"}, 1, fmt.Sprintf("mdtool: this change will reduce the size of the array.\n"+
			"       use --grow --array-size first to truncate array.\n"+
			"       e.g. mdadm --grow %s --array-size %d\n", md, 2*comp)},
		{[]string{"-n5"}, 1, "mdtool: Need 1 spare to avoid degraded array, and only have 0.\n       Use --force to over-ride this check.\n"},
		{[]string{"--chunk=2048"}, 1, fmt.Sprintf("mdtool: New chunk size (2048K) does not evenly divide device size (%dk)\n"+
			"mdtool: After shrinking any filesystem, \"mdadm --grow %s --size %d\"\n"+
			"mdtool: will shrink the array so the given chunk size would work.\n", comp, md, comp/2048*2048)},
		{[]string{"--chunk=64"}, 0, ""},
		{[]string{"--layout=left-symmetric"}, 0, ""},
		{[]string{"--layout=preserve"}, 1, "mdtool: preserve in only meaningful when reshaping to RAID6\n"},
		{[]string{"--layout=normalise"}, 1, "mdtool: normalise is only meaningful when reshaping a RAID6 array.\n"},
		{[]string{"--chunk=3"}, 2, "mdtool: invalid chunk/rounding value: 3\n"},
	} {
		code, _, errs := mdtool(t, append(append([]string{"--grow", md}, c.args...), "--run-dir", runDir)...)
		if code != c.code || errs != c.errs {
			t.Errorf("grow %v: exit %d %q, want %d %q", c.args, code, errs, c.code, c.errs)
		}
	}
	after := detailJSONOf(t, runDir, md)
	for _, k := range []string{"raid_level", "raid_devices", "layout", "chunk_size_kib", "events", "array_size_kib"} {
		if fmt.Sprint(after[k]) != fmt.Sprint(before[k]) {
			t.Errorf("%s changed: %v -> %v", k, before[k], after[k])
		}
	}
	s.stop()
}

// TestRestripeRoom: set_new_data_offset's room check from the first
// member's superblock and device size: before the data to grow, after it
// to shrink, the larger side for a change in place; raid0 counts
// data_size.
func TestRestripeRoom(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name           string
		level          int32
		size, dataSize uint64 // sectors
		dev            int64  // member sectors
		delta          int
		min            uint64
		ok             bool
	}{
		{"grow", 5, 30720, 30720, 32768, 1, 512, true},
		{"grow too far", 5, 30720, 30720, 32768, 1, 2100, false},
		{"shrink, no room after", 5, 30720, 30720, 32768, -1, 256, false},
		{"shrink after --size", 5, 30592, 30720, 32768, -1, 128, true},
		{"in place: before", 5, 30720, 30720, 32768, 0, 384, true},
		{"raid0 in place", 0, 0, 30720, 32768, 0, 384, true},
		{"raid0 no room", 0, 0, 30720, 32768, 0, 2100, false},
	} {
		sb := &superblock.Superblock{Magic: superblock.Magic, MajorVersion: 1, Level: c.level, Size: c.size, DataSize: c.dataSize,
			DataOffset: 2048, SuperOffset: 8}
		p := filepath.Join(dir, "m.img")
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, c.dev*512); err != nil {
			t.Fatal(err)
		}
		st := &daemon.Status{Superblock: sb.MarshalWithChecksum(), Members: []daemon.MemberStatus{{Path: p, State: "in_sync"}}}
		ok, err := restripeRoom(st, c.delta, c.min)
		if err != nil || ok != c.ok {
			t.Errorf("%s: %v %v, want %v", c.name, ok, err, c.ok)
		}
	}
}

// TestGrowLevelRestart: raid5 -> raid0 restripes to parity-last and the
// daemon imposes raid0 when the reshape ends (mdadm 4.2's forked child).
// Killed mid-reshape and assembled again, the array finishes the reshape
// and stays a raid5 (parity-last), as with mdadm 4.2: at assembly
// Grow_continue returns at once for a reshape that moves data_offset
// (RESHAPE_NO_BACKUP), and nothing imposes the new level.
func TestGrowLevelRestart(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	md := "/dev/md/lr"
	devs := mkArray(t, dir, md, 4, 16<<20, "-l5", "-n4", "-c64", "--assume-clean")
	d := startDaemon(t, runDir, md, devs, "MDTOOL_TEST_RESHAPE_PAUSE=move:0.5")
	uri := "nbd+unix:///?socket=" + d.socket()
	n := int(detailJSONOf(t, runDir, md)["array_size_kib"].(float64)) * 1024
	data := nbdWrite(t, uri, n)
	if code, _, errs := mdtool(t, "--grow", md, "-l0", "--run-dir", runDir); code != 0 || errs != "" {
		t.Fatalf("grow -l0: exit %d %q", code, errs)
	}
	waitReshapePause(t, d)
	// Detail.c's reshape block: the level stays raid5 until the end.
	if _, out, _ := mdtool(t, "detail", md, "--run-dir", runDir); !strings.Contains(out, "        Raid Level : raid5\n") ||
		!strings.Contains(out, "        New Layout : parity-last\n") || strings.Contains(out, "New Level") {
		t.Errorf("detail during the reshape:\n%s", out)
	}
	d.kill()
	d = startDaemon(t, runDir, md, devs)
	defer d.stop()
	reshapeFinished(t, runDir, md)
	// Long enough for a level change that should not come: the daemon's
	// own one follows the reshape's end at once (TestGrowRestripe).
	time.Sleep(time.Second)
	got := detailJSONOf(t, runDir, md)
	if got["raid_level"] != "raid5" || got["layout"] != "parity-last" || got["raid_devices"] != float64(4) {
		t.Errorf("after the restart: %v %v %v, want raid5 parity-last 4", got["raid_level"], got["layout"], got["raid_devices"])
	}
	if b := nbdRead(t, uri, n); !bytes.Equal(b, data) {
		t.Errorf("the data read back differs")
	}
}

// TestGrowRestripeInPlace: given a --backup-file, a chunk change, a
// layout change and a shrink run in place as mdadm 4.2 runs them
// (reshape_array without set_new_data_offset): data_offset unchanged,
// "Need to backup" said only when the number of data devices changes,
// the file removed at the end, the data intact.
func TestGrowRestripeInPlace(t *testing.T) {
	for _, c := range []struct {
		name   string
		create []string
		grow   []string
		errs   string
		check  func(d map[string]any) bool
	}{
		{"chunk", []string{"-l5", "-n4", "-c64"}, []string{"--chunk=128"}, "",
			func(d map[string]any) bool { return fmt.Sprint(d["chunk_size_kib"]) == "128" }},
		{"layout", []string{"-l6", "-n4", "-c64"}, []string{"--layout=ra"}, "",
			func(d map[string]any) bool { return d["layout"] == "right-asymmetric" }},
		{"shrink", []string{"-l5", "-n4", "-c64"}, []string{"-n3"}, "mdtool: Need to backup 384K of critical section..\n",
			func(d map[string]any) bool { return d["raid_devices"] == float64(3) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			runDir := filepath.Join(dir, "run")
			md := "/dev/md/rip" + c.name
			devs := mkArray(t, dir, md, 4, 16<<20, append(c.create, "--assume-clean")...)
			_, before, _ := mdtool(t, "examine", devs[0])
			s := serve(t, runDir, md, devs...)
			defer s.stopIfRunning()
			n := 8 << 20
			if c.name == "shrink" {
				n = 4 << 20
				used, _ := detailJSONOf(t, runDir, md)["used_dev_size_kib"].(float64)
				size := fmt.Sprintf("--array-size=%d", int(used)*2)
				if code, _, errs := mdtool(t, "--grow", md, size, "--run-dir", runDir); code != 0 || used == 0 {
					t.Fatalf("--array-size: exit %d %s", code, errs)
				}
			}
			data := nbdWrite(t, s.nbdURI(), n)
			bf := filepath.Join(dir, "backup")
			code, _, errs := mdtool(t, append(append([]string{"--grow", md}, c.grow...), "--backup-file="+bf, "--run-dir", runDir)...)
			if code != 0 || errs != c.errs {
				t.Fatalf("grow %v --backup-file: exit %d %q, want 0 %q", c.grow, code, errs, c.errs)
			}
			syncDone(t, runDir, md, "reshape")
			if d := detailJSONOf(t, runDir, md); !c.check(d) {
				t.Errorf("after the reshape: %v", d)
			}
			if got := nbdRead(t, s.nbdURI(), len(data)); !bytes.Equal(got, data) {
				t.Error("data changed by the in-place reshape")
			}
			s.stop()
			if _, err := os.Stat(bf); !os.IsNotExist(err) {
				t.Errorf("the backup file is still there after the reshape: %v", err)
			}
			off := ""
			for _, l := range strings.Split(before, "\n") {
				if strings.Contains(l, "Data Offset :") {
					off = l
				}
			}
			_, out, _ := mdtool(t, "examine", devs[0])
			if off == "" || !strings.Contains(out, off) || strings.Contains(out, "Reshape") {
				t.Errorf("%s after the reshape (want %q):\n%s", devs[0], off, out)
			}
		})
	}
}

// TestSlideSetup: an in-place shrink asks for mdadm's stripe cache (four
// stripes of the larger chunk, or the reshape unit per data disk and 16
// sectors, in pages) and, changing raid_disks only, SET_ARRAY_INFO; a
// layout change asks for the cache only; a growth or a reshape without
// the backup file asks for neither.
func TestSlideSetup(t *testing.T) {
	const k512, comp = 512 << 10, 37888
	bf := &growOptions{backupFile: "/tmp/b"}
	cases := []struct {
		name                       string
		level, n, delta, newLayout int
		o                          *growOptions
		cache                      int
		info                       bool
	}{
		{"raid6 -n4", 6, 5, -1, unset, bf, 512, true},
		{"raid5 -n2", 5, 3, -1, unset, bf, 512, true},
		{"raid6 --layout=ra", 6, 4, unset, 1, bf, 512, false},
		{"raid6 -n4 without the file", 6, 5, -1, unset, &growOptions{}, 0, false},
		{"raid5 -n4", 5, 3, 1, unset, bf, 0, false},
	}
	for _, c := range cases {
		r, msg := analyseRestripe("/dev/md0", c.level, 2, c.n, k512, comp, c.level, c.newLayout, c.delta, 0)
		if msg != "" {
			t.Fatalf("%s: %s", c.name, msg)
		}
		var req daemon.Request
		slideSetup(&req, c.o, r, comp)
		if req.StripeCache != c.cache || req.SetArrayInfo != c.info {
			t.Errorf("%s: stripe cache %d, SET_ARRAY_INFO %v; want %d, %v", c.name, req.StripeCache, req.SetArrayInfo, c.cache, c.info)
		}
	}
}
