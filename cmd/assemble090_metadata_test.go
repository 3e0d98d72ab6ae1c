package cmd

import (
	"path/filepath"
	"strings"
	"testing"
)

// --update=metadata (mdadm 4.2's tests/04update-metadata): a clean 0.90
// array without a bitmap becomes 1.0 and starts so; a 1.0 array does not
// understand the word; a 0.90 array with a bitmap is refused.
func TestAssembleUpdateMetadata(t *testing.T) {
	bin := mdtoolBinary(t)
	dir := t.TempDir()
	run := combinedRunner(t, bin, filepath.Join(dir, "run"))
	var d []string
	for _, n := range []string{"a", "b", "c"} {
		d = append(d, sparse(t, dir, n+".img", 20000<<10))
	}
	t.Cleanup(func() { run("-Ss") })
	steps := []struct {
		args []string
		code int
		out  string // the output's end
	}{
		{[]string{"-CR", "--assume-clean", "-e0.90", "/dev/md0", "-l5", "-n3", "-c64", d[0], d[1], d[2]}, 0, "array /dev/md0 started.\n"},
		{[]string{"-S", "/dev/md0"}, 0, ""},
		{[]string{"-A", "/dev/md0", "--update=metadata", d[0], d[1], d[2]}, 0, "mdtool: /dev/md0 has been started with 3 drives.\n"},
		{[]string{"-S", "/dev/md0"}, 0, ""},
		{[]string{"-A", "/dev/md0", "--update=metadata", d[0], d[1], d[2]}, 1, "mdtool: --update=metadata not understood for 1.x metadata\n"},
		{[]string{"-CR", "--assume-clean", "-e0.90", "/dev/md0", "-l1", "-n3", "--bitmap=internal", d[0], d[1], d[2]}, 0, "array /dev/md0 started.\n"},
		{[]string{"-S", "/dev/md0"}, 0, ""},
		{[]string{"-A", "/dev/md0", "--update=metadata", d[0], d[1], d[2]}, 1, "mdtool: Cannot update metadata when bitmap is present\n"},
	}
	for i, s := range steps {
		code, out := run(s.args...)
		if code != s.code || !strings.HasSuffix(out, s.out) {
			t.Fatalf("%v: exit %d %q, want %d ...%q", s.args, code, out, s.code, s.out)
		}
		if i == 3 {
			_, e := run("-E", d[1])
			for _, w := range []string{"Version : 1.0\n", "Name : 0\n", "Raid Level : raid5\n", "Super Offset : 39984 sectors\n", "Device Role : Active device 1\n"} {
				if !strings.Contains(e, w) {
					t.Errorf("-E after the update: no %q\n%s", w, e)
				}
			}
		}
	}
}
