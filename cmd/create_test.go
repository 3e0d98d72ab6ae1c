package cmd

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testEnv(stdin string) (*Env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &Env{
		Stdin:    strings.NewReader(stdin),
		Stdout:   &out,
		Stderr:   &errb,
		Now:      func() time.Time { return time.Unix(1764480000, 0) },
		Hostname: func() (string, error) { return "testhost", nil },
	}, &out, &errb
}

func sparse(t *testing.T, dir, name string, size int64) string {
	t.Helper()
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

func fileHash(t *testing.T, p string) [32]byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s
}

// TestCreateRefusalsWriteNothing runs create with bad input of every kind
// and checks the exit status, that there is one clear error, and that every
// member file is byte-for-byte what it was before.
func TestCreateRefusalsWriteNothing(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name   string
		setup  func(t *testing.T, dir string) []string // returns device args
		args   []string
		code   int
		errSub string
	}{
		{"unknown level", nil, []string{"-l", "raid7", "-n2"}, 2, "invalid raid level"},
		{"no level", nil, []string{"-n2"}, 2, "RAID level is needed"},
		{"no raid-devices", nil, []string{"-l1"}, 2, "no raid-devices"},
		{"unknown layout", nil, []string{"-l5", "-n2", "--layout=diagonal"}, 2, "layout"},
		{"raid10 layout on raid5", nil, []string{"-l5", "-n2", "-p", "n2"}, 2, "layout"},
		{"chunk not power of two", nil, []string{"-l5", "-n2", "-c", "96"}, 1, "power of 2"},
		{"chunk too small", nil, []string{"-l0", "-n2", "-c", "2"}, 2, "chunk"},
		{"chunk for raid1", nil, []string{"-l1", "-n2", "-c", "64"}, 1, "chunk"},
		{"bad size suffix", nil, []string{"-l1", "-n2", "-z", "12Q"}, 2, "size"},
		{"bitmap chunk not power of two", nil, []string{"-l1", "-n2", "-b", "internal", "--bitmap-chunk=3M"}, 2, "bitmap chunk"},
		{"bitmap chunk too small to fit", func(t *testing.T, dir string) []string {
			// 1 GiB members leave 4 KiB for the bitmap: 4K chunks need 32 KiB.
			return []string{sparse(t, dir, "a", 1024*mib), sparse(t, dir, "b", 1024*mib)}
		}, []string{"-l1", "-n2", "-b", "internal", "--bitmap-chunk=4K"}, 1, "bitmap"},
		{"bitmap file in no directory", nil, []string{"-l1", "-n2", "--bitmap=/nonexistent-h1/bm"}, 1, "failed to open bitmap file /nonexistent-h1/bm: No such file or directory"},
		{"too few devices", nil, []string{"-l5", "-n3"}, 1, "enough devices"},
		{"raid1 with one device", nil, []string{"-l1", "-n1"}, 2, "unusual number of drives"},
		{"more devices than slots", nil, []string{"-l1", "-n1", "--force"}, 1, "more devices"},
		{"raid6 with three", nil, []string{"-l6", "-n3"}, 1, "at least 4"},
		{"size larger than device", nil, []string{"-l1", "-n2", "-z", "1G"}, 1, "smaller than given size"},
		{"bad uuid", nil, []string{"-l1", "-n2", "--uuid=xyz"}, 2, "uuid"},
		{"duplicate member", func(t *testing.T, dir string) []string {
			a := sparse(t, dir, "a", 24*mib)
			return []string{a, a}
		}, []string{"-l1", "-n2"}, 2, "more than once"},
		{"missing file", func(t *testing.T, dir string) []string {
			return []string{sparse(t, dir, "a", 24*mib), filepath.Join(dir, "nonexistent")}
		}, []string{"-l1", "-n2"}, 2, "cannot open"},
		{"device too small", func(t *testing.T, dir string) []string {
			return []string{sparse(t, dir, "a", 24*mib), sparse(t, dir, "tiny", 8192)}
		}, []string{"-l1", "-n2"}, 1, ""},
		{"all missing", func(t *testing.T, dir string) []string {
			return []string{"missing", "missing"}
		}, []string{"-l1", "-n2"}, 1, "all missing"},
		{"ext4 on a member", func(t *testing.T, dir string) []string {
			a := sparse(t, dir, "a", 24*mib)
			if out, err := exec.Command("mkfs.ext4", "-q", "-F", a).CombinedOutput(); err != nil {
				if os.Getenv("CI") != "" {
					t.Fatalf("mkfs.ext4: %v %s", err, out)
				}
				t.Skip("mkfs.ext4 unavailable")
			}
			return []string{a, sparse(t, dir, "b", 24*mib)}
		}, []string{"-l1", "-n2", "--refuse-data"}, 1, "--force"},
		{"partition table on a member", func(t *testing.T, dir string) []string {
			a := sparse(t, dir, "a", 24*mib)
			mbr := make([]byte, 512)
			mbr[446+4] = 0x83                                   // partition type
			binary.LittleEndian.PutUint32(mbr[446+8:], 2048)    // start
			binary.LittleEndian.PutUint32(mbr[446+12:], 100000) // length
			mbr[510], mbr[511] = 0x55, 0xaa
			f, _ := os.OpenFile(a, os.O_WRONLY, 0)
			f.WriteAt(mbr, 0)
			f.Close()
			return []string{a, sparse(t, dir, "b", 24*mib)}
		}, []string{"-l1", "-n2", "--refuse-data"}, 1, "--force"},
		{"member of another array", func(t *testing.T, dir string) []string {
			a, b := sparse(t, dir, "a", 24*mib), sparse(t, dir, "b", 24*mib)
			env, _, errb := testEnv("")
			if rc := Main([]string{"--create", "/dev/md9", "-l1", "-n2", "--run", a, b}, env); rc != 0 {
				t.Fatalf("setup create: %d %s", rc, errb)
			}
			return []string{a, sparse(t, dir, "c", 24*mib)}
		}, []string{"-l1", "-n2", "--refuse-data"}, 1, "md superblock"},
		{"no answer to the question", nil, []string{"-l1", "-n2"}, 1, "create aborted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var devs []string
			if tc.setup != nil {
				devs = tc.setup(t, dir)
			} else {
				devs = []string{sparse(t, dir, "a", 24*mib), sparse(t, dir, "b", 24*mib)}
			}
			before := map[string][32]byte{}
			for _, d := range devs {
				if _, err := os.Stat(d); err == nil {
					before[d] = fileHash(t, d)
				}
			}
			args := append([]string{"--create", "/dev/md0"}, tc.args...)
			if tc.name != "no answer to the question" {
				args = append(args, "--run")
			}
			args = append(args, devs...)
			env, _, errb := testEnv("")
			rc := Main(args, env)
			if rc != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", rc, tc.code, errb)
			}
			if tc.errSub != "" && !strings.Contains(strings.ToLower(errb.String()), strings.ToLower(tc.errSub)) {
				t.Errorf("stderr %q does not mention %q", errb, tc.errSub)
			}
			if !strings.HasPrefix(errb.String(), "mdtool: ") {
				t.Errorf("error is not an mdtool message: %q", errb)
			}
			for d, h := range before {
				if fileHash(t, d) != h {
					t.Errorf("%s was modified by a refused create", d)
				}
			}
		})
	}
}

// TestCreateForceOverwrites checks that --force lets create replace another
// array's superblock, and that the old array's superblock is gone.
func TestCreateForceOverwrites(t *testing.T) {
	dir := t.TempDir()
	a, b := sparse(t, dir, "a", 64<<20), sparse(t, dir, "b", 64<<20)
	env, _, errb := testEnv("")
	if rc := Main([]string{"--create", "/dev/md9", "-e1.0", "-l1", "-n2", "--run", a, b}, env); rc != 0 {
		t.Fatalf("create 1.0: %d %s", rc, errb)
	}
	env, out, errb := testEnv("")
	if rc := Main([]string{"--create", "/dev/md0", "-l1", "-n2", "--run", "--force", a, b}, env); rc != 0 {
		t.Fatalf("create --force: %d %s", rc, errb)
	}
	env, out, errb = testEnv("")
	if rc := Main([]string{"-E", a}, env); rc != 0 {
		t.Fatalf("examine: %d %s", rc, errb)
	}
	if !strings.Contains(out.String(), "Version : 1.2") || !strings.Contains(out.String(), "Name : testhost:0") {
		t.Errorf("examine after --force create:\n%s", out)
	}
	// The old 1.0 superblock at the end must have been erased (mdadm's Kill).
	env, _, errb = testEnv("")
	if rc := Main([]string{"--zero-superblock", a}, env); rc != 0 {
		t.Fatalf("zero-superblock: %d %s", rc, errb)
	}
	env, _, errb = testEnv("")
	if rc := Main([]string{"-E", a}, env); rc != 1 {
		t.Errorf("examine after zero-superblock: exit %d, want 1 (no superblock left); %s", rc, errb)
	}
}

func TestZeroSuperblockExitCodes(t *testing.T) {
	dir := t.TempDir()
	a := sparse(t, dir, "a", 64<<20)
	env, _, errb := testEnv("")
	if rc := Main([]string{"--zero-superblock", a}, env); rc != 0 || !strings.Contains(errb.String(), "Unrecognised md component device") {
		t.Errorf("no superblock: exit %d, stderr %q; want 0 and mdadm's message", rc, errb)
	}
	env, _, errb = testEnv("")
	if rc := Main([]string{"--zero-superblock", filepath.Join(dir, "nope")}, env); rc != 2 {
		t.Errorf("missing device: exit %d, want 2; %s", rc, errb)
	}
}
