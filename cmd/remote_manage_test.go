package cmd

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestRemoteMonitorReplace: a raid1 over two nbdkit exports in network
// namespaces, watched by `monitor`. Its idle array loses a server: monitor
// raises Fail naming the member's URI; the server comes back, --re-add,
// and monitor raises SpareActive for the URI. Then --replace swaps a
// remote member (named by URI) for a new one on a third server (named by
// URI): the new member is rebuilt, the old one ends faulty and is removed;
// monitor raises Fail for the old URI and SpareActive for the new one.
func TestRemoteMonitorReplace(t *testing.T) {
	const size = 32 << 20
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	md := "/dev/md/rmon"
	ms := remoteMembers(t, memDir(t), "rmon", 3, size)
	args := append([]string{"create", md, "--run", "--homehost=testhost", "--start=false", "--assume-clean",
		"-l1", "-n2", "--bitmap=internal", "--bitmap-chunk=1M"}, ms[0].uri(), ms[1].uri())
	if code, _, errs := mdtool(t, args...); code != 0 {
		t.Fatalf("create by URI: exit %d: %s", code, errs)
	}
	s := serve(t, runDir, md, "--remote-timeout="+remoteTimeout.String(), ms[0].uri(), ms[1].uri())
	data := nbdWrite(t, s.nbdURI(), 2<<20)
	ev := newEventLog(t, dir)
	startMonitor(t, runDir, "--delay", "1", "--test", "--program", ev.script, md)
	ev.wait("TestMessage " + md)

	// The host goes away while the array is idle: the client's probe
	// notices, the member fails, monitor names it by URI.
	ms[1].srv.Stop()
	waitFaulty(t, runDir, s.name, ms[1].uri())
	ev.wait("Fail " + md + " " + ms[1].uri())
	more := nbdWrite(t, s.nbdURI(), 1<<20) // written while degraded: the bitmap marks it
	data = append(more, data[len(more):]...)

	// The host comes back: --re-add by URI, monitor sees it active again.
	ms[1].srv.Restart(t)
	if code, errs := mdtoolManage(t, runDir, md, "--re-add", ms[1].uri()); code != 0 {
		t.Fatalf("--re-add %s: exit %d: %s", ms[1].uri(), code, errs)
	}
	waitHealthy(t, runDir, md)
	ev.wait("SpareActive " + md + " " + ms[1].uri())

	// --replace with URIs: the old member and the new one on other hosts.
	old, repl := ms[0].uri(), ms[2].uri()
	code, errs := mdtoolManage(t, runDir, md, "--add", repl, "--replace", old, "--with", repl)
	if want := "mdtool: added " + repl + "\nmdtool: Marked " + old + " (device 0 in " + md +
		") for replacement\nmdtool: Marked " + repl + " in " + md + " as replacement for device 0\n"; code != 0 || errs != want {
		t.Fatalf("--replace %s --with %s: exit %d %q, want %q", old, repl, code, errs, want)
	}
	waitHealthy(t, runDir, md)
	ev.wait("Fail " + md + " " + old)
	ev.wait("SpareActive " + md + " " + repl)
	_, out, _ := mdtool(t, "detail", "--run-dir", runDir, md)
	for _, want := range []string{"      active sync   " + repl + "\n", "      active sync   " + ms[1].uri() + "\n", "      faulty   " + old + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("detail after the replace lacks %q:\n%s", want, out)
		}
	}
	if code, errs := mdtoolManage(t, runDir, md, "--remove", "failed"); code != 0 || errs != "mdtool: hot removed "+old+" from "+md+"\n" {
		t.Errorf("--remove failed: exit %d %q", code, errs)
	}
	if got := nbdRead(t, s.nbdURI(), len(data)); !bytes.Equal(got, data) {
		t.Error("data differs after the re-add and the replace")
	}
	if code, _, errs := mdtool(t, "action", "check", md, "--run-dir", runDir); code != 0 {
		t.Fatalf("check: %d %s", code, errs)
	}
	if sy := waitHealthy(t, runDir, md); sy["last_action"] != "check" || sy["mismatch_cnt"].(float64) != 0 {
		t.Errorf("check after the replace: %v", sy)
	}
	t.Logf("monitor events:\n%s", strings.Join(ev.lines(), "\n"))
	s.stop()
	// The replacement holds role 0 in its own superblock.
	if ex := hostExamine(t, ms[2].img); examineField(ex, "Device Role") != "Active device 0" {
		t.Errorf("examine of the replacement:\n%s", ex)
	}
}
