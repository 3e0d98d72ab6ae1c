package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
)

// The mdadm command sequences of public provisioning scripts (issue 16),
// without their mkfs/mount steps, in testdata/provisioning/NAME.sh (each
// names its source repository and path). They run on the mdadm-test
// harness (mdadmtests_test.go): mdadm 4.2 with Linux 6.1 in the oracle VM
// on loop devices, mdtool on the same fresh images (on the host, or in the
// VM for the sequences that scan block devices), every step's exit status
// and normalised text compared, the mdadm.conf they write logged as a step
// ("### file mdadm.conf"), the final -E/-X of every member compared, and
// the kernel assembling and checking the array mdtool left (final).
var provisioningTests = []mdadmTest{
	{name: "aws-ec2", devs: 4, final: []int{2, 3}},
	{name: "ansible-mrlesmithjr", devs: 2},
	{name: "ansible-kilnfi", devs: 5, final: []int{0, 1, 2}},
	{name: "ironic", devs: 4, final: []int{2, 3}, inVM: true},
	{name: "hetzner", devs: 4, final: []int{0, 1}},
	{name: "eks", devs: 2, final: []int{0, 1}},
	{name: "debian", devs: 5, final: []int{2, 3, 4}, inVM: true},
	// Not public scripts: mdadm 4.2's --grow forms that restripe (issue
	// 14), the data written before compared after each change.
	{name: "grow-r5", devs: 4, final: []int{0, 1, 2}, md5: true},
	{name: "grow-r0add", devs: 4, final: []int{0, 1, 2, 3}},
	{name: "grow-levels", devs: 5, final: []int{0, 1, 2}, md5: true},
}

// provisioningKnown: the differences left, each with its cause (same
// rules as mdadmKnown: a mask must hide a difference, a `from` entry must
// be where the test's logs first differ).
var provisioningKnown = append(append(provisioningServedMasks("aws-ec2", "eks", "ironic", "debian", "grow-r5", "grow-r0add", "grow-levels"),
	provisioningFileMasks("aws-ec2", "eks", "grow-r5", "grow-r0add", "grow-levels")...), growRestripeKnown...)

// growRestripeKnown: where mdtool's restriping --grow differs.
var growRestripeKnown = []mdadmKnownDiff{
	// mdadm 4.2 cannot shrink a raid5 on Linux 6.1 without a backup file:
	// set_new_data_offset writes a larger new_offset before md knows the
	// reshape goes backwards (reshape_direction is set only for changes
	// in place; raid_disks, written later, would set it), and md refuses
	// it (EINVAL): "Cannot set new_offset for DEV", exit 1. mdtool
	// shrinks (the engine moves data_offset up, backwards, as md does
	// once the direction is known).
	{test: "grow-r5", from: "--raid-devices=3", item: "mdadm 4.2 on 6.1 cannot shrink without a backup file"},
	// Issue 16, engine side: md counts a few events through a restripe
	// (5 after raid0 -> raid5, 21 at the end), the engine more (58, 198).
	// md's raid5_run computed min_offset_diff before mdadm wrote
	// new_offset, so for a reshape started on the running array its rule
	// works as in place: with as many data disks after as before it never
	// asks, and md records only every 10 s (these reshapes take less); a
	// crash then restarts from a position whose old data the new rows,
	// D = 1024 sectors lower, have overwritten. The engine records md's
	// points, and also before a row would overwrite old data a restart
	// reads (a record every 8 rows here; reshape_record.go). Also the
	// engine's raid4 -> raid5 restripe leaves the missing parity role to
	// a recovery afterwards (its 1/16 records), where md's
	// raid5_start_reshape gives it to the spare and the reshape fills it.
	{test: "grow-levels", mask: regexp.MustCompile(`(Events : )\d+`), repl: "${1}N", item: "issue 16: events through a restripe"},
	// The same in the raid0 growth (raid4 of 4 -> 5, back to raid0): md's
	// events at the end 26, the engine's 24.
	{test: "grow-r0add", mask: regexp.MustCompile(`(Events : )\d+`), repl: "${1}N", item: "issue 16: events through a restripe"},
	// Where mdadm 4.2 puts the bad-block log of the member it adds right
	// after the raid0 -> raid4/5 takeover is a race in the reference
	// world: write_init_super1 sizes the bitmap space it leaves from the
	// size field of an existing member's superblock (choose_bm_space),
	// which is 0 until md has written the new level's superblocks (raid0
	// records none). Mostly md has: 8 sectors of space, the log at 16, as
	// mdtool writes it; on a loaded CI host it once had not: the log at
	// 8 (grow-levels, DEV3).
	{test: "grow-levels", timing: true, mask: reAddedBBLog, repl: "${1}8|16${2}", item: "mdadm 4.2's bad-block log offset of the member added after a takeover (a race with md's superblock update)"},
	{test: "grow-r0add", timing: true, mask: reAddedBBLog, repl: "${1}8|16${2}", item: "mdadm 4.2's bad-block log offset of the member added after a takeover (a race with md's superblock update)"},
}

// reAddedBBLog is the bad-block log offset in DEV3's -E.
var reAddedBBLog = regexp.MustCompile(`(?s)(### mdadm -E DEV3\n.*?Bad Block Log : 512 entries available at offset )(?:8|16)( sectors)`)

// reServedLines: mdtool's --detail ends with where the array is served
// (here its NBD socket: the harness runs mdtool with MDTOOL_DEVICE=none);
// mdadm has no such lines. On purpose: scripts that parse --detail read
// mdadm's lines, which are unchanged.
var reServedLines = regexp.MustCompile(`\n\n +(?:Block Device|NBD Socket|NBD TCP|FUSE File|Metrics) : [^\n]*\n(?: +(?:Block Device|NBD Socket|NBD TCP|FUSE File|Metrics) : [^\n]*\n)*`)

func provisioningServedMasks(tests ...string) []mdadmKnownDiff {
	var k []mdadmKnownDiff
	for _, t := range tests {
		k = append(k, mdadmKnownDiff{test: t, mask: reServedLines, repl: "\n", item: "mdtool-only: --detail says where the array is served"})
	}
	return k
}

// reDevNumbers: --detail's Major and Minor columns. On the host the
// members are image files, which have no device numbers (0 0); mdadm's
// are loop devices (7 N). Not a difference of mdtool's: in the VM (inVM
// sequences) both print the loop devices' numbers.
var reDevNumbers = regexp.MustCompile(`(?m)^( +\d+) +\d+ +\d+( +\d+ +(?:active|spare|faulty|removed))`)

func provisioningFileMasks(tests ...string) []mdadmKnownDiff {
	var k []mdadmKnownDiff
	for _, t := range tests {
		k = append(k, mdadmKnownDiff{test: t, mask: reDevNumbers, repl: "${1}  MAJ  MIN${2}", item: "image files have no device numbers"})
	}
	return k
}

// provisioningSequences is TestProvisioningSequences (declared in
// cmd/aa_vmfirst_test.go, so that it starts early): it runs
// provisioningTests (PROVISIONING_TESTS limits them, like MDADM_TESTS;
// MDADM_TESTS_KEEP keeps the share).
func provisioningSequences(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	bin := mdtoolBinary(t)
	root := t.TempDir()
	if keep := os.Getenv("MDADM_TESTS_KEEP"); keep != "" {
		root = keep
	}
	share := filepath.Join(root, "share")
	testsDir := filepath.Join(share, "tests")
	if err := os.MkdirAll(testsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	prelude := append(read("testdata/mdadm-tests/prelude.sh"), read("testdata/provisioning/helpers.sh")...)
	for _, p := range []string{filepath.Join(share, "prelude.sh"), filepath.Join(testsDir, "prelude.sh")} {
		if err := os.WriteFile(p, prelude, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := provisioningTests
	if f := os.Getenv("PROVISIONING_TESTS"); f != "" {
		tests = nil
		for _, c := range provisioningTests {
			if strings.Contains(" "+f+" ", " "+c.name+" ") {
				tests = append(tests, c)
			}
		}
	}
	got := map[string]string{}
	for _, c := range tests {
		if err := os.WriteFile(filepath.Join(testsDir, c.name+".sh"), read(filepath.Join("testdata/provisioning", c.name+".sh")), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, side := range []string{"vm", "mt"} {
			if err := os.MkdirAll(filepath.Join(share, side, c.name), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	host := func() {
		for _, c := range tests {
			if !c.inVM {
				got[c.name] = runMdadmTestHost(t, bin, share, testsDir, c)
			}
		}
	}
	vmShare := share
	if reuse := os.Getenv("MDADM_TESTS_VM_SHARE"); reuse != "" {
		vmShare = reuse
		host()
	} else {
		out := execBeside(t, share, mdvm.Run{Share: share, Script: mdadmTestVMScript(tests), Bins: []string{bin}, Mem: 2048, Timeout: 2700 * time.Second}, host)
		if len(out) > 0 {
			t.Logf("VM output:\n%s", out)
		}
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(vmShare, "vm", c.name, "log"))
			if err != nil {
				t.Fatalf("no mdadm log: %v", err)
			}
			names, _ := mdadmTestNames(c, func(i int) string { return fmt.Sprintf("/dev/loop%d", i) })
			want := normaliseMdadmLog(string(b), names, "/share/vm/"+c.name)
			if c.inVM {
				m, err := os.ReadFile(filepath.Join(vmShare, "mt", c.name, "log"))
				if err != nil {
					t.Fatalf("no mdtool log: %v", err)
				}
				got[c.name] = normaliseMdadmLog(string(m), names, "/share/mt/"+c.name)
			}
			mine := got[c.name]
			if !strings.Contains(want, "### file mdadm.conf") && strings.Contains(string(read(filepath.Join("testdata/provisioning", c.name+".sh"))), "logconf") {
				t.Errorf("the mdadm log has no mdadm.conf step")
			}
			for _, k := range provisioningKnown {
				if k.mask != nil && k.test == c.name {
					w, m := k.mask.ReplaceAllString(want, k.repl), k.mask.ReplaceAllString(mine, k.repl)
					if w == want && m == mine && !k.timing {
						t.Errorf("known difference (%s) is gone: delete its entry in provisioningKnown", k.item)
					}
					want, mine = w, m
				}
			}
			first, diffs := compareMdadmLogs(splitSteps(want), splitSteps(mine))
			checkMdadmDiffs(t, provisioningKnown, c.name, splitSteps(want), first, diffs)
			if c.final != nil && vmShare == share {
				k, err := os.ReadFile(filepath.Join(share, "mt", c.name, "kcheck"))
				if err != nil {
					t.Fatalf("no kernel check: %v", err)
				}
				if strings.Contains(string(k), "ASSEMBLE-FAILED") || !regexp.MustCompile(`(?m)^mismatch_cnt=0?$`).Match(k) ||
					!regexp.MustCompile(`(?m)^array_state=(clean|active)$`).Match(k) {
					t.Errorf("the kernel's check of mdtool's images:\n%s", k)
				}
				checkServedMD5(t, share, c, string(k))
			}
		})
	}
}
