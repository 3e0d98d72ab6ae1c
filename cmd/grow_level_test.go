package cmd

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"mdtool/superblock"
)

// TestAnalyseLevel: mdadm 4.2's analyse_change decides which level
// changes are immediate takeovers and which restripe (seen in the VM:
// raid0 -> raid5 without a layout and raid5 -> raid0 from left-symmetric
// start a reshape; raid1 -> raid5 is immediate).
func TestAnalyseLevel(t *testing.T) {
	const ls, pl, ls6 = superblock.LayoutLeftSymmetric, superblock.LayoutParityLast, superblock.LayoutLeftSymmetric6
	for _, c := range []struct {
		name                                 string
		level, layout, n, chunk              int
		newLevel, newLayout, delta, newChunk int
		immediate                            bool
		parity                               int
		msg                                  string
	}{
		{"raid1-raid5", 1, 0, 2, 0, 5, unset, unset, 0, true, 1, ""},
		{"raid1x3-raid5", 1, 0, 3, 0, 5, unset, unset, 0, false, 0, "Can only convert a 2-device array to RAID5"},
		{"raid0-raid5", 0, -1, 3, 65536, 5, unset, unset, 0, false, 1, ""},
		{"raid0-raid5-pl", 0, -1, 3, 65536, 5, pl, unset, 0, true, 1, ""},
		{"raid5pl-raid0", 5, pl, 4, 65536, 0, unset, unset, 0, true, 1, ""},
		{"raid5ls-raid0", 5, ls, 4, 65536, 0, unset, unset, 0, false, 1, ""},
		{"raid5-raid6", 5, ls, 3, 65536, 6, unset, 1, 0, false, 2, ""},
		{"raid5-raid6-preserve", 5, ls, 3, 65536, 6, ls6, 1, 0, true, 2, ""},
		{"raid6ls6-raid5", 6, ls6, 4, 65536, 5, unset, unset, 0, true, 2, ""},
		{"raid6ls-raid5", 6, ls, 4, 65536, 5, unset, unset, 0, false, 2, ""},
		{"raid10-raid5", 10, 0x102, 4, 65536, 5, unset, unset, 0, false, 0, "RAID10 can only be changed to RAID0"},
		{"raid6-raid1", 6, ls, 4, 65536, 1, unset, unset, 0, false, 0, "Impossible level change requested"},
	} {
		re, msg := analyseLevel(c.level, c.layout, c.n, c.chunk, 1<<16, c.newLevel, c.newLayout, c.delta, c.newChunk)
		if msg != c.msg || msg == "" && (re.immediate != c.immediate || re.parity != c.parity) {
			t.Errorf("%s: immediate %v parity %d msg %q, want %v %d %q", c.name, re.immediate, re.parity, msg, c.immediate, c.parity, c.msg)
		}
	}
}

// TestGrowLevel changes the level of served arrays with mdadm's command
// lines: the data written before reads back the same through NBD after
// each change (and after the recovery onto the spare given), mdadm's
// messages and exit statuses, and the superblocks at the end. The
// changes mdadm 4.2 makes by restriping: TestGrowRestripe.
func TestGrowLevel(t *testing.T) {
	const size = 16 << 20
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	grow := func(md string, args ...string) (int, string) {
		code, _, errs := mdtool(t, append(append([]string{"--grow", md}, args...), "--run-dir", runDir)...)
		return code, errs
	}
	type step struct {
		args  []string
		code  int
		errs  []string // in stderr
		sync  string   // a sync action that then finishes
		level int
	}
	for _, c := range []struct {
		name   string
		n      int
		create []string
		steps  []step
		final  []string // in every remaining member's examine
	}{
		{"r1", 2, []string{"-l1", "-n2", "--assume-clean"}, []step{
			{args: []string{"-l5"}, errs: []string{"mdtool: level of /dev/md/r1 changed to raid5\n"}, level: 5},
			{args: []string{"-l0"}, code: 1, level: 5}, // impose_level refuses a left-symmetric raid5 silently
		}, []string{"Raid Level : raid5", "Layout : left-symmetric", "Chunk Size : 64K", "Raid Devices : 2"}},
		// mdadm 4.2 + md 6.1 keep an internal bitmap through a takeover
		// (VM: raid1 -> raid5, raid4 <-> raid5, raid5 -> raid6 and back),
		// and Grow_reshape removes it first for any --level=0, also when
		// the change is then refused.
		{"r1bm", 2, []string{"-l1", "-n2", "--assume-clean", "--bitmap=internal"}, []step{
			{args: []string{"-l5"}, errs: []string{"mdtool: level of /dev/md/r1bm changed to raid5\n"}, level: 5},
			{args: []string{"-l0"}, code: 1, level: 5},
		}, []string{"Raid Level : raid5", "Feature Map : 0x0"}},
		{"r5bm", 3, []string{"-l5", "-n3", "-c64", "--layout=parity-last", "--assume-clean", "--bitmap=internal"}, []step{
			{args: []string{"-l0"}, errs: []string{"mdtool: level of /dev/md/r5bm changed to raid0\n"}, level: 0},
		}, []string{"Raid Level : raid0", "Feature Map : 0x0", "Raid Devices : 2"}},
		{"r6bm", 4, []string{"-l6", "-n4", "-c64", "--layout=left-symmetric-6", "--assume-clean", "--bitmap=internal"}, []step{
			{args: []string{"-l5"}, errs: []string{"mdtool: level of /dev/md/r6bm changed to raid5\n"}, level: 5},
		}, []string{"Raid Level : raid5", "Feature Map : 0x1", "Internal Bitmap : 8 sectors from superblock"}},
		{"r0", 3, []string{"-l0", "-n3", "-c64"}, []step{
			{args: []string{"-l5", "--layout=parity-last", "--add", "SPARE"}, sync: "recover", level: 5,
				errs: []string{"mdtool: level of /dev/md/r0 changed to raid5\n", "mdtool: added "}},
			{args: []string{"-l0"}, errs: []string{"mdtool: level of /dev/md/r0 changed to raid0\n"}, level: 0},
		}, []string{"Raid Level : raid0", "Raid Devices : 3"}},
		{"r5", 3, []string{"-l5", "-n3", "-c64", "--assume-clean"}, []step{
			{args: []string{"-l6", "-n4"}, code: 1, level: 5,
				errs: []string{"mdtool: Need 1 spare to avoid degraded array, and only have 0.\n       Use --force to over-ride this check.\n"}},
			{args: []string{"-l6", "-n4", "--layout=preserve", "--add", "SPARE"}, sync: "recover", level: 6,
				errs: []string{"mdtool: level of /dev/md/r5 changed to raid6\n"}},
			{args: []string{"-l5"}, errs: []string{"mdtool: level of /dev/md/r5 changed to raid5\n"}, level: 5},
		}, []string{"Raid Level : raid5", "Layout : left-symmetric", "Raid Devices : 3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			md := "/dev/md/" + c.name
			devs := mkArray(t, dir, md, c.n, size, c.create...)
			s := serve(t, runDir, md, devs...)
			defer s.stopIfRunning()
			n := int(detailJSONOf(t, runDir, md)["array_size_kib"].(float64)) * 1024
			data := nbdWrite(t, s.nbdURI(), n)
			spares := 0
			for _, st := range c.steps {
				args := append([]string(nil), st.args...)
				for i, a := range args {
					if a == "SPARE" {
						spares++
						args[i] = sparse(t, dir, c.name+"-spare"+string(rune('0'+spares))+".img", size)
						devs = append(devs, args[i])
					}
				}
				code, errs := grow(md, args...)
				if code != st.code {
					t.Fatalf("grow %v: exit %d, want %d: %q", st.args, code, st.code, errs)
				}
				for _, e := range st.errs {
					if !strings.Contains(errs, e) {
						t.Errorf("grow %v: stderr %q lacks %q", st.args, errs, e)
					}
				}
				if st.sync != "" {
					syncDone(t, runDir, md, st.sync)
				}
				d := detailJSONOf(t, runDir, md)
				if lv, _ := d["raid_level"].(string); lv != "raid"+string(rune('0'+st.level)) {
					t.Errorf("grow %v: detail raid_level %q, want raid%d", st.args, lv, st.level)
				}
				if got := nbdRead(t, s.nbdURI(), n); !bytes.Equal(got, data) {
					t.Fatalf("grow %v: the data read back differs", st.args)
				}
			}
			s.stop()
			// The members of the final array: the superblocks with the
			// newest events (a member failed and removed keeps its last).
			outs := map[string]string{}
			newest := ""
			for _, p := range devs {
				code, out, _ := mdtool(t, "examine", p)
				if code != 0 {
					continue // a spare the refused change never added
				}
				outs[p] = out
				if ev := examineField(out, "Events"); len(ev) > len(newest) || len(ev) == len(newest) && ev > newest {
					newest = ev
				}
			}
			for p, out := range outs {
				if examineField(out, "Events") != newest || strings.Contains(out, "Device Role : spare") {
					continue
				}
				for _, want := range c.final {
					if !strings.Contains(out, want) {
						t.Errorf("%s: examine lacks %q:\n%s", p, want, out)
					}
				}
			}
		})
	}
}
