package cmd

import "fmt"

// 00multipath: md's multipath personality over two loop devices that
// are the same image (mdadm's tests/func.sh: /dev/loop7 over mdtest6).
// Both worlds run in the guest, where the paths are loop devices.
func init() {
	mdadmTests = append(mdadmTests, mdadmTest{name: "00multipath", devs: 8, final: []int{6}, inVM: true, multipath: true,
		vars: []string{"path0=/dev/loop6", "path1=/dev/loop7", "devlist=/dev/loop6 /dev/loop7"}})
	mdadmKnown = append(mdadmKnown, mdadmKnownDiff{test: "00multipath", mask: reServedLines, repl: "\n", item: "mdtool-only: --detail says where the array is served"})
}

// mdadmLoopImage is the guest image behind /dev/loopI of test c: the
// second path of a multipath test is the first path's image.
func mdadmLoopImage(c mdadmTest, i int) string {
	if c.multipath && i == 7 {
		i = 6
	}
	return fmt.Sprintf("/tmp/img/d%d", i)
}

// mdadmMultipath reports whether a test of tests needs md's multipath
// personality (the guest's multipath module) and nbdcopy in the guest
// (mdtool's fill and readback there).
func mdadmMultipath(tests []mdadmTest) bool {
	for _, c := range tests {
		if c.multipath {
			return true
		}
	}
	return false
}
