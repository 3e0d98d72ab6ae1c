package cmd

import (
	"encoding/binary"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// writeMBR puts an MBR with one Linux partition on the image p.
func writeMBR(t *testing.T, p string) {
	t.Helper()
	mbr := make([]byte, 512)
	mbr[446+4] = 0x83
	binary.LittleEndian.PutUint32(mbr[446+8:], 2048)
	binary.LittleEndian.PutUint32(mbr[446+12:], 4096)
	mbr[510], mbr[511] = 0x55, 0xaa
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(mbr, 0); err != nil {
		t.Fatal(err)
	}
}

// TestCreateOverOldContents: create over members holding an old array,
// a filesystem or a partition table follows mdadm 4.2 (texts seen from
// mdadm 4.2 in the oracle VM, "mdadm:" read as "mdtool:"): the warnings,
// then with --run it creates; without --run it asks "Continue creating
// array?" and goes ahead only on an answer starting with y or Y.
func TestCreateOverOldContents(t *testing.T) {
	const raid0 = "appears to be part of a raid array:\n       level=raid0 devices=3 ctime=Sun Nov 30 05:20:00 2025\n"
	const bootNote = "mdtool: Note: this array has metadata at the start and\n" +
		"    may not be suitable as a boot device.  If you plan to\n" +
		"    store '/boot' on this device please ensure that\n" +
		"    your boot-loader understands md/v1.x metadata, or use\n" +
		"    --metadata=0.90\n"
	oldRaid0 := func(t *testing.T, dir string) []string {
		d := []string{sparse(t, dir, "a", 20<<20), sparse(t, dir, "b", 20<<20), sparse(t, dir, "c", 20<<20)}
		env, _, errb := testEnv("")
		if rc := Main(append([]string{"--create", "/dev/md9", "-l0", "-n3", "--run"}, d...), env); rc != 0 {
			t.Fatalf("setup create: %d %s", rc, errb)
		}
		return d
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string) []string
		args  []string
		stdin string
		code  int
		// want is the whole stderr with DEV0.. for the devices
		want string
	}{
		{"run over raid0", oldRaid0, []string{"-l0", "-n3", "--run"}, "", 0,
			"mdtool: DEV0 " + raid0 + "mdtool: DEV1 " + raid0 + "mdtool: DEV2 " + raid0 +
				"mdtool: Defaulting to version 1.2 metadata\nmdtool: array /dev/md0 created.\n"},
		{"run quiet over raid0", oldRaid0, []string{"-l0", "-n3", "--run", "--quiet"}, "", 0, ""},
		{"run verbose over raid0", oldRaid0, []string{"-l0", "-n3", "--run", "-v"}, "", 0,
			"mdtool: chunk size defaults to 512K\n" + "mdtool: DEV0 " + raid0 + "mdtool: DEV1 " + raid0 + "mdtool: DEV2 " + raid0 +
				"mdtool: creation continuing despite oddities due to --run\n" +
				"mdtool: Defaulting to version 1.2 metadata\nmdtool: array /dev/md0 created.\n"},
		{"no input", oldRaid0, []string{"-l1", "-n3"}, "", 1,
			"mdtool: DEV0 " + raid0 + bootNote + "mdtool: DEV1 " + raid0 + "mdtool: DEV2 " + raid0 +
				"Continue creating array? mdtool: create aborted.\n"},
		{"answer n", oldRaid0, []string{"-l1", "-n3"}, "n\n", 1,
			"mdtool: DEV0 " + raid0 + bootNote + "mdtool: DEV1 " + raid0 + "mdtool: DEV2 " + raid0 +
				"Continue creating array? mdtool: create aborted.\n"},
		{"five bad answers", oldRaid0, []string{"-l0", "-n3"}, "a\nb\nc\nd\ne\nf\n", 1,
			"mdtool: DEV0 " + raid0 + "mdtool: DEV1 " + raid0 + "mdtool: DEV2 " + raid0 +
				"Continue creating array? " + strings.Repeat("Continue creating array? (y/n) ", 4) +
				"mdtool: assuming 'no'\nmdtool: create aborted.\n"},
		{"answer Yes", oldRaid0, []string{"-l0", "-n3"}, "Yes\n", 0,
			"mdtool: DEV0 " + raid0 + "mdtool: DEV1 " + raid0 + "mdtool: DEV2 " + raid0 +
				"Continue creating array? mdtool: Defaulting to version 1.2 metadata\nmdtool: array /dev/md0 created.\n"},
		{"mbr 1.2", func(t *testing.T, dir string) []string {
			d := []string{sparse(t, dir, "a", 20<<20), sparse(t, dir, "b", 20<<20)}
			writeMBR(t, d[1])
			return d
		}, []string{"-l1", "-n2"}, "", 1,
			bootNote + "mdtool: partition table exists on DEV1\n" +
				"mdtool: partition table exists on DEV1 but will be lost or\n       meaningless after creating array\n" +
				"Continue creating array? mdtool: create aborted.\n"},
		{"mbr 1.0", func(t *testing.T, dir string) []string {
			d := []string{sparse(t, dir, "a", 20<<20), sparse(t, dir, "b", 20<<20)}
			writeMBR(t, d[1])
			return d
		}, []string{"-e1.0", "-l1", "-n2"}, "", 1,
			"mdtool: partition table exists on DEV1\nContinue creating array? mdtool: create aborted.\n"},
		{"ext4 run", func(t *testing.T, dir string) []string {
			d := []string{sparse(t, dir, "a", 20<<20), sparse(t, dir, "b", 20<<20)}
			cmd := exec.Command("mkfs.ext4", "-q", "-F", "-b", "4096", "-E", "nodiscard", d[0])
			cmd.Env = append(os.Environ(), "E2FSPROGS_FAKE_TIME=1764480000")
			if out, err := cmd.CombinedOutput(); err != nil {
				if os.Getenv("CI") != "" {
					t.Fatalf("mkfs.ext4: %v %s", err, out)
				}
				t.Skip("mkfs.ext4 unavailable")
			}
			return d
		}, []string{"-l1", "-n2", "--run"}, "", 0,
			"mdtool: DEV0 appears to contain an ext2fs file system\n       size=20480K  mtime=Thu Jan  1 00:00:00 1970\n" +
				bootNote + "mdtool: Defaulting to version 1.2 metadata\nmdtool: array /dev/md0 created.\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			devs := tc.setup(t, dir)
			before := map[string][32]byte{}
			for _, d := range devs {
				before[d] = fileHash(t, d)
			}
			env, _, errb := testEnv(tc.stdin)
			rc := Main(append(append([]string{"--create", "/dev/md0"}, tc.args...), devs...), env)
			got := errb.String()
			for i := len(devs) - 1; i >= 0; i-- {
				got = strings.ReplaceAll(got, devs[i], "DEV"+string(rune('0'+i)))
			}
			if rc != tc.code || got != tc.want {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d, stderr:\n%s", rc, got, tc.code, tc.want)
			}
			for _, d := range devs {
				if changed := fileHash(t, d) != before[d]; changed != (tc.code == 0) {
					t.Errorf("%s changed=%v after exit %d", d, changed, rc)
				}
			}
		})
	}
}
