package cmd

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
)

// oldContentsCase is one create over members D0..D2 of 20 MiB; before it,
// prep runs ("raid0": an old 3-device raid0 made with -CR; "mbr": an MBR
// on D1; "" nothing).
type oldContentsCase struct {
	name  string
	prep  string
	args  []string // after the md device; D0.. for the members
	stdin string
}

func oldContentsCases() []oldContentsCase {
	d3 := []string{"D0", "D1", "D2"}
	return []oldContentsCase{
		{"run", "raid0", append([]string{"-R", "-l0", "-n3"}, d3...), ""},
		{"run-quiet", "raid0", append([]string{"-R", "-q", "-l0", "-n3"}, d3...), ""},
		{"run-verbose", "raid0", append([]string{"-R", "-v", "-l0", "-n3"}, d3...), ""},
		{"no-input", "raid0", append([]string{"-l1", "-n3"}, d3...), ""},
		{"answer-n", "raid0", append([]string{"-l1", "-n3"}, d3...), "n"},
		{"answer-junk", "raid0", append([]string{"-l0", "-n3"}, d3...), "a\nb\nc\nd\ne\nf"},
		{"answer-Yes", "raid0", append([]string{"-l0", "-n3"}, d3...), "Yes"},
		{"mbr-1.2", "mbr", []string{"-l1", "-n2", "D0", "D1"}, ""},
		{"mbr-1.0", "mbr", []string{"-e1.0", "-l1", "-n2", "D0", "D1"}, ""},
	}
}

var (
	reCtime   = regexp.MustCompile(`ctime=.*`)
	reStarted = regexp.MustCompile(`(?m)^mdadm: array \S+ (started|created)\.\n`)
	// --verbose's defaulting notes are create's text (another change),
	// not this comparison's.
	reDefaults = regexp.MustCompile(`(?m)^mdadm: \S+ (size|layout) defaults to .*\n`)
)

func normOld(s string, names map[string]string) string {
	var reals []string
	for real := range names {
		reals = append(reals, real)
	}
	sort.Slice(reals, func(i, j int) bool { return len(reals[i]) > len(reals[j]) })
	for _, real := range reals {
		s = strings.ReplaceAll(s, real, names[real])
	}
	s = strings.ReplaceAll(s, "mdtool: ", "mdadm: ")
	s = reCtime.ReplaceAllString(s, "ctime=CTIME")
	s = reDefaults.ReplaceAllString(s, "")
	return reStarted.ReplaceAllString(s, "")
}

// TestKernelCreateOverOldContents: create over members holding an old
// array or a partition table, run by mdadm 4.2 in the VM (loop devices)
// and by mdtool on the host (image files): the same warnings, question
// and exit status (device names, ctime and the "started."/"created."
// line normalised).
func TestKernelCreateOverOldContents(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	cases := oldContentsCases()
	var script strings.Builder
	script.WriteString(`cd /tmp
truncate -s 20M o0 o1 o2; L0=$(losetup -f); losetup $L0 o0; L1=$(losetup -f); losetup $L1 o1; L2=$(losetup -f); losetup $L2 o2
echo "map $L0 D0"; echo "map $L1 D1"; echo "map $L2 D2"
`)
	for _, c := range cases {
		script.WriteString("mdadm -S /dev/md0 >/dev/null 2>&1; mdadm --zero-superblock $L0 $L1 $L2 >/dev/null 2>&1\n")
		script.WriteString("dd if=/dev/zero of=$L0 bs=1M count=1 2>/dev/null; dd if=/dev/zero of=$L1 bs=1M count=1 2>/dev/null\n")
		switch c.prep {
		case "raid0":
			script.WriteString("mdadm -CR /dev/md0 -l0 -n3 $L0 $L1 $L2 >/dev/null 2>&1; mdadm -S /dev/md0 >/dev/null 2>&1\n")
		case "mbr":
			script.WriteString(`printf '\000\000\000\000\203\000\000\000\000\010\000\000\000\020\000\000' | dd of=$L1 bs=1 seek=446 conv=notrunc 2>/dev/null; printf '\125\252' | dd of=$L1 bs=1 seek=510 conv=notrunc 2>/dev/null` + "\n")
		}
		args := strings.NewReplacer("D0", "$L0", "D1", "$L1", "D2", "$L2").Replace(strings.Join(c.args, " "))
		fmt.Fprintf(&script, "echo '=== %s'\nprintf '%s' | mdadm -C /dev/md0 %s 2>&1; echo \"rc=$?\"\n", c.name, strings.ReplaceAll(c.stdin, "\n", `\n`), args)
	}
	script.WriteString("mdadm -S /dev/md0 >/dev/null 2>&1\necho '=== end'\n")
	out := string(mdvm.MustExec(t, mdvm.Run{Script: script.String(), Timeout: 600 * time.Second}))
	names := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "map" {
			names[f[1]] = f[2]
		}
	}
	kernel := map[string]string{}
	for _, part := range strings.Split(out, "=== ")[1:] {
		name, body, _ := strings.Cut(part, "\n")
		kernel[name] = normOld(body, names)
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			devs := []string{sparse(t, dir, "a", 20<<20), sparse(t, dir, "b", 20<<20), sparse(t, dir, "c", 20<<20)}
			host := map[string]string{devs[0]: "D0", devs[1]: "D1", devs[2]: "D2"}
			switch c.prep {
			case "raid0":
				env, _, errb := testEnv("")
				if rc := Main(append([]string{"--create", "/dev/md9", "-R", "-l0", "-n3"}, devs...), env); rc != 0 {
					t.Fatalf("setup: %d %s", rc, errb)
				}
			case "mbr":
				writeMBR(t, devs[1])
			}
			args := []string{"--create", "/dev/md0"}
			for _, a := range c.args {
				if len(a) == 2 && a[0] == 'D' {
					a = devs[a[1]-'0']
				}
				args = append(args, a)
			}
			stdin := c.stdin
			if stdin != "" {
				stdin += "\n"
			}
			env, _, errb := testEnv(stdin)
			rc := Main(args, env)
			got := normOld(fmt.Sprintf("%src=%d\n", errb.String(), rc), host)
			if want := kernel[c.name]; got != want {
				t.Errorf("mdtool:\n%s\nmdadm 4.2 in the VM:\n%s", got, want)
			}
		})
	}
}
