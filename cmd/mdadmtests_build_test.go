package cmd

import "regexp"

// mdadm 4.2's tests of arrays without superblocks (--build) and of
// assembly after a failure, translated in testdata/mdadm-tests.
func init() {
	mdadmTests = append(mdadmTests,
		// members without superblocks: the kernel's check builds
		// mdtool's final members with mdtool's bitmap file
		mdadmTest{name: "05r1-re-add-nosuper", devs: 3, final: []int{1, 2}, bitmap: "bitmap2", bitmapFinal: true, build: "-l1 -n2"},
		mdadmTest{name: "03r5assem-failed", devs: 4, final: []int{0, 1, 2, 3}},
		// not one of mdadm's tests: --add, --write-behind, -W, the
		// bitmap file's failures and --re-add without a bitmap on built
		// arrays; the last raid1 has d2 in slot 0, d1 (write-mostly) in 1
		mdadmTest{name: "mt-build-extra", devs: 4, final: []int{2, 1}, bitmap: "bitmap", bitmapFinal: true, build: "-l1 -n2"},
	)
	mdadmKnown = append(mdadmKnown,
		// mt-build-extra: -D of members that are image files on the
		// host (no device numbers), served by mdtool's daemon
		mdadmKnownDiff{test: "mt-build-extra", mask: regexp.MustCompile(`(?m)^( *\d+) +\d+ +\d+( +(?:\d+|-) +)`), repl: "${1} MAJ MIN${2}", item: "mdtool-only: image files have no device numbers"},
		mdadmKnownDiff{test: "mt-build-extra", mask: reServedLines, repl: "\n", item: "mdtool-only: --detail says where the array is served"},
		// the kernel's -D after the recovery said "active" in two runs
		// and "clean" in one (md's safe mode: when its thread marks the
		// array clean after the last write, even a second later)
		mdadmKnownDiff{test: "mt-build-extra", mask: regexp.MustCompile(`(?m)^( +State : )(?:active|clean) $`), repl: "${1}STATE ", item: "timing: md's safe mode after the recovery (active or clean)"},
	)
}
