package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"mdtool/internal/daemon"
	"mdtool/internal/nbdclient"
)

const manageLong = `Change the members of a running array, as mdadm's manage mode does:

  mdtool /dev/md/data --fail /dev/loop1 --remove /dev/loop1
  mdtool /dev/md/data --add /dev/loop3
  mdtool manage /dev/md/data -f /dev/loop1

Every DEVICE after an operation gets that operation, until the next one:

  --fail, -f, --set-faulty   mark the member faulty: it gets no more I/O and
                             the other members' superblocks record it (md
                             refuses to fail the last copy of the data);
                             spares can be failed too
  --remove, -r               remove a faulty or spare member (in mdadm's
                             forms, "mdtool MD -r DEV", -r takes DEV as its
                             value and removes nothing, as in mdadm 4.2;
                             --remove works)
  --add, -a                  add a device: as a spare, which a rebuild
                             starts on at once when a role is missing or
                             faulty; a former member of the array that
                             was active is re-added instead when the
                             array's bitmap allows it
  --re-add                   put a former member back into its old role;
                             with a bitmap only the chunks written since it
                             left are rebuilt
  --add-spare                add as a spare, never as a re-add
  --replace                  rebuild an active member onto a spare while it
                             keeps working; the old member becomes faulty
                             when the copy is complete
  --with                     the spare to use for the --replace before it
                             (it must have been added already)

Keywords instead of a DEVICE, as in mdadm: "failed" (or "faulty") with
--remove or --re-add means every faulty member; "detached" with --remove or
--fail means every member whose device is gone; a name without a "/" (such as
"loop1" or "d1.img") with --remove or --fail means the member of that base
name. Messages name such members by path (mdadm prints "MAJOR:MINOR", which
is 0:0 for image files).

Like mdadm, the operations are asynchronous to the rebuilds they cause: right
after --add, "wait" or "detail" may for a moment show no recovery yet.

--add refuses a device that holds a filesystem, a partition table or another
array's superblock unless --force is given (mdtool's addition: mdadm adds
such a device without asking). --write-mostly marks devices added after it
write-mostly (raid1).

The array is reached through its daemon's control socket in the run directory
(--run-dir, MDTOOL_RUN_DIR, default /run/mdtool). The daemon opens an added
device exclusively (O_EXCL for block devices, an flock for image files).

EXIT STATUS
  0  every operation was done
  1  an operation failed (the ones after it were not tried)
  2  bad arguments; md refused to fail a member (EBUSY, as mdadm reports
     it); with --test: nothing was changed`

func newManageCmd(env *Env) *cobra.Command {
	var runDir string
	c := &cobra.Command{
		Use:                "manage MD-DEVICE {--fail|--remove|--add|--re-add|--replace} DEVICE...",
		Short:              "Fail, remove, add or replace members of a running array (mdadm manage mode)",
		Long:               manageLong,
		DisableFlagParsing: true,
		RunE: func(c *cobra.Command, args []string) error {
			return runManage(env, c, args, runDir)
		},
	}
	f := c.Flags()
	f.BoolP("fail", "f", false, "mark the following devices faulty")
	f.Bool("set-faulty", false, "same as --fail")
	f.BoolP("remove", "r", false, "remove the following (faulty or spare) devices")
	f.BoolP("add", "a", false, "add the following devices (re-add former members)")
	f.Bool("re-add", false, "add the following devices back into their roles")
	f.Bool("add-spare", false, "add the following devices as spares, never as a re-add")
	f.Bool("replace", false, "replace the following active members by spares")
	f.Bool("with", false, "the spares that the preceding --replace uses")
	f.Bool("force", false, "add devices that hold a filesystem or another array's superblock")
	f.BoolP("write-mostly", "W", false, "devices added after this are write-mostly (raid1)")
	f.Bool("failfast", false, "devices added after this are failfast (raid1, raid10)")
	f.Bool("nofailfast", false, "devices added after this are not failfast (also a re-added member that was)")
	f.BoolP("test", "t", false, "exit status 2 when nothing was changed")
	addRunDirFlag(f, &runDir)
	return c
}

// Manage dispositions, as mdadm's Manage_subdevs calls them.
const (
	dispAdd      = 'a'
	dispAddSpare = 'S'
	dispReAdd    = 'A'
	dispRemove   = 'r'
	dispFail     = 'f'
	dispReplace  = 'R'
	dispWith     = 'W'
)

type manageOp struct {
	disp        byte
	dev         string // as given (for messages)
	abs         string // absolute path (for the daemon)
	writeMostly bool
	// with: for a replace, the index of its --with op (-1 none); for a
	// --with, whether a replace took it.
	with   int
	paired bool
	role   int // the role a paired --with replaces
	// moreAdds: the next op is an add too (mdadm --add A B): the daemon
	// lets spares take roles after the last one, as md does.
	moreAdds bool
	failFast int // --failfast (1), --nofailfast (-1) before the device
}

type manageRun struct {
	env    *Env
	mddev  string
	name   string
	cl     *daemon.Client
	force  bool
	verb   int
	test   bool
	count  int
	busy   bool
	runDir string
}

func runManage(env *Env, c *cobra.Command, args []string, runDir string) error {
	m := &manageRun{env: env}
	var ops []*manageOp
	var disp byte
	writeMostly := false
	failFast := 0     // mdadm's FlagSet (1), FlagClear (-1), FlagDefault
	stop := false     // --manage --stop: mdadm's Manage_stop after the operations
	readonly := false // --manage -o: mdadm's Manage_ro before them
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch a {
		case "--fail", "-f", "--set-faulty":
			disp = dispFail
		case "--remove", "-r":
			disp = dispRemove
		case "--add", "-a":
			disp = dispAdd
		case "--add-spare":
			disp = dispAddSpare
		case "--re-add":
			disp = dispReAdd
		case "--replace":
			disp = dispReplace
		case "--with":
			disp = dispWith
		case "--force":
			m.force = true
		case "--stop", "-S":
			stop = true
		case "--readonly", "-o":
			readonly = true
		case "--write-mostly", "-W":
			writeMostly = true
		case "--readwrite", "-w":
			writeMostly = false
		case "--failfast":
			failFast = 1
		case "--nofailfast":
			failFast = -1
		case "--verbose", "-v":
			m.verb = 1
		case "--quiet", "-q":
			m.verb = -1
		case "--test", "-t":
			m.test = true
		case "--help", "-h":
			return c.Help()
		case "--run-dir":
			if i+1 >= len(args) {
				return usagef("--run-dir needs a directory")
			}
			i++
			runDir = args[i]
		default:
			if v, ok := strings.CutPrefix(a, "--run-dir="); ok {
				runDir = v
				continue
			}
			if strings.HasPrefix(a, "-") && a != "-" {
				return usagef("unknown option %s in manage mode", a)
			}
			if m.mddev == "" {
				m.mddev = a
				continue
			}
			if disp == 0 {
				return usagef("%s: an operation (--fail, --remove, --add, --re-add, --replace) must come before the devices", a)
			}
			abs := a
			if (strings.Contains(a, "/") || isFile(a)) && !filepath.IsAbs(a) && !nbdclient.IsURI(a) {
				if p, err := filepath.Abs(a); err == nil {
					abs = p
				}
			}
			ops = append(ops, &manageOp{disp: disp, dev: a, abs: abs, writeMostly: writeMostly, failFast: failFast, with: -1})
		}
	}
	if m.mddev == "" {
		return usagef("an md device must be given in manage mode")
	}
	if readonly {
		if err := setReadOnly(env, runDir, m.mddev, true); err != nil {
			return exitf(ExitFailure, "%v", err)
		}
	}
	if len(ops) == 0 && readonly && !stop {
		return nil
	}
	if len(ops) == 0 && stop {
		return runStop(env, []string{m.mddev}, false, false, runDir, stopTimeout, m.verb)
	}
	if len(ops) == 0 {
		// mdadm --remove /dev/mdX (the Ansible roles' "Removing
		// Array(s)"), or 4.2's "-r" that took the next word as its value:
		// mdadm opens the array and has nothing to do.
		return manageWithoutDevices(args, disp, m.mddev, runDir)
	}
	m.runDir = runDir
	// A --replace takes the first --with after it that no other
	// --replace took (mdadm pairs them the same way).
	for i, op := range ops {
		if op.disp != dispReplace {
			continue
		}
		for j := i + 1; j < len(ops); j++ {
			if ops[j].disp == dispWith && !ops[j].paired {
				ops[j].paired = true
				op.with = j
				break
			}
		}
	}
	name, err := daemon.ArrayName(m.mddev)
	if err != nil {
		return exitf(ExitFailure, "%s does not appear to be an md device", m.mddev)
	}
	m.name = name
	cl, err := daemon.Dial(runDir, name)
	if errors.Is(err, daemon.ErrNotRunning) {
		return exitf(ExitFailure, "error opening %s: No such file or directory", m.mddev) // mdadm's open_mddev: no node
	}
	if err != nil {
		return exitf(ExitFailure, "cannot reach the daemon of %s: %v", m.mddev, err)
	}
	defer cl.Close()
	m.cl = cl
	markAddBatches(ops)
	for i := 0; i < len(ops); i++ {
		if err := m.do(ops, i); err != nil {
			code := ExitFailure
			if m.busy && !m.test {
				code = ExitUsage
			}
			return exitStatus(code)
		}
	}
	if m.test && m.count == 0 {
		return exitStatus(ExitUsage)
	}
	if stop {
		cl.Close()
		return runStop(env, []string{m.mddev}, false, false, runDir, stopTimeout, m.verb)
	}
	return nil
}

var errAbort = errors.New("manage: aborted")

func (m *manageRun) errf(format string, a ...any) {
	fmt.Fprintf(m.env.Stderr, "mdtool: "+format, a...)
}

func (m *manageRun) call(req daemon.Request) (*daemon.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return m.cl.Call(ctx, req)
}

func (m *manageRun) status() (*daemon.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return m.cl.Status(ctx)
}

// expand turns a keyword (failed, faulty, detached, a kernel name) into
// the member paths it stands for; ok false when dev is a path.
func (m *manageRun) expand(op *manageOp) (paths []string, ok bool, err error) {
	dev := op.dev
	switch {
	case dev == "failed" || dev == "faulty":
		if op.disp != dispReAdd && op.disp != dispRemove {
			m.errf("%s only meaningful with -r or --re-add, not -%c\n", dev, op.disp)
			return nil, true, errAbort
		}
	case dev == "detached":
		if op.disp != dispRemove && op.disp != dispFail {
			m.errf("%s only meaningful with -r of -f, not -%c\n", dev, op.disp)
			return nil, true, errAbort
		}
	case dev == "missing":
		if op.disp != dispReAdd {
			m.errf("'missing' only meaningful with --re-add\n")
			return nil, true, errAbort
		}
		m.errf("no devices to scan for missing members.\n")
		return nil, true, nil
	case !strings.Contains(dev, "/") && !strings.Contains(dev, ":") && !isFile(dev):
		// A kernel name such as "loop1" (mdadm); an image file in the
		// current directory is a path.
		if op.disp != dispRemove && op.disp != dispFail {
			m.errf("%s only meaningful with -r or -f, not -%c\n", dev, op.disp)
			return nil, true, errAbort
		}
	default:
		return nil, false, nil
	}
	st, err := m.status()
	if err != nil {
		m.errf("cannot get the members of %s: %v\n", m.mddev, err)
		return nil, true, errAbort
	}
	found := false
	for _, ms := range st.Members {
		if ms.Path == "" || ms.State == "missing" {
			continue
		}
		switch dev {
		case "failed", "faulty":
			if ms.State == "faulty" {
				paths = append(paths, ms.Path)
			}
		case "detached":
			if op.disp == dispFail && ms.State == "faulty" {
				continue
			}
			if _, err := os.Stat(ms.Path); errors.Is(err, os.ErrNotExist) {
				paths = append(paths, ms.Path)
			}
		default:
			if filepath.Base(ms.Path) == dev {
				paths = append(paths, ms.Path)
				found = true
			}
		}
	}
	if !found && dev != "failed" && dev != "faulty" && dev != "detached" {
		m.errf("%s does not appear to be a component of %s\n", dev, m.mddev)
		return nil, true, errAbort
	}
	return paths, true, nil
}

// do runs ops[i].
func (m *manageRun) do(ops []*manageOp, i int) error {
	op := ops[i]
	paths, kw, err := m.expand(op)
	if err != nil {
		return err
	}
	if kw {
		for _, p := range paths {
			sub := *op
			sub.dev, sub.abs = p, p
			if err := m.doOne(ops, &sub); err != nil {
				return err
			}
		}
		return nil
	}
	if op.disp != dispWith {
		if _, err := os.Stat(op.abs); err != nil && op.disp != dispRemove && !nbdclient.IsURI(op.abs) {
			m.errf("stat failed for %s: %s\n", op.dev, openReason(err))
			return errAbort
		}
	}
	return m.doOne(ops, op)
}

func (m *manageRun) doOne(ops []*manageOp, op *manageOp) error {
	quiet := m.verb < 0
	switch op.disp {
	case dispFail:
		_, err := m.call(daemon.Request{Op: daemon.OpFail, Device: op.abs})
		if err != nil {
			code, reason := opFailure(err)
			switch code {
			case daemon.CodeBusy:
				m.busy = true
			case daemon.CodeNotMember:
				reason = "No such device"
			}
			if m.unsupported(op, code, err) {
				return errAbort
			}
			m.errf("set device faulty failed for %s:  %s\n", op.dev, reason)
			return errAbort
		}
		m.count++
		if !quiet {
			m.errf("set %s faulty in %s\n", op.dev, m.mddev)
		}
	case dispRemove:
		_, err := m.call(daemon.Request{Op: daemon.OpRemove, Device: op.abs})
		if err != nil {
			code, reason := opFailure(err)
			if code == daemon.CodeNotMember {
				reason = "No such device or address"
			}
			if m.unsupported(op, code, err) {
				return errAbort
			}
			m.errf("hot remove failed for %s: %s\n", op.dev, reason)
			return errAbort
		}
		m.count++
		// Printed under --quiet too: mdadm 4.2 passes Manage_remove its
		// verbose and force arguments swapped, so it tests --force here.
		m.errf("hot removed %s from %s\n", op.dev, m.mddev)
	case dispAdd, dispAddSpare, dispReAdd:
		return m.add(op)
	case dispReplace:
		return m.replace(ops, op)
	case dispWith:
		if !op.paired {
			m.errf("No matching --replace device for --with %s\n", op.dev)
			return errAbort
		}
		// Done together with its --replace.
	}
	return nil
}

func (m *manageRun) add(op *manageOp) error {
	if err := m.check090Size(op); err != nil {
		return err
	}
	req := daemon.Request{Op: daemon.OpAdd, Device: op.abs, Force: m.force, WriteMostly: op.writeMostly, More: op.moreAdds,
		FailFast: op.failFast > 0, NoFailFast: op.failFast < 0}
	switch op.disp {
	case dispAddSpare:
		req.Op = daemon.OpAddSpare
	case dispReAdd:
		req.Op = daemon.OpReAdd
	}
	resp, err := m.call(req)
	if err != nil {
		code, reason := opFailure(err)
		var oe *daemon.OpError
		errors.As(err, &oe)
		number := 0
		if oe != nil && oe.Resp != nil {
			number = oe.Resp.Number
		}
		switch code {
		case daemon.CodeOpen:
			m.errf("Cannot open %s: %s\n", op.dev, reason)
		case daemon.CodeHoldsData:
			if oe != nil && oe.Resp != nil {
				for _, s := range oe.Resp.Signatures {
					m.errf("%s appears to contain %s\n", op.dev, s)
				}
			}
			m.errf("add aborted: %s holds data; use --force to add it anyway\n", op.dev)
		case daemon.CodeTooSmall:
			m.errf("%s not large enough to join array\n", op.dev)
		case daemon.CodeNotReAddable:
			m.errf("--re-add for %s to %s is not possible\n", op.dev, m.mddev)
		case daemon.CodeArrayFailed:
			m.errf("%s has failed so using --add cannot work and might destroy\n", m.mddev)
			m.errf("data on %s.  You should stop the array and re-assemble it.\n", op.dev)
		case daemon.CodeUnsupported:
			m.unsupported(op, code, err)
		default:
			if code == daemon.CodeReadOnly {
				reason = "Read-only file system"
			}
			m.errf("add new device failed for %s as %d: %s\n", op.dev, number, reason)
		}
		return errAbort
	}
	m.count++
	if m.verb >= 0 {
		switch resp.Result {
		case daemon.ResultReAdded:
			m.errf("re-added %s\n", op.dev)
		case daemon.ResultReAddedFaulty:
			m.errf("re-add %s to %s succeed\n", op.dev, m.name)
		default:
			m.errf("added %s\n", op.dev)
		}
	}
	return nil
}

func (m *manageRun) replace(ops []*manageOp, op *manageOp) error {
	req := daemon.Request{Op: daemon.OpReplace, Device: op.abs}
	var with *manageOp
	if op.with >= 0 {
		with = ops[op.with]
		req.With = with.abs
	}
	resp, err := m.call(req)
	if err != nil {
		code, _ := opFailure(err)
		switch code {
		case daemon.CodeNotMember:
			m.errf("%s not found in %s so cannot --replace it\n", op.dev, m.mddev)
		case daemon.CodeNotActive:
			m.errf("%s is not active and so cannot be replaced.\n", op.dev)
		case daemon.CodeWithFaulty:
			m.errf("%s is faulty and cannot be a replacement\n", with.dev)
		case daemon.CodeWithActive:
			m.errf("%s is active and cannot be a replacement\n", with.dev)
		case daemon.CodeWithNotMember:
			m.errf("%s not found in %s so cannot make it preferred replacement\n", with.dev, m.mddev)
		case daemon.CodeUnsupported:
			m.unsupported(op, code, err)
		default:
			m.errf("Failed to request replacement for %s\n", op.dev)
		}
		return errAbort
	}
	m.count++
	if m.verb >= 0 {
		m.errf("Marked %s (device %d in %s) for replacement\n", op.dev, resp.Role, m.mddev)
		if with != nil {
			m.errf("Marked %s in %s as replacement for device %d\n", with.dev, m.mddev, resp.Role)
		}
	}
	return nil
}

// unsupported reports an operation mdtool's engine cannot do yet.
func (m *manageRun) unsupported(op *manageOp, code string, err error) bool {
	if code != daemon.CodeUnsupported {
		return false
	}
	m.errf("%s: %s is not supported by mdtool yet: %v\n", op.dev, dispOption(op.disp), err)
	return true
}

func dispOption(d byte) string {
	switch d {
	case dispAdd:
		return "--add"
	case dispAddSpare:
		return "--add-spare"
	case dispReAdd:
		return "--re-add"
	case dispRemove:
		return "--remove"
	case dispFail:
		return "--fail"
	case dispReplace:
		return "--replace"
	}
	return "--with"
}

// opFailure returns the code of a failed request and strerror's text for
// it.
func opFailure(err error) (code, reason string) {
	var oe *daemon.OpError
	if !errors.As(err, &oe) {
		return daemon.CodeFailed, err.Error()
	}
	switch oe.Code {
	case daemon.CodeBusy:
		return oe.Code, "Device or resource busy"
	case daemon.CodeReadOnly:
		return oe.Code, "Read-only file system"
	case daemon.CodeInvalid:
		return oe.Code, "Invalid argument"
	case daemon.CodeNoJournal:
		return oe.Code, "No such device"
	}
	return oe.Code, oe.Msg
}

// isFile reports whether name is an existing file or device (not a
// directory).
func isFile(name string) bool {
	fi, err := os.Stat(name)
	return err == nil && !fi.IsDir()
}
