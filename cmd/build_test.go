package cmd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuild builds raid0 (unequal members), linear and raid1 arrays
// without superblocks on image files, writes them through NBD, stops them
// and builds them again: the same data. Each member's first 64 KiB hold
// the array's data where md puts it (no superblock before the data), and
// the bytes beyond the data area (a tail shorter than the chunk, the
// larger raid1 member's excess) are never written.
func TestBuild(t *testing.T) {
	const k = 1024
	cases := []struct {
		name  string
		args  []string
		sizes []int64
		used  []int64 // data bytes per member, from sector 0
		first []int64 // array offset of each member's first 64 KiB
	}{
		{"r0", []string{"-l0", "-n2", "-c64"}, []int64{4<<20 + 12*k, 6<<20 + 12*k}, []int64{4 << 20, 6 << 20}, []int64{0, 64 * k}},
		{"lin", []string{"-llinear", "-n2"}, []int64{4<<20 + 12*k, 6<<20 + 12*k}, []int64{4 << 20, 6 << 20}, []int64{0, 4 << 20}},
		{"r1", []string{"--level=1", "--raid-devices=2"}, []int64{4<<20 + 12*k, 6 << 20}, []int64{4<<20 + 12*k, 4<<20 + 12*k}, []int64{0, 0}},
	}
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var devs []string
			var orig [][]byte
			pattern := bytes.Repeat([]byte{0xa5}, 64*k)
			for i, s := range tc.sizes {
				p := sparse(t, dir, tc.name+"-"+string(rune('0'+i))+".img", s)
				f, err := os.OpenFile(p, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.WriteAt(pattern, 0)
				f.WriteAt(pattern, s-64*k)
				f.Close()
				devs = append(devs, p)
				o, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				orig = append(orig, o)
			}
			md := "/dev/md/" + tc.name
			args := append(append([]string{}, tc.args...), devs...)
			s := serveBuild(t, runDir, md, args...)
			size := arraySize(t, runDir, tc.name)
			var want int64
			if tc.name == "r1" {
				want = tc.used[0]
			} else {
				want = tc.used[0] + tc.used[1]
			}
			if size != want {
				t.Fatalf("array size %d, want %d", size, want)
			}
			code, out, errs := mdtool(t, "detail", "--run-dir", runDir, md)
			if code != 0 || !strings.Contains(out, "           Version : \n") || strings.Contains(out, "Persistence") || strings.Contains(out, "UUID :") || strings.Contains(out, "Events :") {
				t.Errorf("detail: exit %d %s\n%s", code, errs, out)
			}
			if tc.name == "r1" {
				// --add of a device smaller than the members' data:
				// Manage_add's non-persistent size check, the device
				// untouched (TestBuildAdd adds one that fits)
				extra := sparse(t, dir, "extra.img", 2<<20)
				code, _, errs := mdtool(t, "manage", "--run-dir", runDir, md, "--add", extra)
				if h := sparseHash(t, extra); code != 1 || errs != "mdtool: "+extra+" not large enough to join array\n" ||
					h != sparseHash(t, sparse(t, t.TempDir(), "zero.img", 2<<20)) {
					t.Errorf("--add on a build array: exit %d (%s), device changed: %v", code, errs, h)
				}
			}
			// mdadm 4.2 on a build array (mdvm): -Db has no UUID, --export
			// has MD_METADATA= and a zero MD_UUID.
			if _, out, _ := mdtool(t, "detail", "--brief", "--run-dir", runDir, md); out != "ARRAY "+md+" metadata=\n" {
				t.Errorf("detail --brief: %q", out)
			}
			if _, out, _ := mdtool(t, "detail", "--export", "--run-dir", runDir, md); !strings.Contains(out, "MD_METADATA=\nMD_UUID=00000000:00000000:00000000:00000000\n") {
				t.Errorf("detail --export:\n%s", out)
			}
			sum := scribble(t, s.nbdURI(), size)
			dump := filepath.Join(t.TempDir(), "dump")
			run(t, "nbdcopy", "--", s.nbdURI(), dump)
			data, err := os.ReadFile(dump)
			if err != nil {
				t.Fatal(err)
			}
			s.stop()
			for i, p := range devs {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(b[:64*k], data[tc.first[i]:tc.first[i]+64*k]) {
					t.Errorf("%s: first 64 KiB are not the array's data at %d", p, tc.first[i])
				}
				if !bytes.Equal(b[tc.used[i]:], orig[i][tc.used[i]:]) {
					t.Errorf("%s: written beyond its %d data bytes", p, tc.used[i])
				}
			}
			for _, p := range devs {
				if code, out, _ := mdtool(t, "examine", p); code == 0 {
					t.Errorf("%s has a superblock after build/stop:\n%s", p, out)
				}
			}
			s = serveBuild(t, runDir, md, args...)
			if got := readMD5(t, s.nbdURI(), size); got != sum {
				t.Errorf("built again: md5 %s, written %s", got, sum)
			}
			s.stop()
		})
	}
}

// TestBuildArgs: mdadm 4.2's refusals in build mode, their words and exit
// statuses.
func TestBuildArgs(t *testing.T) {
	dir := t.TempDir()
	a, b, c := sparse(t, dir, "a.img", 4<<20), sparse(t, dir, "b.img", 4<<20), sparse(t, dir, "c.img", 2<<20)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-B", "/dev/md0", "-l5", "-n2", a, b}, 2, "mdtool: Raid level 5 not permitted with --build.\n"},
		{[]string{"-B", "/dev/md0", "-lfoo", "-n2", a, b}, 2, "mdtool: invalid raid level: foo\n"},
		{[]string{"-B", "/dev/md0", "-l0", a, b}, 1, "mdtool: no raid-devices specified.\n"},
		{[]string{"-B", "/dev/md0", "-n2", a, b}, 1, "mdtool: a RAID level is needed to Build an array.\n"},
		{[]string{"-B", "/dev/md0", "-l1", "-n3", a, b}, 1, "mdtool: requested 3 devices in array but listed 2\n"},
		// Build.c's stat_is_blkdev, before the count check
		{[]string{"-B", "/dev/md0", "-l1", "-n3", a, filepath.Join(dir, "none.img")}, 1, "mdtool: stat failed for " + filepath.Join(dir, "none.img") + ": No such file or directory\n"},
		// two members beyond the smallest: md 6.1 refuses raid0 layout 0
		{[]string{"-B", "/dev/md0", "-l0", "-n3", "--foreground", c, a, b}, 1, "mdtool: RUN_ARRAY failed: Operation not supported\n"},
	} {
		code, _, errs := mdtool(t, append(tc.args, "--run-dir", filepath.Join(dir, "run"))...)
		if code != tc.code || errs != tc.msg {
			t.Errorf("%v: exit %d %q, want %d %q", tc.args, code, errs, tc.code, tc.msg)
		}
	}
}

// TestBuildSize: --size at build and grow --size on an array without
// superblocks. A size beyond the smaller member's end is refused (md 6.1
// takes it for a non-persistent member and then fails I/O there; mt-
// build-extra compares the rest with the kernel), and nothing of either
// member is written by the refusal.
func TestBuildSize(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	a := sparse(t, dir, "a.img", 24<<20)
	b := sparse(t, dir, "b.img", 30<<20)
	md := "/dev/md/bz"
	s := serveBuild(t, runDir, md, "-l1", "-n2", "--assume-clean", "-z", "16000", a, b)
	if got := arraySize(t, runDir, s.name); got != 16000<<10 {
		t.Fatalf("array size %d, want 16000 KiB", got)
	}
	sums := []string{fmt.Sprint(sparseHash(t, a)), fmt.Sprint(sparseHash(t, b))}
	for _, z := range []string{"30000", "24577"} {
		code, _, errs := mdtool(t, "grow", "--run-dir", runDir, md, "-z", z, "--assume-clean")
		if code != 1 || errs != "mdtool: Cannot set device size for "+md+": No space left on device\n" {
			t.Errorf("grow -z %s: exit %d %q", z, code, errs)
		}
	}
	if got := []string{fmt.Sprint(sparseHash(t, a)), fmt.Sprint(sparseHash(t, b))}; got[0] != sums[0] || got[1] != sums[1] {
		t.Error("a refused size change wrote to a member")
	}
	if code, _, errs := mdtool(t, "grow", "--run-dir", runDir, md, "--size=max"); code != 0 || errs != "mdtool: component size of "+md+" has been set to 24576K\n" {
		t.Errorf("grow --size=max: exit %d %q", code, errs)
	}
	if got := arraySize(t, runDir, s.name); got != 24<<20 {
		t.Errorf("array size %d after --size=max, want 24 MiB", got)
	}
}
