package cmd

import "regexp"

// mdadm 4.2's tests translated by h2 (issue 16): added to mdadmTests here,
// so that the table's literal stays free for the others' entries.
func init() {
	mdadmTests = append(mdadmTests,
		mdadmTest{name: "00names", devs: 5, final: []int{1, 2, 3, 4}},
		mdadmTest{name: "03assem-incr", devs: 5, final: []int{0, 1, 2, 3, 4}},
		// 0.90 tests run mdtool in the VM too: a 0.90 superblock
		// records each member's device number, which -E prints with
		// the device's name (image files have none)
		mdadmTest{name: "03r5assem", devs: 5, final: []int{0, 2}, inVM: true},
		mdadmTest{name: "04r0update", devs: 5, final: []int{0, 1, 2}, inVM: true},
		mdadmTest{name: "04update-metadata", devs: 5, final: []int{0, 1, 2, 3}, inVM: true},
		mdadmTest{name: "05r1-failfast", devs: 5, final: []int{0, 1, 2}},
		mdadmTest{name: "06wrmostly", devs: 5, final: []int{0, 1, 2}},
	)
	mdadmKnown = append(mdadmKnown,
		// as in 03r5assemV1: "-Db" right after "-CR" counts the device
		// being recovered as a spare while its recovery runs (timing)
		mdadmKnownDiff{test: "03r5assem", mask: regexp.MustCompile(`(### mdadm -CR [^\n]*\n(?:[^#][^\n]*\n)*### mdadm -Db /dev/md1\nARRAY /dev/md1 metadata=0\.90 )spares=\d+ `), repl: "${1}", item: "recovery still running at the first -Db"},
	)
}
