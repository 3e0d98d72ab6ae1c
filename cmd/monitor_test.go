package cmd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// eventLog is a --program script that appends its arguments to a file.
type eventLog struct {
	t      *testing.T
	script string
	log    string
}

func newEventLog(t *testing.T, dir string) *eventLog {
	t.Helper()
	e := &eventLog{t: t, script: filepath.Join(dir, "event.sh"), log: filepath.Join(dir, "events.log")}
	body := fmt.Sprintf("#!/bin/sh\necho \"$*\" >> %s\n", e.log)
	if err := os.WriteFile(e.script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *eventLog) lines() []string {
	b, _ := os.ReadFile(e.log)
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// wait waits until the log has the line want.
func (e *eventLog) wait(want string) {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range e.lines() {
			if l == want {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("no event %q; events:\n%s", want, strings.Join(e.lines(), "\n"))
}

func (e *eventLog) reset() { os.Remove(e.log) }

// startMonitor runs "mdtool monitor" (the real binary) until the test ends.
func startMonitor(t *testing.T, runDir string, args ...string) *exec.Cmd {
	t.Helper()
	bin := mdtoolBinary(t)
	full := append([]string{"monitor", "--config", "/dev/null", "--run-dir", runDir}, args...)
	cmd := exec.Command(bin, full...)
	cmd.Env = append(os.Environ(), "MDTOOL_CONFIG=/dev/null")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		t.Logf("monitor output:\n%s", out.String())
	})
	return cmd
}

// TestMonitorEvents follows a raid1 through a failure and its stop, with a
// --program that logs the events, and runs the one-shot forms (--test,
// DegradedArray, --scan's NewArray, mail).
func TestMonitorEvents(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/mon", 2, 32<<20, "-l1", "-n2", "--assume-clean", "--bitmap=internal")
	s := serve(t, runDir, "/dev/md/mon", devs...)
	ev := newEventLog(t, dir)
	startMonitor(t, runDir, "--delay", "1", "--test", "--program", ev.script, "/dev/md/mon")
	// The first check of a healthy array raises nothing but the test
	// message.
	ev.wait("TestMessage /dev/md/mon")
	time.Sleep(1500 * time.Millisecond)
	if l := ev.lines(); len(l) != 1 {
		t.Errorf("events on a healthy array: %q", l)
	}
	// A spare that fails: FailSpare. Removing it raises nothing.
	spare := sparse(t, dir, "spare.img", 32<<20)
	if code, _, errs := mdtool(t, "/dev/md/mon", "--add", spare, "--run-dir", runDir); code != 0 {
		t.Fatalf("--add: %d %s", code, errs)
	}
	time.Sleep(1500 * time.Millisecond) // the monitor sees the spare
	if code, _, errs := mdtool(t, "/dev/md/mon", "--fail", spare, "--run-dir", runDir); code != 0 {
		t.Fatalf("--fail of the spare: %d %s", code, errs)
	}
	ev.wait("FailSpare /dev/md/mon " + spare)
	if code, _, errs := mdtool(t, "/dev/md/mon", "--remove", spare, "--run-dir", runDir); code != 0 {
		t.Fatalf("--remove of the spare: %d %s", code, errs)
	}
	if code, _, errs := mdtool(t, "/dev/md/mon", "--fail", devs[0], "--run-dir", runDir); code != 0 {
		t.Fatalf("--fail: %d %s", code, errs)
	}
	ev.wait("Fail /dev/md/mon " + devs[0])

	// One-shot: a degraded array is reported at the first look; --test
	// adds a TestMessage per array.
	mon := func(args ...string) (int, string, string) {
		return mdtool(t, append([]string{"monitor", "--config", "/dev/null", "--run-dir", runDir}, args...)...)
	}
	ev2 := newEventLog(t, t.TempDir())
	if code, out, errs := mon("--oneshot", "--test", "--program", ev2.script, "/dev/md/mon"); code != 0 {
		t.Errorf("oneshot: exit %d %s %s", code, out, errs)
	}
	if got, want := strings.Join(ev2.lines(), "\n"), "TestMessage /dev/md/mon\nDegradedArray /dev/md/mon"; got != want {
		t.Errorf("oneshot --test events:\n%s\nwant\n%s", got, want)
	}
	// --scan finds the running array: NewArray, then DegradedArray.
	ev2.reset()
	if code, _, errs := mon("--oneshot", "--scan", "--program", ev2.script); code != 0 {
		t.Errorf("oneshot --scan: exit %d %s", code, errs)
	}
	if got, want := strings.Join(ev2.lines(), "\n"), "NewArray /dev/md/mon\nDegradedArray /dev/md/mon"; got != want {
		t.Errorf("oneshot --scan events:\n%s\nwant\n%s", got, want)
	}
	// mdadm.conf: the ARRAY line's spares= and PROGRAM.
	conf := filepath.Join(dir, "mdadm.conf")
	if err := os.WriteFile(conf, []byte("PROGRAM "+ev2.script+"\nARRAY /dev/md/mon name=testhost:mon spares=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ev2.reset()
	if code, _, errs := mdtool(t, "monitor", "--config", conf, "--run-dir", runDir, "--oneshot", "--scan"); code != 0 || errs != "" {
		t.Errorf("oneshot --scan with mdadm.conf: exit %d %q", code, errs)
	}
	if got, want := strings.Join(ev2.lines(), "\n"), "DegradedArray /dev/md/mon\nSparesMissing /dev/md/mon"; got != want {
		t.Errorf("events with mdadm.conf:\n%s\nwant\n%s", got, want)
	}
	// Without a program or mail address the events are printed.
	code, out, _ := mon("--oneshot", "/dev/md/mon")
	if code != 0 || !strings.HasSuffix(out, ": DegradedArray on /dev/md/mon unknown device\n") {
		t.Errorf("oneshot without a program: exit %d %q", code, out)
	}
	if code, _, errs := mon("--oneshot", "--scan"); code != 1 || errs != "mdtool: No mail address or alert command - not monitoring.\n" {
		t.Errorf("--scan without mail or program: exit %d %q", code, errs)
	}
	if code, _, errs := mon("--oneshot"); code != 1 || errs != "mdtool: Cannot monitor: need --scan or at least one device\n" {
		t.Errorf("no arrays: exit %d %q", code, errs)
	}
	// Mail through the sendmail command (here: a file).
	mailFile := filepath.Join(dir, "mail.txt")
	if code, _, errs := mon("--oneshot", "--mail", "ops@example.org", "--sendmail", "cat > "+mailFile, "/dev/md/mon"); code != 0 {
		t.Errorf("mail: exit %d %s", code, errs)
	}
	mail, _ := os.ReadFile(mailFile)
	host, _ := os.Hostname()
	for _, want := range []string{
		"From: mdtool monitoring <root>\nTo: ops@example.org\nSubject: DegradedArray event on /dev/md/mon:" + host + "\n\n",
		"A DegradedArray event had been detected on md device /dev/md/mon.\n\nFaithfully yours, etc.\n",
		"mon : active raid1 ",
		" [2/1] [_U]\n",
	} {
		if !strings.Contains(string(mail), want) {
			t.Errorf("mail lacks %q:\n%s", want, mail)
		}
	}

	// Stopping the array: DeviceDisappeared.
	s.stop()
	ev.wait("DeviceDisappeared /dev/md/mon")
	want := []string{"TestMessage /dev/md/mon", "FailSpare /dev/md/mon " + spare, "Fail /dev/md/mon " + devs[0], "DeviceDisappeared /dev/md/mon"}
	if got := ev.lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestMonitorDaemonise: --daemonise --pid-file leaves a monitor running in
// the background that reports events; the pid file names it.
func TestMonitorDaemonise(t *testing.T) {
	bin := mdtoolBinary(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/dm", 2, 32<<20, "-l1", "-n2", "--assume-clean")
	s := serve(t, runDir, "/dev/md/dm", devs...)
	ev := newEventLog(t, dir)
	pidFile := filepath.Join(dir, "monitor.pid")
	cmd := exec.Command(bin, "--monitor", "--config", "/dev/null", "--run-dir", runDir, "--daemonise", "--pid-file", pidFile,
		"--delay", "1", "--test", "--program", ev.script, "/dev/md/dm")
	cmd.Env = append(os.Environ(), "MDTOOL_CONFIG=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil || len(out) != 0 {
		t.Fatalf("--daemonise: %v %q", err, out)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil || pid <= 0 {
		t.Fatalf("pid file %q", b)
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Kill() })
	ev.wait("TestMessage /dev/md/dm")
	if code, _, errs := mdtool(t, "/dev/md/dm", "--fail", devs[1], "--run-dir", runDir); code != 0 {
		t.Fatalf("--fail: %d %s", code, errs)
	}
	ev.wait("Fail /dev/md/dm " + devs[1])
	// Once no array is left, the monitor ends and removes its pid file.
	s.stop()
	ev.wait("DeviceDisappeared /dev/md/dm")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(pidFile); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pid file outlived the monitor")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
