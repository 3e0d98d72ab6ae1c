package cmd

// Names are data, never syntax: array names read from superblocks reach
// every output escaped (plan.EscapeName, escName), never as a newline that
// starts a configuration line, a mail header or a log line; create refuses
// them.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"mdtool/internal/daemon"
	"mdtool/superblock"
)

// setRawName writes name's bytes (NUL padded, at most 32) into the v1.2
// superblock of each member and recomputes the checksum: a superblock as
// a foreign tool or an attacker could have written it.
func setRawName(t *testing.T, name string, devs ...string) {
	t.Helper()
	for _, d := range devs {
		f, err := os.OpenFile(d, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, superblock.AreaSize)
		if _, err := f.ReadAt(buf, 4096); err != nil {
			t.Fatal(err)
		}
		sb, err := superblock.Parse(buf)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		sb.SetName = [32]byte{}
		copy(sb.SetName[:], name)
		if _, err := f.WriteAt(sb.MarshalWithChecksum(), 4096); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

// controlBytes lists the control bytes of s other than '\n' (any byte
// below 0x20, and 0x7f).
func controlBytes(s string) []byte {
	var bad []byte
	for i := 0; i < len(s); i++ {
		if (s[i] < 0x20 && s[i] != '\n') || s[i] == 0x7f {
			bad = append(bad, s[i])
		}
	}
	return bad
}

// checkText fails when out holds a control byte, or a line that starts
// with a keyword or header a name could smuggle in.
func checkText(t *testing.T, what, out string) {
	t.Helper()
	if bad := controlBytes(out); len(bad) > 0 {
		t.Errorf("%s holds control bytes %q:\n%s", what, bad, out)
	}
	for _, l := range strings.Split(out, "\n") {
		for _, kw := range []string{"PROGRAM", "MAILADDR", "DEVICE", "Bcc:", "Cc:"} {
			if strings.HasPrefix(l, kw) {
				t.Errorf("%s has a line starting with %s: %q", what, kw, l)
			}
		}
	}
}

// parseConfText parses text as mdadm.conf with cmd's reader.
func parseConfText(t *testing.T, dir, text string) *MdadmConf {
	t.Helper()
	p := filepath.Join(dir, fmt.Sprintf("parse-%d.conf", len(text)))
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	conf, err := LoadMdadmConf(p)
	if err != nil {
		t.Fatal(err)
	}
	return conf
}

// evalShell evals --export text in sh (in dir) and returns the value of
// variable v.
func evalShell(t *testing.T, dir, text, v string) string {
	t.Helper()
	c := exec.Command("/bin/sh", "-c", `eval "$1"; printf %s "$`+v+`"`, "sh", text)
	c.Dir = dir
	out, err := c.Output()
	if err != nil {
		t.Errorf("sh eval of %q: %v", text, err)
	}
	return string(out)
}

// jsonHasString reports whether the decoded JSON value holds s as a
// string value somewhere.
func jsonHasString(v any, s string) bool {
	switch x := v.(type) {
	case string:
		return x == s
	case []any:
		for _, e := range x {
			if jsonHasString(e, s) {
				return true
			}
		}
	case map[string]any:
		for _, e := range x {
			if jsonHasString(e, s) {
				return true
			}
		}
	}
	return false
}

// TestCreateRefusesUnsafeNames: names with control characters, white
// space, quotes or '#' (from --name, from the md device, or as the
// homehost) are refused with one line and exit 2, and nothing is written.
func TestCreateRefusesUnsafeNames(t *testing.T) {
	dir := t.TempDir()
	a := sparse(t, dir, "a.img", 32<<20)
	b := sparse(t, dir, "b.img", 32<<20)
	before := hashAll(t, []string{a, b})
	for _, tc := range []struct{ md, name, homehost string }{
		{"/dev/md/ok", "x\nPROGRAM /tmp/e", ""},
		{"/dev/md/ok", "a\tb", ""},
		{"/dev/md/ok", "a\x00b", ""},
		{"/dev/md/ok", "\x1b[31mred", ""},
		{"/dev/md/ok", "a b", ""},
		{"/dev/md/ok", "a#b", ""},
		{"/dev/md/ok", `a"b`, ""},
		{"/dev/md/ok", "a'b", ""},
		{"/dev/md/x\nPROGRAM", "", ""},
		{"/dev/md/a b", "", ""},
		{"/dev/md/\x1b[2J", "", ""},
		{"/dev/md/ok", "", "h\r\nBcc: e@x"},
		{"/dev/md/x\nPROGRAM", "ok", ""},
	} {
		args := []string{"create", tc.md, "--run", "-l1", "-n2", "--assume-clean"}
		if tc.name != "" {
			args = append(args, "--name="+tc.name)
		}
		hh := "testhost"
		if tc.homehost != "" {
			hh = tc.homehost
		}
		args = append(args, "--homehost="+hh, a, b)
		code, out, errs := mdtool(t, args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "invalid ") {
			t.Errorf("create %q --name=%q --homehost=%q: exit %d, stdout %q, stderr %q; want exit 2 and one line",
				tc.md, tc.name, tc.homehost, code, out, errs)
		}
		if bad := controlBytes(errs); len(bad) > 0 {
			t.Errorf("the refusal shows control bytes %q: %q", bad, errs)
		}
	}
	after := hashAll(t, []string{a, b})
	for p, h := range before {
		if after[p] != h {
			t.Errorf("%s was written", p)
		}
	}
	// The control case: a plain name is accepted.
	if code, _, errs := mdtool(t, "create", "/dev/md/ok", "--run", "-l1", "-n2", "--assume-clean", "--name=ok-1_a.b=c:d", "--homehost=testhost", a, b); code != 0 {
		t.Errorf("create with a plain name: exit %d %s", code, errs)
	}
}

// TestNamesAreData crafts superblocks whose names hold newlines, tabs,
// NULs, escape sequences, spaces, '#', quotes and shell syntax, and checks
// every output: examine (text, --export, --json, --scan), the mdadm.conf
// made from -Es (read back by cmd's reader and used by assemble --scan
// and monitor), run-directory names, detail (text, --export, --json,
// --scan), and monitor's --program arguments and mail.
func TestNamesAreData(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	// A program that a smuggled PROGRAM line would run: it creates a
	// marker. Its path must be short (set_name has 32 bytes).
	evilDir, err := os.MkdirTemp("/tmp", "e")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(evilDir) })
	marker := filepath.Join(evilDir, "ran")
	evil := filepath.Join(evilDir, "e")
	if err := os.WriteFile(evil, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		md   string
		name string // raw set_name bytes
		dev  string // the md device -Es names (and -As uses)
	}{
		{"/dev/md/n1", "x\nPROGRAM " + evil, "/dev/md/x_PROGRAM_" + strings.ReplaceAll(evil, "/", "-")},
		{"/dev/md/n2", "testhost:a\tb\x1b[31m\r\x7f", "/dev/md/a_b_[31m__"},
		{"/dev/md/n3", `h:q"s p#c='$(touch pwned)`, "/dev/md/q_s_p#c=_$(touch_pwned)"},
		{"/dev/md/n4", "n\x00ul\nPROGRAM x", "/dev/md/n"},
		{"/dev/md/n5", "bad\xff\u202e\\x", "/dev/md/bad___x"},
	}
	var allDevs []string
	uuids := map[string]string{} // dev -> UUID= text
	var esAll strings.Builder
	for _, c := range cases {
		devs := mkArray(t, dir, c.md, 2, 32<<20, "-l1", "-n2", "--assume-clean")
		setRawName(t, c.name, devs...)
		allDevs = append(allDevs, devs...)
		shown := c.name
		if i := strings.IndexByte(shown, 0); i >= 0 {
			shown = shown[:i]
		}
		esc := escName(shown)

		// examine: the Name line holds the escaped name.
		code, out, errs := mdtool(t, "examine", "--config=none", "--homehost=testhost", devs[0])
		if code != 0 {
			t.Fatalf("examine %q: exit %d %s", c.name, code, errs)
		}
		checkText(t, "examine", out)
		wantLine := "           Name : " + esc
		if strings.HasPrefix(shown, "testhost:") {
			wantLine += "  (local to host testhost)"
		}
		if !strings.Contains(out, "\n"+wantLine+"\n") {
			t.Errorf("examine of %q lacks %q:\n%s", c.name, wantLine, out)
		}

		// examine --export: one KEY=VALUE per line, eval-safe.
		code, out, _ = mdtool(t, "examine", "--export", "--config=none", devs[0])
		checkText(t, "examine --export", out)
		if code != 0 || strings.Count(out, "MD_NAME=") != 1 {
			t.Errorf("examine --export of %q: exit %d\n%s", c.name, code, out)
		}
		if got, want := evalShell(t, dir, out, "MD_NAME"), strings.ReplaceAll(esc, "'", `\x27`); got != want {
			t.Errorf("examine --export of %q: the shell reads MD_NAME=%q, want %q", c.name, got, want)
		}

		// examine --json: still valid JSON with every control byte escaped.
		code, out, _ = mdtool(t, "examine", "--json", "--config=none", devs[0])
		checkText(t, "examine --json", out)
		var v any
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
			t.Errorf("examine --json of %q: exit %d, invalid JSON:\n%s", c.name, code, out)
		} else if !strings.ContainsRune(shown, 0xfffd) && !strings.Contains(shown, "\xff") && !jsonHasString(v, shown) {
			t.Errorf("examine --json of %q does not hold the name", c.name)
		}

		// -Es: one ARRAY line that reads back as this array and nothing else.
		code, out, errs = mdtool(t, "examine", "--scan", "--config=none", devs[0])
		if code != 0 {
			t.Fatalf("examine --scan %q: exit %d %s", c.name, code, errs)
		}
		checkText(t, "-Es", out)
		if strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "ARRAY "+c.dev+" ") {
			t.Errorf("-Es of %q: want one line starting %q, got:\n%s", c.name, "ARRAY "+c.dev+" ", out)
		}
		conf := parseConfText(t, dir, out)
		if len(conf.Arrays) != 1 || conf.Program != "" || conf.MailAddr != "" || conf.Devices != nil || len(conf.Warnings) > 0 {
			t.Errorf("-Es of %q reads back as %+v", c.name, conf)
		} else {
			a := conf.Arrays[0]
			if a.Device != c.dev || a.Name != shown || !a.UUIDSet {
				t.Errorf("-Es of %q reads back as device %q name %q, want %q %q", c.name, a.Device, a.Name, c.dev, shown)
			}
			uuids[c.dev] = uuidText(a.UUID, ':')
		}
		esAll.WriteString(out)
	}
	if t.Failed() {
		return
	}

	// The generated mdadm.conf: a DEVICE line and -Es's ARRAY lines.
	conf := filepath.Join(dir, "mdadm.conf")
	text := "DEVICE " + filepath.Join(dir, "*.img") + "\n" + esAll.String()
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	parsed := parseConfText(t, dir, text)
	if len(parsed.Arrays) != len(cases) || parsed.Program != "" || parsed.MailAddr != "" || len(parsed.Devices) != 1 {
		t.Fatalf("generated mdadm.conf reads back as %+v", parsed)
	}

	// assemble --scan: run-directory names are plain file names.
	env, _, errb := daemonEnv()
	done := make(chan int, 1)
	go func() {
		done <- Main([]string{"assemble", "--foreground", "--scan", "--config", conf, "--run-dir", runDir}, env)
	}()
	var want []string
	for _, c := range cases {
		n, err := daemon.ArrayName(c.dev)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, n)
	}
	sort.Strings(want)
	waitNames(t, runDir, strings.Join(want, ","), done)
	defer func() {
		mdtool(t, "stop", "--scan", "--run-dir", runDir)
		<-done
		t.Logf("assemble stderr:\n%s", errb.String())
	}()
	ents, _ := os.ReadDir(runDir)
	for _, e := range ents {
		n := e.Name()
		if bad := controlBytes(n); len(bad) > 0 || strings.Contains(n, "..") || strings.ContainsAny(n, " \"'\\") {
			t.Errorf("run-dir entry %q", n)
		}
	}
	checkText(t, "assemble stderr", errb.String())

	// detail --scan reads back as the same arrays.
	code, out, errs := mdtool(t, "detail", "--scan", "--run-dir", runDir, "--config", conf)
	checkText(t, "-Ds", out)
	back := parseConfText(t, dir, out)
	if code != 0 || len(back.Arrays) != len(cases) || back.Program != "" || back.MailAddr != "" || len(back.Warnings) > 0 {
		t.Errorf("-Ds: exit %d %s\n%s reads back as %+v", code, errs, out, back)
	}
	for _, a := range back.Arrays {
		if uuids[a.Device] != uuidText(a.UUID, ':') {
			t.Errorf("-Ds line for %q: UUID %s, want %s", a.Device, uuidText(a.UUID, ':'), uuids[a.Device])
		}
	}
	for _, c := range cases {
		shown := c.name
		if i := strings.IndexByte(shown, 0); i >= 0 {
			shown = shown[:i]
		}
		for _, a := range back.Arrays {
			if a.Device == c.dev && a.Name != shown {
				t.Errorf("-Ds name of %s reads back as %q, want %q", c.dev, a.Name, shown)
			}
		}
		code, out, _ := mdtool(t, "detail", "--run-dir", runDir, "--homehost=testhost", c.dev)
		checkText(t, "detail", out)
		if code != 0 || !strings.Contains(out, "              Name : "+escName(shown)) {
			t.Errorf("detail %s: exit %d\n%s", c.dev, code, out)
		}
		code, out, _ = mdtool(t, "detail", "--export", "--run-dir", runDir, c.dev)
		checkText(t, "detail --export", out)
		if got, want := evalShell(t, dir, out, "MD_NAME"), strings.ReplaceAll(escName(shown), "'", `\x27`); code != 0 || got != want {
			t.Errorf("detail --export %s: exit %d, the shell reads MD_NAME=%q, want %q\n%s", c.dev, code, got, want, out)
		}
		code, out, _ = mdtool(t, "detail", "--json", "--run-dir", runDir, c.dev)
		checkText(t, "detail --json", out)
		if code != 0 || !json.Valid([]byte(out)) {
			t.Errorf("detail --json %s: exit %d\n%s", c.dev, code, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Errorf("a name ran a shell command")
	}

	// monitor with the generated mdadm.conf: no PROGRAM came with it, so a
	// one-shot --test mails and runs nothing else.
	mailFile := filepath.Join(dir, "mail.txt")
	code, out, errs = mdtool(t, "monitor", "--config", conf, "--run-dir", runDir, "--scan", "--oneshot", "--test",
		"--mail", "ops@example.org", "--sendmail", "cat >> "+mailFile)
	if code != 0 {
		t.Errorf("monitor --scan --oneshot: exit %d %s %s", code, out, errs)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("monitor ran the PROGRAM smuggled in a name")
	}
	mail, _ := os.ReadFile(mailFile)
	checkText(t, "mail", string(mail))
	if n := strings.Count(string(mail), "Subject: TestMessage event on "); n != len(cases) {
		t.Errorf("%d mails, want %d:\n%s", n, len(cases), mail)
	}

	// --program: one event per array, its arguments escaped.
	ev := newEventLog(t, t.TempDir())
	os.WriteFile(ev.script, []byte("#!/bin/sh\nprintf '%s\\n' \"$*\" >> "+ev.log+"\n"), 0o755)
	if code, _, errs := mdtool(t, "monitor", "--config", conf, "--run-dir", runDir, "--scan", "--oneshot", "--test",
		"--program", ev.script); code != 0 {
		t.Errorf("monitor --program: exit %d %s", code, errs)
	}
	var gotEv []string
	for _, l := range ev.lines() {
		gotEv = append(gotEv, l)
		checkText(t, "event", l)
	}
	var wantEv []string
	for _, c := range cases {
		wantEv = append(wantEv, "TestMessage "+c.dev)
	}
	sort.Strings(gotEv)
	sort.Strings(wantEv)
	if strings.Join(gotEv, "\n") != strings.Join(wantEv, "\n") {
		t.Errorf("events:\n%s\nwant\n%s", strings.Join(gotEv, "\n"), strings.Join(wantEv, "\n"))
	}
}

// TestMonitorMailHeaders: an md device name with CR/LF (here from the
// command line; from a superblock it is escaped earlier) never adds a mail
// header, a program argument or an output line.
func TestMonitorMailHeaders(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	mailFile := filepath.Join(dir, "mail.txt")
	dev := "/dev/md/x\r\nBcc: victim@example.org\n\x1b[2J"
	code, out, errs := mdtool(t, "monitor", "--config", "/dev/null", "--run-dir", runDir, "--oneshot", "--test",
		"--mail", "ops@example.org\nCc: other@example.org", "--sendmail", "cat > "+mailFile, dev)
	if code != 0 {
		t.Fatalf("monitor: exit %d %s %s", code, out, errs)
	}
	mail, err := os.ReadFile(mailFile)
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(string(mail), "\n\n")
	lines := strings.Split(head, "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "From: ") || !strings.HasPrefix(lines[1], "To: ") || !strings.HasPrefix(lines[2], "Subject: ") {
		t.Errorf("mail headers:\n%s", head)
	}
	if want := `Subject: TestMessage event on /dev/md/x\r\nBcc: victim@example.org\n\x1b[2J:`; !strings.HasPrefix(lines[len(lines)-1], want) {
		t.Errorf("Subject %q, want prefix %q", lines[len(lines)-1], want)
	}
	checkText(t, "mail", string(mail))

	// newEventLog's echo would itself turn "\n" into a newline (dash).
	ev := newEventLog(t, dir)
	os.WriteFile(ev.script, []byte("#!/bin/sh\nprintf '%s\\n' \"$*\" >> "+ev.log+"\n"), 0o755)
	if code, _, errs := mdtool(t, "monitor", "--config", "/dev/null", "--run-dir", runDir, "--oneshot", "--test", "--program", ev.script, dev); code != 0 {
		t.Errorf("monitor --program: exit %d %s", code, errs)
	}
	if l := ev.lines(); len(l) != 2 || l[0] != `TestMessage /dev/md/x\r\nBcc: victim@example.org\n\x1b[2J` || l[1] != `DeviceDisappeared /dev/md/x\r\nBcc: victim@example.org\n\x1b[2J` {
		t.Errorf("program arguments: %q", l)
	}
	code, out, _ = mdtool(t, "monitor", "--config", "/dev/null", "--run-dir", runDir, "--oneshot", "--test", dev)
	checkText(t, "monitor output", out)
	if code != 0 || strings.Count(out, "\n") != 2 {
		t.Errorf("monitor output: exit %d %q", code, out)
	}
}

// TestNamesHostMdadm compares with host mdadm 4.2: for names mdadm 4.2
// prints as one clean line (white space, '#', '=', '/', UTF-8), mdtool's
// -Es line is byte for byte mdadm's; and mdadm reads the mdadm.conf that
// mdtool generates for unsafe names without a single complaint.
func TestNamesHostMdadm(t *testing.T) {
	requireHostMdadm(t)
	dir := t.TempDir()
	hostEs := func(args ...string) (string, string) {
		t.Helper()
		c := exec.Command("mdadm", append([]string{"--examine", "--scan"}, args...)...)
		var so, se strings.Builder
		c.Stdout, c.Stderr = &so, &se
		if err := c.Run(); err != nil {
			t.Errorf("mdadm -Es %v: %v %s", args, err, se.String())
		}
		return so.String(), se.String()
	}
	for i, name := range []string{"testhost:plain", "h:a b#c", "h:a=b", "h:x.y-z_1", "h:ünï", "h:a/b", "any:x y"} {
		md := fmt.Sprintf("/dev/md/same%d", i)
		devs := mkArray(t, dir, md, 2, 32<<20, "-l1", "-n2", "--assume-clean")
		setRawName(t, name, devs...)
		_, out, _ := mdtool(t, "examine", "--scan", "--config=none", devs[0])
		host, _ := hostEs("--config=none", devs[0])
		if out != host || out == "" {
			t.Errorf("name %q: mdtool -Es\n%s\nmdadm -Es\n%s", name, out, host)
		}
	}

	unsafe := t.TempDir()
	var lines strings.Builder
	for i, name := range []string{"x\nPROGRAM /tmp/e", "testhost:a\tb\x1b[31m\r", `h:q"s p#c='$(x)`, "bad\xff\u202e\\x", "x\r\nMAILADDR a@b", "h:active(uuid=1:2:3:4"} {
		md := fmt.Sprintf("/dev/md/unsafe%d", i)
		devs := mkArray(t, unsafe, md, 2, 32<<20, "-l1", "-n2", "--assume-clean")
		setRawName(t, name, devs...)
		_, out, _ := mdtool(t, "examine", "--scan", "--config=none", devs[0])
		lines.WriteString(out)
	}
	conf := filepath.Join(dir, "generated.conf")
	if err := os.WriteFile(conf, []byte("DEVICE "+filepath.Join(unsafe, "*.img")+"\n"+lines.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errs := hostEs("--config=" + conf)
	if errs != "" {
		t.Errorf("mdadm complains about mdtool's ARRAY lines:\n%s\n%s", errs, lines.String())
	}
	if strings.Count(out, "ARRAY ") != 6 {
		t.Errorf("mdadm -Es with the generated mdadm.conf:\n%s", out)
	}
}

// TestRawDeviceName: an md device named with control bytes on the command
// line gets a printable run-directory name, and detail, -Ds and stop show
// it escaped.
func TestRawDeviceName(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/raw", 2, 32<<20, "-l1", "-n2", "--assume-clean")
	md := "/dev/md/e\x1b[1mx\ny"
	s := serve(t, runDir, md, devs...)
	defer s.stopIfRunning()
	names, _ := daemon.Names(runDir)
	if len(names) != 1 || names[0] != `e\x1b[1mx\ny` {
		t.Errorf("run-dir names %q", names)
	}
	ents, _ := os.ReadDir(runDir)
	for _, e := range ents {
		if bad := controlBytes(e.Name()); len(bad) > 0 {
			t.Errorf("run-dir entry %q", e.Name())
		}
	}
	code, out, errs := mdtool(t, "detail", "--scan", "--run-dir", runDir)
	checkText(t, "-Ds", out)
	if code != 0 || !strings.HasPrefix(out, `ARRAY /dev/md/e\x1b[1mx\ny metadata=1.2 name=testhost:raw UUID=`) {
		t.Errorf("-Ds: exit %d %q %q", code, out, errs)
	}
	code, out, _ = mdtool(t, "detail", "--run-dir", runDir, md)
	checkText(t, "detail", out)
	if code != 0 || !strings.HasPrefix(out, `/dev/md/e\x1b[1mx\ny:`+"\n") {
		t.Errorf("detail: exit %d %q", code, out)
	}
	ev := newEventLog(t, dir)
	os.WriteFile(ev.script, []byte("#!/bin/sh\nprintf '%s\\n' \"$*\" >> "+ev.log+"\n"), 0o755)
	if code, _, errs := mdtool(t, "monitor", "--config", "/dev/null", "--run-dir", runDir, "--scan", "--oneshot", "--test", "--program", ev.script); code != 0 {
		t.Errorf("monitor: exit %d %s", code, errs)
	}
	if l := ev.lines(); len(l) != 2 || l[0] != `TestMessage /dev/md/e\x1b[1mx\ny` || l[1] != `NewArray /dev/md/e\x1b[1mx\ny` {
		t.Errorf("monitor events %q", l)
	}
	code, _, errs = mdtool(t, "stop", "--scan", "-v", "--run-dir", runDir)
	checkText(t, "stop", errs)
	if code != 0 || errs != `mdtool: stopped /dev/md/e\x1b[1mx\ny`+"\n" {
		t.Errorf("stop --scan: exit %d %q", code, errs)
	}
	s.wait()
}

// TestBackslashNameAssembles: a name holding a backslash assembles from the
// ARRAY line mdadm 4.2 writes for it (name= as it is) and from the one
// mdtool writes (name= escaped, "\\" for the backslash).
func TestBackslashNameAssembles(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/bs", 2, 32<<20, "-l1", "-n2", "--assume-clean")
	name := `testhost:a\x41\n`
	setRawName(t, name, devs...)
	_, es, _ := mdtool(t, "examine", "--scan", "--config=none", devs[0])
	if !strings.Contains(es, ` name=testhost:a\\x41\\n`+"\n") {
		t.Errorf("-Es: %q", es)
	}
	for _, line := range []string{
		"ARRAY /dev/md/bs name=" + name + "\n", // as mdadm 4.2 writes it
		strings.Replace(es, "ARRAY /dev/md/a_x41_n ", "ARRAY /dev/md/bs ", 1),
		"ARRAY /dev/md/bs name=testhost:other\n", // the control case: no match
	} {
		conf := filepath.Join(dir, "mdadm.conf")
		if err := os.WriteFile(conf, []byte("DEVICE "+filepath.Join(dir, "*.img")+"\n"+line), 0o600); err != nil {
			t.Fatal(err)
		}
		parsed := parseConfText(t, dir, line)
		if len(parsed.Arrays) != 1 {
			t.Fatalf("%q: %+v", line, parsed)
		}
		s, code := tryServe(t, runDir, "/dev/md/bs", "--scan", "--config", conf)
		if strings.Contains(line, "other") {
			if s != nil || code == 0 {
				t.Errorf("%q: assembled an array with another name", line)
				if s != nil {
					s.stop()
				}
			}
			continue
		}
		if s == nil {
			t.Errorf("%q (read as name %q): not assembled, exit %d", line, parsed.Arrays[0].Name, code)
			continue
		}
		s.stop()
	}
}

// FuzzBriefLineReadsBack: for any set_name bytes (and the ctime bytes the
// name runs into when it has no NUL), -Es's ARRAY line is one line that
// cmd's mdadm.conf reader reads back as exactly this array: its UUID, its
// name, the device -Es names, and no other keyword, word or warning.
func FuzzBriefLineReadsBack(f *testing.F) {
	for _, s := range []string{"vm:x\nPROGRAM /e.sh", "h:active(uuid=1:2:3:4", `h:a"b'c d#e=f`, "h:\\x41\\", "abcdefghijklmnopqrstuvwxyz:12345\x8d\f\rk"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, name []byte) {
		if len(name) > 40 {
			name = name[:40] // 32 bytes of set_name, then ctime
		}
		mem := make([]byte, 8192)
		binary.LittleEndian.PutUint32(mem[0:], superblock.Magic)
		binary.LittleEndian.PutUint32(mem[4:], 1)
		copy(mem[0x10:0x20], "0123456789abcdef")
		copy(mem[0x20:], name)
		binary.LittleEndian.PutUint32(mem[0x48:], 1)
		binary.LittleEndian.PutUint32(mem[0x5C:], 2)
		binary.LittleEndian.PutUint64(mem[0x90:], 8)
		var out strings.Builder
		sb, _ := superblock.Parse(mem)
		if sb == nil {
			t.Fatal("the fuzz superblock does not decode")
		}
		writeBriefV1(&out, &v1Probe{mem: mem, sb: sb}, false)
		line := out.String()
		if strings.Count(line, "\n") != 1 || controlBytes(line) != nil {
			t.Fatalf("ARRAY line %q", line)
		}
		conf := &MdadmConf{}
		conf.Parse("fuzz", strings.NewReader(line))
		full := string(cString(mem[0x20:v1SBSize]))
		warnings := 0
		if len(full) > 32 {
			// set_name without a NUL runs into ctime: mdadm too prints
			// it and then ignores it ("name too long").
			warnings, full = 1, ""
		}
		if len(conf.Arrays) != 1 || len(conf.Warnings) != warnings || conf.Program != "" || conf.MailAddr != "" || conf.Devices != nil {
			t.Fatalf("%q reads back as %+v", line, conf)
		}
		a := conf.Arrays[0]
		var want [16]byte
		copy(want[:], "0123456789abcdef")
		if !a.UUIDSet || a.UUID != want || a.Name != full {
			t.Fatalf("%q reads back as uuid %x name %q, want name %q", line, a.UUID, a.Name, full)
		}
		nm := string(cString(mem[0x20:v1SBSize]))
		if i := strings.IndexByte(nm, ':'); i >= 0 {
			nm = nm[i+1:]
		}
		if nm != "" && a.Device != "/dev/md/"+printEscape(nm) {
			t.Fatalf("%q reads back as device %q", line, a.Device)
		}
	})
}
