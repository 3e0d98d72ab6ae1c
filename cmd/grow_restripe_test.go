package cmd

import (
	"strings"
	"testing"

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
	if !strings.HasPrefix(noBackupFile("/dev/md0", restripe{re: levelChange{beforeData: 3, afterData: 2}}, 1).Error(),
		"/dev/md0: Cannot grow - need backup-file\n") {
		t.Errorf("shrink without room: %v", noBackupFile("/dev/md0", restripe{re: levelChange{beforeData: 3, afterData: 2}}, 1))
	}
	if got := noBackupFile("/dev/md0", restripe{re: levelChange{beforeData: 3, afterData: 4}}, 0).Error(); got != "/dev/md0: Cannot grow - need a spare or backup-file to backup critical section" {
		t.Errorf("growth without room or spare: %q", got)
	}
}
