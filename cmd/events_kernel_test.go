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

	"mdtool/internal/daemon"
	"mdtool/internal/mdvm"
)

// eventSeq is an mdadm command sequence; "WRITE" writes 512 KiB to the
// array, "EV" records every member's Events and Events Cleared.
type eventSeq struct {
	name  string
	disks int
	steps [][]string
}

// The first two avoid an initial resync (--assume-clean); the others are
// creates as provisioning scripts run them: an initial resync (md marks
// the dirty array clean before its sync thread starts, then records its
// progress every 1/16 of the range at its own request boundaries, then
// once at the end), a raid5 create (a recovery onto the last member), a
// degraded create and the recovery of the member added to it.
func eventSeqs() []eventSeq {
	return []eventSeq{
		{"raid1-resync", 2, [][]string{
			{"-CR", "MD", "-l1", "-n2", "D0", "D1"}, {"--wait", "MD"}, {"EV"}, {"-S", "MD"}, {"EV"},
		}},
		{"raid5-create", 3, [][]string{
			{"-CR", "MD", "-l5", "-n3", "D0", "D1", "D2"}, {"--wait", "MD"}, {"-S", "MD"}, {"EV"},
		}},
		{"raid6-resync", 4, [][]string{
			{"-CR", "MD", "-l6", "-n4", "D0", "D1", "D2", "D3"}, {"--wait", "MD"}, {"-S", "MD"}, {"EV"},
		}},
		{"raid10-resync", 4, [][]string{
			{"-CR", "MD", "-l10", "-n4", "D0", "D1", "D2", "D3"}, {"--wait", "MD"}, {"-S", "MD"}, {"EV"},
		}},
		{"raid1-degraded", 2, [][]string{
			{"-CR", "MD", "-l1", "-n2", "D0", "missing"}, {"EV"}, {"-S", "MD"}, {"EV"},
			{"-A", "--run", "MD", "D0"}, {"MD", "--add", "D1"}, {"--wait", "MD"}, {"-S", "MD"}, {"EV"},
		}},
		{"raid1-bitmap", 3, [][]string{
			{"-CR", "MD", "-l1", "-n2", "-x1", "--assume-clean", "--bitmap=internal", "--bitmap-chunk=64K", "D0", "D1", "D2"},
			{"EV"},
			{"WRITE"}, {"-S", "MD"}, {"EV"},
			{"-A", "MD", "D0", "D1", "D2"}, {"-S", "MD"}, {"EV"},
			{"-A", "MD", "D0", "D1", "D2"}, {"MD", "--fail", "D1"}, {"--wait", "MD"}, {"MD", "--remove", "D1"}, {"-S", "MD"}, {"EV"},
			{"-A", "MD", "D0", "D2"}, {"WRITE"}, {"MD", "--add", "D1"}, {"--wait", "MD"}, {"-S", "MD"}, {"EV"},
		}},
		// a check and a repair of a clean array (issue 16 item 4): md
		// records the progress of both as of a resync (clean superblock
		// updates, bumped and rolled back in turn), then two forced
		// updates at the end.
		{"raid1-check", 2, [][]string{
			{"-CR", "MD", "-l1", "-n2", "--assume-clean", "D0", "D1"}, {"EV"},
			{"--action=check", "MD"}, {"--wait", "MD"}, {"EV"},
			{"--action=repair", "MD"}, {"--wait", "MD"}, {"-S", "MD"}, {"EV"},
		}},
		{"raid5-check", 3, [][]string{
			{"-CR", "MD", "-l5", "-n3", "--assume-clean", "D0", "D1", "D2"}, {"EV"},
			{"--action=check", "MD"}, {"--wait", "MD"}, {"EV"},
			{"--action=repair", "MD"}, {"--wait", "MD"}, {"-S", "MD"}, {"EV"},
		}},
		{"raid5", 4, [][]string{
			{"-CR", "MD", "-l5", "-n3", "-c64", "--assume-clean", "D0", "D1", "D2"},
			{"WRITE"}, {"-S", "MD"}, {"EV"},
			{"-A", "MD", "D0", "D1", "D2"}, {"WRITE"}, {"MD", "--add", "D3"}, {"MD", "--fail", "D0"}, {"--wait", "MD"},
			{"MD", "--remove", "D0"}, {"-S", "MD"}, {"EV"},
		}},
	}
}

var (
	reEvents        = regexp.MustCompile(`(?m)^ *Events : (\S+)`)
	reEventsCleared = regexp.MustCompile(`(?m)^ *Events Cleared : (\S+)`)
)

func eventsOf(examine, bitmap string) string {
	ev, ec := "-", "-"
	if m := reEvents.FindStringSubmatch(examine); m != nil {
		ev = m[1]
	}
	if m := reEventsCleared.FindStringSubmatch(bitmap); m != nil {
		ec = m[1]
	}
	return ev + "/" + ec
}

// TestKernelEventCounts: the same command sequences (create, write,
// stop, assemble, fail, recovery onto a spare, remove, add, recovery,
// stop) run by mdadm 4.2 + Linux 6.1 in the VM and by mdtool on the
// host leave the same Events (superblock) and Events Cleared (bitmap) on
// every member at every stop point.
func TestKernelEventCounts(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	seqs := eventSeqs()
	var script strings.Builder
	script.WriteString("cd /tmp\n")
	for _, sq := range seqs {
		var devs []string
		for i := 0; i < sq.disks; i++ {
			fmt.Fprintf(&script, "truncate -s 20M %s%d; L%d=$(losetup -f); losetup $L%d %s%d\n", sq.name, i, i, i, sq.name, i)
			devs = append(devs, fmt.Sprintf("$L%d", i))
		}
		for i, st := range sq.steps {
			switch st[0] {
			case "WRITE":
				script.WriteString("dd if=/dev/urandom of=/dev/md0 bs=64k count=8 oflag=direct 2>/dev/null; sleep 1\n")
			case "EV":
				fmt.Fprintf(&script, "echo '=== %s %d'\n", sq.name, i)
				for _, d := range devs {
					fmt.Fprintf(&script, "echo \"$(mdadm -E %s 2>/dev/null | grep ' Events :')\"; echo \"$(mdadm -X %s 2>/dev/null | grep 'Events Cleared :')\"; echo '---'\n", d, d)
				}
			default:
				args := strings.Join(st, " ")
				args = strings.ReplaceAll(args, "MD", "/dev/md0")
				for j := len(devs) - 1; j >= 0; j-- {
					args = strings.ReplaceAll(args, fmt.Sprintf("D%d", j), devs[j])
				}
				fmt.Fprintf(&script, "mdadm %s >/dev/null 2>&1; sleep 1\n", args)
			}
		}
		for i := range devs {
			fmt.Fprintf(&script, "losetup -d $L%d; rm %s%d\n", i, sq.name, i)
		}
	}
	out := string(mdvm.MustExec(t, mdvm.Run{Script: script.String(), Timeout: 900 * time.Second}))
	kernel := map[string]string{}
	for _, part := range strings.Split(out, "=== ")[1:] {
		key, body, _ := strings.Cut(part, "\n")
		var evs []string
		segs := strings.Split(body, "---\n")
		for _, m := range segs[:len(segs)-1] { // one per member; the last is what follows
			evs = append(evs, eventsOf(m, m))
		}
		kernel[key] = strings.Join(evs, " ")
	}

	bin := mdtoolBinary(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "MDTOOL_START=") {
			env = append(env, e)
		}
	}
	env = append(env, "MDTOOL_RUN_DIR="+runDir, "MDTOOL_CONFIG=/dev/null")
	run := func(args ...string) string {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		b, _ := cmd.CombinedOutput()
		return string(b)
	}
	for _, sq := range seqs {
		var devs []string
		for i := 0; i < sq.disks; i++ {
			devs = append(devs, sparse(t, dir, fmt.Sprintf("%s-%d", sq.name, i), 20<<20))
		}
		md := "/dev/md/" + sq.name
		for i, st := range sq.steps {
			switch st[0] {
			case "WRITE":
				sock := daemon.PathsFor(runDir, sq.name).NBD()
				cmd := exec.Command("sh", "-c", "head -c 524288 /dev/urandom | nbdcopy - 'nbd+unix:///?socket="+sock+"'")
				if b, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("%s step %d: write: %v %s", sq.name, i, err, b)
				}
				time.Sleep(time.Second)
			case "EV":
				var evs []string
				for _, d := range devs {
					evs = append(evs, eventsOf(run("-E", d), run("-X", d)))
				}
				key := fmt.Sprintf("%s %d", sq.name, i)
				if got, want := strings.Join(evs, " "), kernel[key]; got != want {
					t.Errorf("%s: Events/Events Cleared per member: mdtool %s, kernel %s", key, got, want)
				}
			default:
				args := make([]string, len(st))
				for j, a := range st {
					switch {
					case a == "MD":
						a = md
					case len(a) == 2 && a[0] == 'D':
						a = devs[a[1]-'0']
					}
					args[j] = a
				}
				run(args...)
				time.Sleep(time.Second)
			}
		}
		run("-S", md)
	}
}
