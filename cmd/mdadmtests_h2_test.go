package cmd

// mdadm 4.2's tests translated by h2 (issue 16): added to mdadmTests here,
// so that the table's literal stays free for the others' entries.
func init() {
	mdadmTests = append(mdadmTests,
		mdadmTest{name: "00names", devs: 5, final: []int{1, 2, 3, 4}},
		mdadmTest{name: "03assem-incr", devs: 5, final: []int{0, 1, 2, 3, 4}},
	)
}
