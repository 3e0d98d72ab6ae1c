package cmd

// --re-add and --replace compared with mdadm 4.2 + Linux 6.1 (issue 16):
// 0.90 arrays (mdtool in the VM too: 0.90's -E prints each member's device
// numbers) and a 1.2 raid1 without a bitmap.
func init() {
	mdadmTests = append(mdadmTests,
		mdadmTest{name: "05r1-re-add-nobitmap", devs: 3, final: []int{1, 2}},
		mdadmTest{name: "05r1-re-add-090", devs: 3, final: []int{1, 2}, inVM: true},
		mdadmTest{name: "01replace-090", devs: 6, inVM: true},
	)
}
