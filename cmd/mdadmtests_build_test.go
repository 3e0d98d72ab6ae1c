package cmd

// mdadm 4.2's tests of arrays without superblocks (--build) and of
// assembly after a failure, translated in testdata/mdadm-tests.
func init() {
	mdadmTests = append(mdadmTests,
		// members without superblocks: the kernel's check builds
		// mdtool's final members with mdtool's bitmap file
		mdadmTest{name: "05r1-re-add-nosuper", devs: 3, final: []int{1, 2}, bitmap: "bitmap2", bitmapFinal: true, build: "-l1 -n2"},
		mdadmTest{name: "03r5assem-failed", devs: 4, final: []int{0, 1, 2, 3}},
	)
}
