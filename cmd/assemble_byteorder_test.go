package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mdtool/superblock"
)

// swapFile090 turns over the 0.90 superblock of image p, as mdadm's
// tests helper swap_super does.
func swapFile090(t *testing.T, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	off := superblock.Offset090(uint64(len(b)))
	s, err := superblock.Swap090(b[off:])
	if err != nil {
		t.Fatal(err)
	}
	copy(b[off:], s)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// mdadm 4.2's tests/04r5swap: -E --metadata=0.swap of a byte-swapped 0.90
// member prints what -E --metadata=0 printed before the swap; without it
// the member has no superblock; a member in this host's order examined
// with 0.swap has none of the other order ("No super block found",
// exit 0, as mdadm's Examine); assemble --update=byteorder stores the
// superblocks in this host's order and starts the array.
func TestAssembleUpdateByteorder(t *testing.T) {
	bin := mdtoolBinary(t)
	dir := t.TempDir()
	run := combinedRunner(t, bin, filepath.Join(dir, "run"))
	var d []string
	for _, n := range []string{"a", "b", "c", "d"} {
		d = append(d, sparse(t, dir, n+".img", 20000<<10))
	}
	t.Cleanup(func() { run("-Ss") })
	if code, out := run("-CR", "--assume-clean", "-e0.90", "/dev/md0", "-l5", "-n4", d[0], d[1], d[2], d[3]); code != 0 {
		t.Fatalf("create: %d %s", code, out)
	}
	run("-S", "/dev/md0")
	code, before := run("-E", "--metadata=0", d[1])
	if code != 0 || !strings.Contains(before, "Raid Level : raid5\n") {
		t.Fatalf("-E --metadata=0: %d\n%s", code, before)
	}
	if code, out := run("-E", "--metadata=0.swap", d[1]); code != 0 || out != "mdtool: No super block found on "+d[1]+" (Expected magic a92b4efc, got fc4e2ba9)\n" {
		t.Errorf("-E -e 0.swap of a member in host order: %d %q", code, out)
	}
	for _, p := range d {
		swapFile090(t, p)
	}
	if code, out := run("-E", d[1]); code != 1 || out != "mdtool: No md superblock detected on "+d[1]+".\n" {
		t.Errorf("-E of a swapped member: %d %q", code, out)
	}
	for _, md := range []string{"0.swap", "00.swap", "0.9"} {
		if code, out := run("-E", "--metadata="+md, d[1]); code != 0 || out != before {
			t.Errorf("-E --metadata=%s: %d\n%s\nwant\n%s", md, code, out, before)
		}
	}
	code, out := run("-A", "/dev/md0", "--update=byteorder", d[0], d[1], d[2], d[3])
	if code != 0 || out != "mdtool: /dev/md0 has been started with 4 drives.\n" {
		t.Fatalf("-A --update=byteorder: %d %q", code, out)
	}
	run("-S", "/dev/md0")
	for _, p := range d {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sb, err := superblock.Parse090(b[superblock.Offset090(uint64(len(b))):])
		if sb == nil || err != nil || sb.BigEndian || sb.Events() < 1 {
			t.Errorf("%s after the update: %+v %v", p, sb, err)
		}
	}
	if code, out := run("-E", d[1]); code != 0 || !strings.Contains(out, "State : clean\n") {
		t.Errorf("-E after the update: %d\n%s", code, out)
	}
	// a device without a swapped superblock: load_super0's word, then select_devices'
	empty := sparse(t, dir, "e.img", 20000<<10)
	code, out = run("-A", "/dev/md0", "--update=byteorder", empty)
	if code == 0 || !strings.Contains(out, "mdtool: No super block found on "+empty+" (Expected magic a92b4efc, got 00000000)\nmdtool: no RAID superblock on "+empty+"\n") {
		t.Errorf("-A --update=byteorder of an empty device: %d %q", code, out)
	}
}
