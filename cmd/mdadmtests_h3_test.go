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
		// even after --grow --bitmap=none (md leaves it as it was): the
		// bits the bitmap daemon had cleared on disk before the removal,
		// which comes right after the initial resync ends ("settle").
		// md clears a synced chunk's bit on its second daemon pass after
		// md_bitmap_end_sync (daemon_sleep 1 s here), so how many are
		// clear depends on the time between the resync's checkpoints,
		// its end and the removal: the kernel showed 4976 dirty (none
		// cleared yet) in three runs, mdtool 0, 447 and 548. Every other
		// field of that -X, and the -E, are compared.
		mdadmKnownDiff{test: "05r1-remove-internalbitmap", mask: regexp.MustCompile(`(?m)(^\s*Bitmap : \d+ bits \(chunks\), )\d+ dirty \([0-9.]+%\)`),
			repl: "${1}N dirty", item: "dirty bits of a removed 0.90 bitmap (timing of the bitmap daemon after the resync)"},
	)
}
