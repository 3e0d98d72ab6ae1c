package cmd

import (
	"strings"
	"testing"
)

// --write-mostly and --failfast mark the devices after them (mdadm 4.2's
// tests/06wrmostly, 05r1-failfast): the members' devflags, shown by -E;
// a bare --write-behind is refused as mdadm 4.2 refuses it, a number is
// the bitmap's write_behind.
func TestCreateDevFlags(t *testing.T) {
	dir := t.TempDir()
	var devs []string
	for _, n := range []string{"a", "b", "c"} {
		devs = append(devs, sparse(t, dir, n+".img", 20<<20))
	}
	code, _, errs := mdtool(t, "create", "/dev/md/wm", "--start=false", "--run", "-l1", "-n3", "--bitmap=internal",
		"--write-behind=100", devs[0], "--failfast", devs[1], "--write-mostly", devs[2])
	if code != 0 {
		t.Fatalf("create: %d %s", code, errs)
	}
	want := []string{"", "          Flags : failfast\n", "          Flags : write-mostly failfast\n"}
	for i, d := range devs {
		_, out, _ := mdtool(t, "-E", d)
		has := strings.Contains(out, "Flags :")
		if (want[i] == "" && has) || (want[i] != "" && !strings.Contains(out, want[i])) {
			t.Errorf("-E %s: want %q\n%s", d, want[i], out)
		}
	}
	if _, out, _ := mdtool(t, "-X", devs[2]); !strings.Contains(out, "Write Mode : Allow write behind, max 100\n") {
		t.Errorf("-X: no write behind\n%s", out)
	}
	code, _, errs = mdtool(t, "create", "/dev/md/wb", "--start=false", "--run", "-l1", "-n2", "--write-behind", "--bitmap=internal", devs[0], devs[1])
	if code != 2 || errs != "mdtool: Invalid value for maximum outstanding write-behind writes: (null).\n\tMust be between 0 and 16383.\n" {
		t.Errorf("bare --write-behind: %d %q", code, errs)
	}
	if code, _, errs = mdtool(t, "create", "/dev/md/wb", "--start=false", "--run", "-l1", "-n2", "--write-behind=16384", devs[0], devs[1]); code != 2 ||
		!strings.Contains(errs, "writes: 16384.") {
		t.Errorf("--write-behind=16384: %d %q", code, errs)
	}
}
