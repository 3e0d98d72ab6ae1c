package cmd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
)

// raid10SizeCase is one raid10 array created with one spare on equal
// members of size bytes.
type raid10SizeCase struct {
	layout string
	disks  int
	size   int64
}

func (c raid10SizeCase) name() string { return fmt.Sprintf("%s-n%d-%d", c.layout, c.disks, c.size) }

func raid10SizeCases() []raid10SizeCase {
	var cs []raid10SizeCase
	for _, l := range []string{"n2", "f2", "f3", "o2"} {
		for _, n := range []int{4, 5, 6} {
			for _, size := range []int64{20000000, 30 << 20} {
				cs = append(cs, raid10SizeCase{l, n, size})
			}
		}
	}
	return cs
}

// reSizeLines picks the size lines of --detail, --examine and -X that
// raid10's chunk rounding decides.
var reSizeLines = regexp.MustCompile(`(?m)^ *(Array Size|Used Dev Size|Unused Space|Sync Size|Bitmap) : .*$`)

func sizeLines(s string) string {
	var out []string
	for _, l := range reSizeLines.FindAllString(s, -1) {
		out = append(out, strings.TrimSpace(l))
	}
	return strings.Join(out, "\n")
}

// TestKernelRAID10Sizes: raid10 arrays (near, far, offset layouts, several
// device counts and member sizes) created and started by mdadm 4.2 +
// Linux 6.1 in the VM and by mdtool on the host end with the same sizes
// in --detail, in the members' superblocks (Used Dev Size, Array Size,
// Unused Space) and in the bitmap (Sync Size, chunks): the kernel's
// calc_sectors/raid10_size rounding, which it writes back at the first
// start (mdadm writes the unrounded size). --assume-clean on both sides:
// the sizes are the point, and 24 resyncs under TCG cost CI minutes.
func TestKernelRAID10Sizes(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	cases := raid10SizeCases()
	var script strings.Builder
	script.WriteString("cd /tmp\n")
	for _, c := range cases {
		var devs []string
		fmt.Fprintf(&script, "echo '=== %s'\n", c.name())
		for i := 0; i <= c.disks; i++ {
			fmt.Fprintf(&script, "truncate -s %d m%d; L%d=$(losetup -f); losetup $L%d m%d\n", c.size, i, i, i, i)
			devs = append(devs, fmt.Sprintf("$L%d", i))
		}
		fmt.Fprintf(&script, "mdadm -CR /dev/md0 -l10 -p%s -n%d -x1 --assume-clean --bitmap=internal --bitmap-chunk=64K %s >/dev/null 2>&1 || echo create-failed\n",
			c.layout, c.disks, strings.Join(devs, " "))
		script.WriteString("mdadm --wait /dev/md0 >/dev/null 2>&1; mdadm -D /dev/md0; mdadm -S /dev/md0 >/dev/null 2>&1\n")
		script.WriteString("mdadm -E $L0; mdadm -X $L0\n")
		for i := 0; i <= c.disks; i++ {
			fmt.Fprintf(&script, "losetup -d $L%d; rm m%d\n", i, i)
		}
	}
	out := string(mdvm.MustExec(t, mdvm.Run{Script: script.String(), Timeout: 900 * time.Second}))
	kernel := map[string]string{}
	for _, part := range strings.Split(out, "=== ")[1:] {
		name, body, _ := strings.Cut(part, "\n")
		if strings.Contains(body, "create-failed") {
			t.Errorf("%s: mdadm --create failed in the VM:\n%s", name, body)
		}
		kernel[name] = sizeLines(body)
	}

	bin := mdtoolBinary(t)
	dir := t.TempDir()
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "MDTOOL_START=") {
			env = append(env, e)
		}
	}
	env = append(env, "MDTOOL_RUN_DIR="+filepath.Join(dir, "run"), "MDTOOL_CONFIG=/dev/null")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		b, err := cmd.CombinedOutput()
		if err != nil && args[0] != "wait" {
			t.Errorf("mdtool %v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	for _, c := range cases {
		var devs []string
		for i := 0; i <= c.disks; i++ {
			devs = append(devs, sparse(t, dir, fmt.Sprintf("%s-%d", c.name(), i), c.size))
		}
		run(append([]string{"--create", "/dev/md/r10", "--run", "-l10", "-p" + c.layout, "-n" + fmt.Sprint(c.disks), "-x1", "--assume-clean",
			"--bitmap=internal", "--bitmap-chunk=64K"}, devs...)...)
		run("wait", "/dev/md/r10")
		got := run("detail", "/dev/md/r10")
		run("stop", "/dev/md/r10")
		got += run("examine", devs[0]) + run("examine-bitmap", devs[0])
		if g, k := sizeLines(got), kernel[c.name()]; g != k || k == "" {
			t.Errorf("%s: mdtool\n%s\nkernel\n%s", c.name(), g, k)
		}
		for _, d := range devs {
			os.Remove(d)
		}
	}
}
