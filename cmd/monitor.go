package cmd

import (
	"fmt"
	"io"
	"log/syslog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"mdtool/internal/daemon"
)

const monitorLong = `Watch running arrays and report events, as "mdadm --monitor" (--follow, -F)
does: the arrays given, or with --scan every array that mdtool serves (the
ARRAY lines of mdadm.conf and any array started later). Each array's daemon
is asked over its control socket every --delay seconds.

Events, raised on the same transitions as mdadm's:

  Fail               an active member became faulty
  FailSpare          a spare became faulty
  SpareActive        a spare became an active in-sync member (rebuilt)
  DegradedArray      an array is first seen with a member missing
  RebuildStarted     a resync, recovery, check or repair started
  RebuildNN          it passed NN% (every --increment percent, default 20)
  RebuildFinished    it finished (" mismatches found: N (on raid level L)"
                     when a check or repair counted mismatches)
  NewArray           an array appeared (--scan), or came back
  DeviceDisappeared  an array stopped (or is raid0/linear: " Wrong-Level")
  SparesMissing      fewer spares than its ARRAY line's spares=
  TestMessage        with --test, for every array at start

For each event:
  --program PROG (--alert)  runs PROG EVENT MD-DEVICE [COMPONENT], waiting
                            for it to end
  --mail ADDR               mails Fail*, DegradedArray, SparesMissing and
                            TestMessage events through "/usr/lib/sendmail
                            -t", as mdadm does (From: MAILFROM or "mdtool
                            monitoring <root>")
  --syslog (-y)             logs to syslog
Without any of these, each event is printed on stdout:
  "Nov 30 07:40:14: Fail on /dev/md/data /dev/loop1". MAILADDR, MAILFROM,
PROGRAM and MONITORDELAY come from mdadm.conf when not given.

  --oneshot (-1)     check once and exit (e.g. from cron for a daily
                     DegradedArray report)
  --delay N (-d)     seconds between checks (default 60, or MONITORDELAY)
  --increment N (-r) RebuildNN step in percent (1 to 99, default 20)
  --test (-t)        raise a TestMessage for every array at start

  --daemonise (-f)   go on in the background (own session, output to
                     /dev/null) and print its pid, or with --pid-file (-i)
                     write it there (the file is removed when it ends)

mdtool's monitor does not move spares between the arrays of a spare-group.

EXIT STATUS
  0  monitored until done (--oneshot), or no array with redundancy is left
  1  nothing to monitor, or --scan without a mail address or program
  2  bad arguments`

type monitorOptions struct {
	scan, oneshot, test, syslog bool
	mail, program               string
	delay, increment            int
	config                      string
	runDir                      string
	sendmail                    string
	daemonise                   bool
	pidFile                     string
}

func newMonitorCmd(env *Env) *cobra.Command {
	o := &monitorOptions{}
	c := &cobra.Command{
		Use:   "monitor [flags] [MD-DEVICE...]",
		Short: "Report failures, degraded arrays and rebuild progress (mdadm --monitor)",
		Long:  monitorLong,
		Example: `  mdtool --monitor --scan --program /usr/local/sbin/md-event --delay 30
  mdtool monitor --oneshot --scan --mail root
  mdtool -F --test --oneshot --program /bin/echo /dev/md/data`,
		RunE: func(c *cobra.Command, args []string) error {
			return runMonitor(env, o, args)
		},
	}
	f := c.Flags()
	f.BoolVarP(&o.scan, "scan", "s", false, "monitor every array mdtool serves (and mdadm.conf's ARRAY lines)")
	f.StringVarP(&o.mail, "mail", "m", "", "mail events to this address")
	f.StringVarP(&o.program, "program", "p", "", "run this program for every event")
	f.StringVar(&o.program, "alert", "", "same as --program")
	f.IntVarP(&o.delay, "delay", "d", 0, "seconds between checks (default 60)")
	f.IntVarP(&o.increment, "increment", "r", 20, "report rebuild progress every N percent")
	f.BoolVarP(&o.oneshot, "oneshot", "1", false, "check once, then exit")
	f.BoolVarP(&o.test, "test", "t", false, "raise a TestMessage event for every array at start")
	f.BoolVarP(&o.syslog, "syslog", "y", false, "log events to syslog")
	f.BoolVarP(&o.daemonise, "daemonise", "f", false, "go on in the background and print its pid")
	f.StringVarP(&o.pidFile, "pid-file", "i", "", "with --daemonise: write the pid to this file instead")
	f.StringVarP(&o.config, "config", "c", "", "mdadm.conf to read (MAILADDR, PROGRAM, ARRAY, MONITORDELAY)")
	f.StringVar(&o.sendmail, "sendmail", "/usr/lib/sendmail -t", "command that mails a message read on stdin")
	_ = f.MarkHidden("sendmail")
	addRunDirFlag(f, &o.runDir)
	return c
}

// Sync progress values of mdadm's mdstat_ent.percent.
const (
	resyncNone    = -1
	resyncUnknown = -4
)

// monArray is mdadm's struct state for one array.
type monArray struct {
	dev        string // md device name used in events
	name       string // run-directory name
	fromConfig bool
	fromAuto   bool
	err        int
	seen       bool   // mdadm's utime != 0
	utime      string // superblock utime and events: changes on every update
	percent    int
	active     int
	working    int
	spare      int
	failed     int
	raid       int
	expSpares  int
	devstate   map[int]int
	devid      map[int]string
}

type monitor struct {
	env      *Env
	o        *monitorOptions
	mailFrom string
	sys      *syslog.Writer
	arrays   []*monArray
}

func runMonitor(env *Env, o *monitorOptions, args []string) error {
	if o.increment < 1 || o.increment > 99 {
		return usagef("please specify positive integer between 1 and 99 as rebuild increments.")
	}
	if o.delay < 0 {
		return usagef("invalid delay: %d", o.delay)
	}
	if len(args) == 0 && !o.scan {
		return exitf(ExitFailure, "Cannot monitor: need --scan or at least one device")
	}
	if o.pidFile != "" && !o.daemonise {
		return exitf(ExitFailure, "Cannot write a pid file when not in daemon mode")
	}
	if o.daemonise && os.Getenv(monitorChildEnv) == "" {
		return daemoniseMonitor(env, o)
	}
	if o.pidFile != "" {
		defer os.Remove(o.pidFile)
	}
	conf, _ := LoadMdadmConf(o.config)
	m := &monitor{env: env, o: o}
	if conf != nil {
		if o.mail == "" && conf.MailAddr != "" {
			o.mail = conf.MailAddr
			if !o.scan {
				fmt.Fprintf(env.Stderr, "mdtool: Monitor using email address \"%s\" from config file\n", o.mail)
			}
		}
		m.mailFrom = conf.MailFrom
		if o.program == "" && conf.Program != "" {
			o.program = conf.Program
			if !o.scan {
				fmt.Fprintf(env.Stderr, "mdtool: Monitor using program \"%s\" from config file\n", o.program)
			}
		}
		if o.delay == 0 {
			o.delay = conf.MonitorDelay
		}
	}
	if o.delay == 0 {
		o.delay = 60
	}
	if o.scan && o.mail == "" && o.program == "" && !o.syslog {
		return exitf(ExitFailure, "No mail address or alert command - not monitoring.")
	}
	if o.syslog {
		w, err := syslog.New(syslog.LOG_DAEMON|syslog.LOG_WARNING, "mdtool")
		if err != nil {
			return exitf(ExitFailure, "cannot open syslog: %v", err)
		}
		defer w.Close()
		m.sys = w
	}
	if len(args) == 0 {
		if conf != nil {
			for _, a := range conf.Arrays {
				if a.Device == "" || strings.EqualFold(a.Device, "<ignore>") {
					continue
				}
				dev := a.Device
				if !strings.HasPrefix(dev, "/") {
					dev = "/dev/md/" + dev
				}
				m.add(dev, true, false, a.Spares)
			}
		}
	} else {
		for _, dev := range args {
			exp := -1
			if conf != nil {
				for _, a := range conf.Arrays {
					if a.Device == dev {
						exp = a.Spares
					}
				}
			}
			m.add(dev, false, false, exp)
		}
	}
	test := o.test
	for {
		anyRedundant := false
		for _, a := range m.arrays {
			m.check(a, test)
			if a.err == 0 {
				anyRedundant = true
			}
		}
		newFound := false
		if o.scan {
			newFound = m.addNew(test)
		}
		if !newFound {
			if o.oneshot {
				break
			}
			if !anyRedundant {
				fmt.Fprintf(env.Stderr, "mdtool: No array with redundancy detected, stopping\n")
				break
			}
			time.Sleep(time.Duration(o.delay) * time.Second)
		}
		test = false
		kept := m.arrays[:0]
		for _, a := range m.arrays {
			if !(a.fromAuto && a.err > 5) {
				kept = append(kept, a)
			}
		}
		m.arrays = kept
	}
	return nil
}

// monitorChildEnv marks the background copy that --daemonise starts.
const monitorChildEnv = "MDTOOL_MONITOR_CHILD"

// daemoniseMonitor is mdadm's make_daemon: the monitor goes on in the
// background, in its own session, and its pid is printed (or written to
// --pid-file).
func daemoniseMonitor(env *Env, o *monitorOptions) error {
	exe, err := os.Executable()
	if err != nil {
		return exitf(ExitFailure, "daemonise: %v", err)
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return exitf(ExitFailure, "daemonise: %v", err)
	}
	defer devnull.Close()
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Env = append(os.Environ(), monitorChildEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return exitf(ExitFailure, "daemonise: %v", err)
	}
	pid := cmd.Process.Pid
	cmd.Process.Release()
	if o.pidFile == "" {
		fmt.Fprintf(env.Stdout, "%d\n", pid)
		return nil
	}
	if err := os.WriteFile(o.pidFile, []byte(fmt.Sprintf("%d\n", pid)), 0o644); err != nil {
		fmt.Fprintf(env.Stderr, "cannot create pid file: %v\n", err)
	}
	return nil
}

func (m *monitor) add(dev string, fromConfig, fromAuto bool, expSpares int) *monArray {
	name, _ := daemon.ArrayName(dev)
	a := &monArray{dev: dev, name: name, fromConfig: fromConfig, fromAuto: fromAuto, percent: resyncUnknown,
		expSpares: expSpares, devstate: map[int]int{}, devid: map[int]string{}}
	m.arrays = append(m.arrays, a)
	return a
}

// addNew is mdadm's add_new_arrays: running arrays not yet watched (other
// than raid0 and linear) are added with an error count, so that the next
// check raises NewArray.
func (m *monitor) addNew(test bool) bool {
	names, err := daemon.Names(m.o.runDir)
	if err != nil {
		return false
	}
	found := false
	for _, n := range names {
		known := false
		for _, a := range m.arrays {
			if a.name == n {
				known = true
			}
		}
		if known {
			continue
		}
		st, err := queryStatus(m.o.runDir, n)
		if err != nil || st.Level == 0 || st.Level == -1 {
			continue
		}
		a := m.add(st.Device, false, true, -1)
		a.name = n
		a.err = 1
		if test {
			m.alert("TestMessage", a.dev, "")
		}
		found = true
	}
	return found
}

// check is mdadm's check_array: it compares the array with what was seen
// last and raises the events.
func (m *monitor) check(a *monArray, test bool) {
	if test {
		m.alert("TestMessage", a.dev, "")
	}
	disappeared := func() {
		if a.err == 0 {
			m.alert("DeviceDisappeared", a.dev, "")
		}
		a.err++
	}
	if a.name == "" {
		disappeared()
		return
	}
	st, err := queryStatus(m.o.runDir, a.name)
	if err != nil {
		disappeared()
		return
	}
	d, err := newDetailView(st, "")
	if err != nil {
		disappeared()
		return
	}
	if st.Level == 0 || st.Level == -1 {
		if a.err == 0 && !a.fromConfig {
			m.alert("DeviceDisappeared", a.dev, " Wrong-Level")
		}
		a.err++
		return
	}
	newArray := false
	if a.err > 0 {
		a.err = 0
		a.percent = resyncNone
		newArray = true
		m.alert("NewArray", a.dev, "")
	}
	utime := fmt.Sprintf("%d/%d", d.sb.UTime.Seconds(), st.Events)
	percent := resyncNone
	if syncRunning(st) {
		percent = int(perMille(st.SyncDone, st.SyncTotal) / 10)
	}
	if a.seen && a.utime == utime && a.failed == d.failed && a.working == d.working &&
		a.spare == d.spare && a.percent == percent {
		return
	}
	if !a.seen && d.availCount() < st.RaidDisks {
		m.alert("DegradedArray", a.dev, "")
	}
	if !a.seen && a.expSpares > 0 && d.spare < a.expSpares {
		m.alert("SparesMissing", a.dev, "")
	}
	inc := m.o.increment
	if a.percent < 0 && a.percent != resyncUnknown && percent >= 0 {
		m.alert("RebuildStarted", a.dev, "")
	}
	if a.percent >= 0 && percent >= 0 && percent/inc > a.percent/inc {
		if percent/inc == 0 {
			m.alert("RebuildStarted", a.dev, "")
		} else {
			m.alert(fmt.Sprintf("Rebuild%02d", percent), a.dev, "")
		}
	}
	if percent == resyncNone && a.percent >= 0 {
		if st.Mismatches > 0 {
			m.alert("RebuildFinished", a.dev, fmt.Sprintf(" mismatches found: %d (on raid level %d)", st.Mismatches, st.Level))
		} else {
			m.alert("RebuildFinished", a.dev, "")
		}
	}
	a.percent = percent
	// Member transitions, by descriptor number.
	state := map[int]int{}
	ids := map[int]string{}
	for _, disk := range d.disks {
		if disk.present() && disk.number >= 0 {
			state[disk.number] = disk.state
			ids[disk.number] = disk.path
		}
	}
	numbers := map[int]bool{}
	for n := range state {
		numbers[n] = true
	}
	for n := range a.devstate {
		numbers[n] = true
	}
	for _, n := range sortedKeys(numbers) {
		newState, ok := state[n]
		if !ok {
			newState = mdDiskRemoved
		}
		old, ok := a.devstate[n]
		if !ok {
			old = 0
		}
		dv := ids[n]
		if dv == "" {
			dv = a.devid[n]
		}
		change := newState ^ old
		if a.seen && change != 0 && a.err == 0 && !newArray {
			switch {
			case old&change&mdDiskSync != 0:
				m.alert("Fail", a.dev, dv)
			case newState&mdDiskFaulty != 0 && ids[n] != "" && a.devid[n] == ids[n]:
				m.alert("FailSpare", a.dev, dv)
			case newState&change&mdDiskSync != 0:
				m.alert("SpareActive", a.dev, dv)
			}
		}
		a.devstate[n] = newState
		a.devid[n] = ids[n]
	}
	a.active, a.working, a.spare, a.failed = d.active, d.working, d.spare, d.failed
	a.raid = st.RaidDisks
	a.utime = utime
	a.seen = true
	a.err = 0
}

func sortedKeys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// alert is mdadm's alert(): print, run the program, mail, log.
func (m *monitor) alert(event, dev, disc string) {
	o := m.o
	// Device names may come from superblock names or mdadm.conf: escaped
	// (escName) for the program's arguments, the mail and the log alike.
	dev, disc = escName(dev), escName(disc)
	if o.program == "" && o.mail == "" && m.sys == nil {
		d := disc
		if d == "" {
			d = "unknown device"
		}
		fmt.Fprintf(m.env.Stdout, "%s: %s on %s %s\n", time.Now().Format("Jan _2 15:04:05"), event, dev, d)
	}
	if o.program != "" {
		args := []string{event, dev}
		if disc != "" {
			args = append(args, disc)
		}
		cmd := exec.Command(o.program, args...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
		if w, ok := m.env.Stdout.(*os.File); ok {
			cmd.Stdout = w
		}
		if w, ok := m.env.Stderr.(*os.File); ok {
			cmd.Stderr = w
		}
		_ = cmd.Run()
	}
	if o.mail != "" && (strings.HasPrefix(event, "Fail") || strings.HasPrefix(event, "Test") ||
		strings.HasPrefix(event, "Spares") || strings.HasPrefix(event, "Degrade")) {
		m.mail(event, dev, disc)
	}
	if m.sys != nil {
		var msg string
		switch {
		case disc != "" && disc[0] != ' ':
			msg = fmt.Sprintf("%s event detected on md device %s, component device %s", event, dev, disc)
		case disc != "":
			msg = fmt.Sprintf("%s event detected on md device %s: %s", event, dev, disc)
		default:
			msg = fmt.Sprintf("%s event detected on md device %s", event, dev)
		}
		switch {
		case strings.HasPrefix(event, "Fail") || strings.HasPrefix(event, "Degrade") || strings.HasPrefix(event, "DeviceDisappeared"):
			m.sys.Crit(msg)
		case strings.HasPrefix(event, "Rebuild") || strings.HasPrefix(event, "MoveSpare") || !strings.HasPrefix(event, "Spares"):
			m.sys.Warning(msg)
		default:
			m.sys.Info(msg)
		}
	}
}

// mail sends mdadm's event mail through the sendmail command.
func (m *monitor) mail(event, dev, disc string) {
	host, _ := os.Hostname()
	host = escName(host) // no header ever holds a CR or LF
	var b strings.Builder
	if m.mailFrom != "" {
		fmt.Fprintf(&b, "From: %s\n", escName(m.mailFrom))
	} else {
		fmt.Fprintf(&b, "From: mdtool monitoring <root>\n")
	}
	fmt.Fprintf(&b, "To: %s\n", escName(m.o.mail))
	fmt.Fprintf(&b, "Subject: %s event on %s:%s\n\n", event, dev, host)
	fmt.Fprintf(&b, "This is an automatically generated mail message from mdtool\n")
	fmt.Fprintf(&b, "running on %s\n\n", host)
	fmt.Fprintf(&b, "A %s event had been detected on md device %s.\n\n", event, dev)
	if disc != "" && disc[0] != ' ' {
		fmt.Fprintf(&b, "It could be related to component device %s.\n\n", disc)
	}
	if disc != "" && disc[0] == ' ' {
		fmt.Fprintf(&b, "Extra information:%s.\n\n", disc)
	}
	fmt.Fprintf(&b, "Faithfully yours, etc.\n")
	fmt.Fprintf(&b, "\nP.S. The arrays mdtool serves currently are, in the form of /proc/mdstat:\n\n")
	m.writeMdstat(&b)
	cmd := exec.Command("/bin/sh", "-c", m.o.sendmail)
	cmd.Stdin = strings.NewReader(b.String())
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(m.env.Stderr, "mdtool: cannot send mail about %s on %s: %v\n", event, dev, err)
	}
}

// writeMdstat writes a /proc/mdstat-like listing of the running arrays.
func (m *monitor) writeMdstat(w io.Writer) {
	names, _ := daemon.Names(m.o.runDir)
	for _, n := range names {
		st, err := queryStatus(m.o.runDir, n)
		if err != nil {
			continue
		}
		writeMdstatEntry(w, n, st)
	}
	fmt.Fprintf(w, "unused devices: <none>\n")
}

// writeMdstatEntry writes one array as /proc/mdstat shows it.
func writeMdstatEntry(w io.Writer, name string, st *daemon.Status) {
	state := "active"
	if st.ReadOnly {
		state = "active (read-only)"
	}
	fmt.Fprintf(w, "%s : %s %s", escName(name), state, levelName(st.Level))
	up := make([]bool, st.RaidDisks)
	nUp := 0
	for _, ms := range st.Members {
		if ms.Path == "" || ms.State == "missing" {
			continue
		}
		base := escName(ms.Path[strings.LastIndexByte(ms.Path, '/')+1:])
		switch ms.State {
		case "faulty":
			fmt.Fprintf(w, " %s[%d](F)", base, ms.DevNumber)
		case "spare":
			fmt.Fprintf(w, " %s[%d](S)", base, ms.DevNumber)
		default:
			fmt.Fprintf(w, " %s[%d]", base, ms.DevNumber)
		}
		if ms.State == "in_sync" && ms.Role >= 0 && ms.Role < len(up) && !up[ms.Role] {
			up[ms.Role] = true
			nUp++
		}
	}
	fmt.Fprintf(w, "\n      %d blocks super 1.%d", st.Size>>10, st.SuperMinor)
	if st.Level >= 4 && st.Level <= 6 {
		fmt.Fprintf(w, " level %d, %dk chunk, algorithm %d", st.Level, st.ChunkBytes>>10, st.Layout)
	}
	if st.Level >= 1 {
		var pat strings.Builder
		for _, u := range up {
			if u {
				pat.WriteByte('U')
			} else {
				pat.WriteByte('_')
			}
		}
		fmt.Fprintf(w, " [%d/%d] [%s]", st.RaidDisks, nUp, pat.String())
	}
	fmt.Fprintf(w, "\n")
	if syncRunning(st) {
		fmt.Fprintf(w, "      %s\n", progressLine(st))
	}
	fmt.Fprintf(w, "      \n")
}
