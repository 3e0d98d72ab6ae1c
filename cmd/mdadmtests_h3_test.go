package cmd

import "regexp"

// mdadm 4.2's bitmap and replace tests (issue 16), translated in
// testdata/mdadm-tests; see mdadmTests.
func init() {
	mdadmTests = append(mdadmTests,
		mdadmTest{name: "05r1-internalbitmap-v1a", devs: 3, final: []int{1, 2}},
		mdadmTest{name: "05r1-internalbitmap-v1b", devs: 3, final: []int{1, 2}},
		mdadmTest{name: "05r1-internalbitmap-v1c", devs: 3, final: []int{1, 2}},
		// 0.90's -E lists each member's major and minor, which image
		// files on the host do not have: mdtool runs in the VM too
		mdadmTest{name: "05r1-add-internalbitmap", devs: 3, final: []int{1, 2}, inVM: true},
		mdadmTest{name: "05r1-add-internalbitmap-v1a", devs: 3, final: []int{1, 2}},
		mdadmTest{name: "05r1-add-internalbitmap-v1b", devs: 3, final: []int{1, 2}},
		mdadmTest{name: "05r1-add-internalbitmap-v1c", devs: 3, final: []int{1, 2}},
		mdadmTest{name: "05r1-remove-internalbitmap", devs: 3, final: []int{1, 2}, inVM: true},
		mdadmTest{name: "05r1-remove-internalbitmap-v1a", devs: 3, final: []int{1, 2}},
		mdadmTest{name: "05r1-remove-internalbitmap-v1b", devs: 3, final: []int{1, 2}},
		mdadmTest{name: "05r1-remove-internalbitmap-v1c", devs: 3, final: []int{1, 2}},
		// the last array (raid10) ends degraded: roles 0-2 on d5, d4, d1
		mdadmTest{name: "01replace", devs: 6, final: []int{1, 4, 5}},
	)
	mdadmKnown = append(mdadmKnown,
		// 0.90's -X reads the bitmap area 4 KiB after the superblock
		// even after --grow --bitmap=none (md_bitmap_destroy writes
		// nothing): the bits the bitmap daemon had cleared on disk before
		// the removal, which comes right after the initial resync ends
		// ("settle"). md ends synced chunks every daemon_sleep (1 s here)
		// during the resync (md_bitmap_cond_end_sync) and the rest at its
		// end (close_sync, before --wait returns); the daemon clears an
		// ended chunk's bit on its second pass and writes it then or on
		// the third. The engine follows those rules (condendsync.go,
		// TestCondEndSyncCadence, TestResyncBitmapCadence), so the count
		// is the time between: in the VM the kernel gave 4976 dirty as
		// here (a resync under 1 s; seven runs), 0 with a 6 s pause before
		// -Gb none, and 2672 with speed_limit_max=4000 (a 4 s resync;
		// Events 22 instead of 19 there: md_update_sb for each
		// cond_end_sync, which the engine does not do yet), each twice;
		// mdtool 0, 447, 548, 2928 (before condendsync.go), 581. Every
		// other field of that -X, and the -E, are compared.
		mdadmKnownDiff{test: "05r1-remove-internalbitmap", mask: regexp.MustCompile(`(?m)(^\s*Bitmap : \d+ bits \(chunks\), )\d+ dirty \([0-9.]+%\)`),
			repl: "${1}N dirty", item: "dirty bits of a removed 0.90 bitmap (timing of the bitmap daemon after the resync)"},
	)
}
