package cmd

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"mdtool/superblock"
)

var regexpProgress = regexp.MustCompile(`(?m)^ +Progress : .*\n`)

// TestDetailReshapeText: detail of an array whose superblocks record a
// reshape prints mdadm 4.2's lines. The first case is the state mdadm
// 4.2 -D printed for the kernel's raid5 growing 4->5 in the VM (Linux
// 6.1, --grow --raid-devices=5, 64K chunk): the same lines from State to
// Name, with mdtool's Progress line after the Status line (its numbers
// in sectors per device, as /proc/mdstat counts a reshape). The others
// print Detail.c's New Level / New Layout / New Chunksize lines where
// they differ, a shrinking Delta Devices, and the lines without a
// running reshape (frozen or not started yet). detail --json has a
// "reshape" object.
func TestDetailReshapeText(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/dr", 5, 32<<20, "-l5", "-n5", "-c64", "--assume-clean")
	s := serve(t, runDir, "/dev/md/dr", devs...)
	base, err := queryStatus(runDir, s.name)
	if err != nil {
		t.Fatal(err)
	}
	s.stop()
	sb0, err := superblock.Parse(padSuper(base.Superblock))
	if err != nil {
		t.Fatal(err)
	}
	// mdadm 4.2 -D on the kernel's array (Update Time, Name, UUID,
	// Events and the device table left out; Array Size is the old
	// geometry's until the reshape ends):
	kernel := "" +
		"             State : clean, reshaping \n" +
		"    Active Devices : 5\n" +
		"   Working Devices : 5\n" +
		"    Failed Devices : 0\n" +
		"     Spare Devices : 0\n" +
		"\n" +
		"            Layout : left-symmetric\n" +
		"        Chunk Size : 64K\n" +
		"\n" +
		"Consistency Policy : resync\n" +
		"\n" +
		"    Reshape Status : 26% complete\n" +
		"     Delta Devices : 1, (4->5)\n" +
		"\n" +
		"              Name : "
	for _, tc := range []struct {
		name                 string
		action               string
		delta                int32
		newLevel             int32
		newLayout            uint32
		newChunk             uint32 // sectors
		want                 []string
		absent               []string
		jsonLevel, jsonShape string
	}{
		{"grow-4-5", "reshape", 1, 5, 2, 128, []string{kernel,
			"    Reshape Status : 26% complete\n          Progress : [=====>...............]  reshape = 26.9% (8704/31744) finish="},
			[]string{"New Level", "New Layout", "New Chunksize"}, "raid5", "left-symmetric"},
		{"level-layout-chunk", "reshape", 1, 6, 18, 256, []string{
			"     Delta Devices : 1, (4->5)\n         New Level : raid6\n        New Layout : left-symmetric-6\n     New Chunksize : 128K\n\n              Name : "},
			nil, "raid6", "left-symmetric-6"},
		{"layout-only", "reshape", 0, 5, 0, 128, []string{
			"    Reshape Status : 26% complete\n        New Layout : left-asymmetric\n\n              Name : "},
			[]string{"Delta Devices", "New Level", "New Chunksize"}, "raid5", "left-asymmetric"},
		{"shrink-frozen", "frozen", -1, 5, 2, 128, []string{
			"             State : clean \n",
			"Consistency Policy : resync\n\n     Delta Devices : -1, (6->5)\n\n              Name : "},
			[]string{"Status :", "Progress :"}, "raid5", "left-symmetric"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := *sb0
			sb.FeatureMap |= superblock.FeatureReshapeActive | superblock.FeatureNewOffset
			sb.ReshapePosition, sb.DeltaDisks, sb.NewOffset = 69632, tc.delta, -512
			sb.NewLevel, sb.NewLayout, sb.NewChunk = tc.newLevel, tc.newLayout, tc.newChunk
			st := *base
			st.Superblock = sb.MarshalWithChecksum()
			st.SyncAction, st.SyncDone, st.SyncTotal, st.SyncSpeed = tc.action, 69632, 253952, 190
			if tc.action == "frozen" {
				st.SyncDone, st.SyncTotal = 0, 0
			}
			d, err := newDetailView(&st, "testhost")
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			d.writeDetail(&b, "/dev/md/dr", false)
			// the Progress line is mdtool's own: out for the comparison
			// with mdadm's text
			plain := regexpProgress.ReplaceAllString(b.String(), "")
			for i, w := range tc.want {
				text := b.String()
				if i == 0 {
					text = plain
				}
				if !strings.Contains(text, w) {
					t.Errorf("detail lacks %q:\n%s", w, b.String())
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(b.String(), a) {
					t.Errorf("detail has %q:\n%s", a, b.String())
				}
			}
			raw, _ := json.Marshal(d.json("/dev/md/dr"))
			var back struct {
				Reshape map[string]any `json:"reshape"`
				Sync    map[string]any `json:"sync"`
			}
			json.Unmarshal(raw, &back)
			r := back.Reshape
			if r["position_sectors"] != float64(69632) || r["delta_devices"] != float64(tc.delta) ||
				r["from_devices"] != float64(5-tc.delta) || r["to_devices"] != float64(5) ||
				r["new_level"] != tc.jsonLevel || r["new_layout"] != tc.jsonShape ||
				r["new_chunk_kib"] != float64(tc.newChunk/2) || r["new_offset_sectors"] != float64(-512) || r["backwards"] != false {
				t.Errorf("json reshape %v", r)
			}
			if tc.action == "reshape" && tc.newLevel == 5 && (back.Sync["done_sectors"] != float64(17408) || back.Sync["total_sectors"] != float64(63488)) {
				t.Errorf("json sync in sectors per device: %v", back.Sync)
			}
		})
	}
	// No reshape recorded: no reshape lines, no JSON object.
	d, _ := newDetailView(base, "testhost")
	var b bytes.Buffer
	d.writeDetail(&b, "/dev/md/dr", false)
	raw, _ := json.Marshal(d.json("/dev/md/dr"))
	if strings.Contains(b.String(), "Delta Devices") || strings.Contains(string(raw), `"reshape"`) {
		t.Errorf("reshape lines without a reshape:\n%s\n%s", b.String(), raw)
	}
}
