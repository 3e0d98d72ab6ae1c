package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// detailJSONOf runs detail --json and returns the array's document.
func detailJSONOf(t *testing.T, runDir, md string) map[string]any {
	t.Helper()
	code, out, errs := mdtool(t, "detail", "--json", "--run-dir", runDir, md)
	if code != 0 {
		t.Fatalf("detail --json: exit %d %s", code, errs)
	}
	var doc struct {
		Arrays []map[string]any `json:"arrays"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Arrays) != 1 {
		t.Fatalf("detail --json: %v\n%s", err, out)
	}
	return doc.Arrays[0]
}

func syncOf(t *testing.T, runDir, md string) map[string]any {
	t.Helper()
	s, _ := detailJSONOf(t, runDir, md)["sync"].(map[string]any)
	return s
}

// syncDone waits until no sync action runs and the last one was want: the
// engine starts an action from its own thread, so right after --add or
// --action a "wait" may find nothing running yet (as with the kernel).
func syncDone(t *testing.T, runDir, md, want string) map[string]any {
	t.Helper()
	mdtool(t, "wait", md, "--run-dir", runDir)
	deadline := time.Now().Add(time.Minute)
	for {
		sy := syncOf(t, runDir, md)
		if sy["action"] == "idle" && sy["last_action"] == want {
			return sy
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %s finished: %v", md, want, sy)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitHealthy waits until the array is neither degraded nor syncing.
func waitHealthy(t *testing.T, runDir, md string) map[string]any {
	t.Helper()
	mdtool(t, "wait", md, "--run-dir", runDir)
	deadline := time.Now().Add(time.Minute)
	for {
		d := detailJSONOf(t, runDir, md)
		state := fmt.Sprint(d["state"])
		sy, _ := d["sync"].(map[string]any)
		if sy["action"] == "idle" && !strings.Contains(state, "degraded") && !strings.Contains(state, "recovering") {
			return sy
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %s: %v", md, state, sy)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// detailWhen polls detail until its text contains marker.
func detailWhen(t *testing.T, runDir, md, marker string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, out, _ := mdtool(t, "detail", "--run-dir", runDir, md)
		if strings.Contains(out, marker) || time.Now().After(deadline) {
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestManageRebuild fails and removes a raid5 member, adds a fresh spare
// and watches the rebuild (detail, wait, monitor events), re-adds a member
// with the bitmap, replaces a member in use and runs a check, then lets
// mdadm examine the result.
func TestManageRebuild(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	md := "/dev/md/rb"
	devs := mkArray(t, dir, md, 4, 32<<20, "-l5", "-n4", "-c64", "--assume-clean", "--bitmap=internal", "--bitmap-chunk=1M")
	s := serve(t, runDir, md, append([]string{"--sync-speed-min", "2000"}, devs...)...)
	if sy := syncOf(t, runDir, md); sy["speed_min_kib_per_second"] != float64(2000) || sy["speed_max_kib_per_second"] != float64(200000) {
		t.Errorf("sync limits after assemble --sync-speed-min 2000: %v", sy)
	}
	data := nbdWrite(t, s.nbdURI(), 8<<20)
	ev := newEventLog(t, dir)
	startMonitor(t, runDir, "--delay", "1", "--increment", "50", "--test", "--program", ev.script, md)
	ev.wait("TestMessage " + md) // the monitor has had its first look
	m := func(args ...string) (int, string) {
		t.Helper()
		code, _, errs := mdtool(t, append(append([]string{md}, args...), "--run-dir", runDir)...)
		return code, errs
	}
	if code, errs := m("--fail", devs[1], "--remove", devs[1]); code != 0 ||
		errs != "mdtool: set "+devs[1]+" faulty in "+md+"\nmdtool: hot removed "+devs[1]+" from "+md+"\n" {
		t.Fatalf("fail+remove: exit %d %q", code, errs)
	}
	ev.wait("Fail " + md + " " + devs[1])
	// A slow rebuild onto a fresh spare, so that it can be watched.
	if code, _, errs := mdtool(t, "action", "--sync-speed-max", "4000", "--run-dir", runDir, md); code != 0 {
		t.Fatalf("action --sync-speed-max: %d %s", code, errs)
	}
	spare := sparse(t, dir, "spare.img", 32<<20)
	if code, errs := m("--add", spare); code != 0 || errs != "mdtool: added "+spare+"\n" {
		t.Fatalf("--add: exit %d %q", code, errs)
	}
	out := detailWhen(t, runDir, md, "recovering \n")
	for _, want := range []string{
		"             State : clean, degraded, recovering \n",
		"    Rebuild Status : ",
		"          Progress : [",
		"  recovery = ",
		// Number 4: mdadm's first free descriptor from raid_disks on, as
		// the kernel showed /dev/vde added to a 4-disk raid5 in the VM.
		"       4       0        0        1      spare rebuilding   " + spare + "\n",
		"     Total Devices : 4\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("detail during the rebuild lacks %q:\n%s", want, out)
		}
	}
	sy := syncOf(t, runDir, md)
	if sy["action"] != "recover" || sy["status"] != "Rebuild" || sy["total_sectors"].(float64) == 0 ||
		sy["speed_max_kib_per_second"] != float64(4000) {
		t.Errorf("json sync during the rebuild: %v", sy)
	}
	// A check cannot start while the recovery runs.
	if code, _, errs := mdtool(t, "--action=check", md, "--run-dir", runDir); code != 1 ||
		errs != "mdtool: Count not set action for "+md+" to check: Device or resource busy\n" {
		t.Errorf("check during the rebuild: exit %d %q", code, errs)
	}
	ev.wait("RebuildStarted " + md) // the monitor saw it before it speeds up
	// wait draws its progress line while the rebuild runs, and returns 0
	// once it is over.
	progress := &lockedBuffer{}
	env, _, _ := daemonEnv()
	env.Stderr = progress
	waited := make(chan int, 1)
	go func() {
		waited <- Main([]string{"--wait", md, "--run-dir", runDir, "--progress", "--poll", "100ms"}, env)
	}()
	for i := 0; i < 100 && !strings.Contains(progress.String(), "recovery ="); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if code, _, errs := mdtool(t, "action", "--sync-speed-max", "0", "--run-dir", runDir, md); code != 0 {
		t.Fatalf("action --sync-speed-max 0: %d %s", code, errs)
	}
	if code := <-waited; code != 0 {
		t.Errorf("wait during the rebuild: exit %d", code)
	}
	waitHealthy(t, runDir, md)
	if !strings.Contains(progress.String(), md+": [") || !strings.HasSuffix(progress.String(), "\n") {
		t.Errorf("wait --progress printed %q", progress.String())
	}
	if code, _, _ := mdtool(t, "wait", md, "--run-dir", runDir); code != 1 {
		t.Errorf("wait after the rebuild: exit %d, want 1", code)
	}
	_, out, _ = mdtool(t, "detail", "--run-dir", runDir, md)
	if !strings.Contains(out, "             State : clean \n") || !strings.Contains(out, "      active sync   "+spare+"\n") ||
		strings.Contains(out, "Status :") {
		t.Errorf("detail after the rebuild:\n%s", out)
	}
	ev.wait("RebuildFinished " + md)
	ev.wait("SpareActive " + md + " " + spare)
	if got := nbdRead(t, s.nbdURI(), len(data)); !bytes.Equal(got, data) {
		t.Error("data differs after the rebuild")
	}

	// Re-add with the bitmap: only the chunks written meanwhile are
	// rebuilt.
	if code, errs := m("--fail", devs[2], "--remove", devs[2]); code != 0 {
		t.Fatalf("fail+remove %s: %d %s", devs[2], code, errs)
	}
	data = nbdWrite(t, s.nbdURI(), 256<<10)
	if code, errs := m("--re-add", devs[2]); code != 0 || errs != "mdtool: re-added "+devs[2]+"\n" {
		t.Fatalf("--re-add: exit %d %q", code, errs)
	}
	sy = waitHealthy(t, runDir, md)
	written := sy["written_sectors"].(float64)
	if sy["last_action"] != "recover" || written == 0 || written > 4*2048 {
		t.Errorf("re-add rebuilt %v sectors (want the dirty 1 MiB bitmap chunks only): %v", written, sy)
	}
	// The same device again: it is in use.
	if code, errs := m("--add", devs[2]); code != 1 || errs != "mdtool: Cannot open "+devs[2]+": Device or resource busy\n" {
		t.Errorf("--add of a member: exit %d %q", code, errs)
	}

	// A check finds nothing to correct.
	if code, _, errs := mdtool(t, "--action=check", md, "--run-dir", runDir); code != 0 || errs != "" {
		t.Errorf("--action=check: exit %d %q", code, errs)
	}
	if sy = syncDone(t, runDir, md, "check"); sy["mismatch_cnt"] != float64(0) {
		t.Errorf("after the check: %v", sy)
	}
	if got := nbdRead(t, s.nbdURI(), len(data)); !bytes.Equal(got, data) {
		t.Error("data differs after the re-add and the check")
	}
	// "failed" stands for every faulty member.
	if code, errs := m("--fail", devs[3], "--remove", "failed"); code != 0 ||
		errs != "mdtool: set "+devs[3]+" faulty in "+md+"\nmdtool: hot removed "+devs[3]+" from "+md+"\n" {
		t.Errorf("--remove failed: exit %d %q", code, errs)
	}
	s.stop()
	// mdadm sees what the kernel would record: the spare active in role 1,
	// role 3 gone.
	e, _ := exec.Command("mdadm", "--examine", spare).CombinedOutput()
	if !strings.Contains(string(e), "   Array State : AAA. ") || !strings.Contains(string(e), "   Device Role : Active device 1\n") {
		t.Errorf("mdadm --examine %s:\n%s", spare, e)
	}
}

// TestCheckRepair scrubs a raid5 whose member was overwritten behind the
// engine's back: check counts the mismatches (and the monitor reports them
// as mdadm does), repair rewrites parity, the next check finds nothing.
func TestCheckRepair(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	md := "/dev/md/ck"
	devs := mkArray(t, dir, md, 4, 32<<20, "-l5", "-n4", "-c64", "--assume-clean")
	// 1 MiB of garbage in member 2's data area (data offset 1 MiB here).
	garbage := bytes.Repeat([]byte{0xa5, 0x5a, 0x3c, 0xc3}, 1<<18)
	writeAt(t, devs[2], garbage, 3<<20)
	s := serve(t, runDir, md, append([]string{"--sync-speed-max", "3000", "--metrics", "127.0.0.1:0"}, devs...)...)
	ev := newEventLog(t, dir)
	startMonitor(t, runDir, "--delay", "1", "--test", "--program", ev.script, md)
	ev.wait("TestMessage " + md)
	if code, _, errs := mdtool(t, "--action=check", md, "--run-dir", runDir); code != 0 || errs != "" {
		t.Fatalf("--action=check: exit %d %q", code, errs)
	}
	ev.wait("RebuildStarted " + md)
	if code, _, errs := mdtool(t, "action", "--sync-speed-max", "0", "--run-dir", runDir, md); code != 0 {
		t.Fatalf("action --sync-speed-max 0: %d %s", code, errs)
	}
	if code, _, _ := mdtool(t, "wait", md, "--run-dir", runDir); code != 0 {
		t.Errorf("wait for the check: exit %d", code)
	}
	sy := syncOf(t, runDir, md)
	if sy["last_action"] != "check" || sy["mismatch_cnt"] != float64(2048) || sy["action"] != "idle" {
		t.Errorf("after the check: %v", sy)
	}
	ev.wait("RebuildFinished " + md + "  mismatches found: 2048 (on raid level 5)")
	// The metrics say the same (they are updated once a second).
	st, err := queryStatus(runDir, s.name)
	if err != nil {
		t.Fatal(err)
	}
	// Wait for both: the mismatches are counted while the check runs, so
	// an update during the check already shows them.
	want, idle := `mdtool_sync_mismatch_sectors{array="ck"} 2048`, `mdtool_sync_action{action="idle",array="ck"} 1`
	var text string
	for i := 0; i < 300 && !(strings.Contains(text, want) && strings.Contains(text, idle)); i++ {
		time.Sleep(100 * time.Millisecond)
		resp, err := http.Get("http://" + st.Metrics + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		text = string(b)
	}
	if !strings.Contains(text, want) || !strings.Contains(text, idle) {
		t.Errorf("metrics lack %s:\n%s", want, text)
	}
	if code, _, errs := mdtool(t, "--action=repair", md, "--run-dir", runDir); code != 0 || errs != "" {
		t.Fatalf("--action=repair: exit %d %q", code, errs)
	}
	syncDone(t, runDir, md, "repair")
	if code, _, errs := mdtool(t, "--action", "check", md, "--run-dir", runDir); code != 0 || errs != "" {
		t.Fatalf("--action check: exit %d %q", code, errs)
	}
	if sy = syncDone(t, runDir, md, "check"); sy["mismatch_cnt"] != float64(0) {
		t.Errorf("check after the repair: %v", sy)
	}
	// Bad actions, as mdadm words them.
	if code, _, errs := mdtool(t, "--action=bogus", md, "--run-dir", runDir); code != 2 ||
		errs != "mdtool: action must be one of idle, frozen, check, repair\n" {
		t.Errorf("--action=bogus: exit %d %q", code, errs)
	}
	// raid0 has no sync actions: md answers EINVAL.
	r0 := mkArray(t, dir, "/dev/md/r0", 2, 16<<20, "-l0", "-n2")
	s0 := serve(t, runDir, "/dev/md/r0", r0...)
	if code, _, errs := mdtool(t, "--action=check", "/dev/md/r0", "--run-dir", runDir); code != 1 ||
		errs != "mdtool: Count not set action for /dev/md/r0 to check: Invalid argument\n" {
		t.Errorf("--action=check on raid0: exit %d %q", code, errs)
	}
	s0.stop()
	if code, _, errs := mdtool(t, "--action=check", "/dev/md/none", "--run-dir", runDir); code != 1 ||
		errs != "mdtool: Couldn't open /dev/md/none: No such file or directory\n" {
		t.Errorf("--action on no array: exit %d %q", code, errs)
	}
	s.stop()
}
