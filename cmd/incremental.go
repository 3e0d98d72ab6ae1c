package cmd

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"mdtool/internal/daemon"
	"mdtool/internal/mdadm/plan"
	"mdtool/ioctl"
	"mdtool/superblock"
)

const incrementalLong = `Add one device to the array it belongs to, as "mdadm --incremental" (-I)
does from udev rules: the members of an array arrive one by one, and the
array starts when every member its superblocks count as working is there
(with --run: as soon as enough are there to run degraded):

  mdtool -I /dev/vdb   ->  mdtool: /dev/vdb attached to /dev/md/data, not enough to start (1).
  mdtool -I /dev/vdc   ->  mdtool: /dev/vdc attached to /dev/md/data, which has been started.

The array is named as auto-assembly names it: the ARRAY line of mdadm.conf
with its UUID, else /dev/md/NAME from its name. mdadm keeps the members that
arrived in an inactive md array and lists it in its map file; mdtool keeps
them in the run directory (--run-dir, MDTOOL_RUN_DIR, default /run/mdtool):
"map" holds a line per waiting array as mdadm's map file does (name,
metadata, UUID, md device), NAME.members the members that arrived. Once
started, the array is served by a daemon as "assemble" starts it.

EXIT STATUS
  0  the device was attached (the array started or waits for more members)
  1  the device holds no md superblock, or the array failed to start
  2  the device cannot join: its array runs already, or it does not match
     the members that arrived before it`

type incrementalOptions struct {
	run    bool
	export bool // -Y: udev's key=value lines instead of messages
	runDir string
	config string
}

func newIncrementalCmd(env *Env) *cobra.Command {
	o := &incrementalOptions{}
	c := &cobra.Command{
		Use:   "incremental [flags] DEVICE",
		Short: "Add a device to its array, starting it when complete (mdadm --incremental)",
		Long:  incrementalLong,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("--incremental requires exactly one device")
			}
			hh, _ := c.Flags().GetString("homehost")
			verbose := 0
			if q, _ := c.Flags().GetBool("quiet"); q {
				verbose = -1
			}
			return runIncremental(env, o, args[0], hh, flagChanged(c.Flags(), "homehost"), verbose)
		},
	}
	f := c.Flags()
	f.BoolVarP(&o.run, "run", "R", false, "start the array as soon as it can run, degraded")
	f.BoolVarP(&o.export, "export", "Y", false, "print MD_DEVICE, MD_DEVNAME, MD_FOREIGN and MD_STARTED for udev instead of messages")
	f.Bool("offroot", false, "accepted for mdadm compatibility (udev rules pass it)")
	_ = f.MarkHidden("offroot")
	f.StringVarP(&o.config, "config", "c", "", "mdadm.conf to read (default /etc/mdadm/mdadm.conf, then /etc/mdadm.conf)")
	addRunDirFlag(f, &o.runDir)
	return c
}

// incr is one incremental run.
type incr struct {
	env     *Env
	o       *incrementalOptions
	as      *assembler
	verbose int
}

func (in *incr) errf(format string, a ...any) {
	if in.verbose >= 0 {
		fmt.Fprintf(in.env.Stderr, "mdtool: "+format, a...)
	}
}

func runIncremental(env *Env, o *incrementalOptions, dev, homehostFlag string, homehostGiven bool, verbose int) error {
	conf, err := LoadMdadmConf(o.config)
	if err != nil {
		return exitf(ExitFailure, "%v", err)
	}
	as := &assembler{env: env, o: &assembleOptions{}, conf: conf, verbose: verbose, used: map[string]bool{}}
	as.o.srv.runDir = o.runDir
	as.homehost = ResolveHomeHost(homehostFlag, homehostGiven, conf, env.Hostname)
	in := &incr{env: env, o: o, as: as, verbose: verbose}
	if abs, err := filepath.Abs(dev); err == nil {
		dev = abs
	}
	d, reason := probeCandidate(dev)
	if d == nil {
		if r, ok := strings.CutPrefix(reason, "cannot open device "); ok {
			in.errf("cannot open %s.\n", r)
		} else if strings.HasSuffix(reason, "regular file.") || strings.HasPrefix(reason, "cannot assemble") {
			in.errf("%s\n", reason)
		} else {
			in.errf("no recognisable superblock on %s.\n", dev)
		}
		return exitStatus(ExitFailure)
	}
	if !confPermits(conf, dev) {
		in.errf("%s not permitted by mdadm.conf.\n", dev)
		return exitStatus(ExitFailure)
	}
	mddev := in.mdDevice(d.sb)
	if mddev == "" {
		in.errf("array containing %s is explicitly ignored by mdadm.conf\n", dev)
		return exitStatus(ExitFailure)
	}
	if err := os.MkdirAll(o.runDir, 0o755); err != nil {
		return exitf(ExitFailure, "%v", err)
	}
	// Incremental.c reopens the device with O_EXCL before it adds it:
	// a member an array runs on is busy.
	f, err := ioctl.OpenMember(dev, ioctl.OpenOptions{Exclusive: true})
	if err != nil {
		reason := strerror(err)
		if errors.Is(err, syscall.EBUSY) {
			reason = strerror(syscall.EBUSY)
		}
		in.errf("cannot reopen %s: %s.\n", dev, reason)
		return exitStatus(ExitFailure)
	}
	f.Close()
	unlock, err := lockMap(o.runDir)
	if err != nil {
		in.errf("failed to get exclusive lock on mapfile\n")
	} else {
		defer unlock()
	}
	return in.attach(d, mddev)
}

// mdDevice is the md device for the array of sb: the ARRAY line with its
// UUID, else the auto-assembly name ("" for an ARRAY <ignore>).
func (in *incr) mdDevice(sb *superblock.Superblock) string {
	for _, a := range in.as.conf.Arrays {
		if a.UUIDSet && a.UUID == sb.SetUUID {
			if strings.EqualFold(a.Device, "<ignore>") {
				return ""
			}
			if a.Device != "" {
				return a.Device
			}
		}
	}
	if e := findMapEntry(in.o.runDir, sb.SetUUID); e != nil {
		return e.path
	}
	return in.as.autoName(sb)
}

// confMatch reports whether an ARRAY line of mdadm.conf has sb's UUID.
func (in *incr) confMatch(sb *superblock.Superblock) bool {
	for _, a := range in.as.conf.Arrays {
		if a.UUIDSet && a.UUID == sb.SetUUID {
			return true
		}
	}
	return false
}

// attach adds d to the waiting members of its array and starts the array
// when it can (Incremental.c steps 4 to 7).
func (in *incr) attach(d *asmDev, mddev string) error {
	if active := in.as.activeWithUUID(d.sb.SetUUID); active != "" {
		in.errf("not adding %s to active array (without --run) %s\n", d.path, active)
		return exitStatus(ExitUsage)
	}
	name, err := daemon.ArrayName(mddev)
	if err != nil {
		return exitf(ExitFailure, "%s is not a usable md device name", mddev)
	}
	members := readMemberList(in.o.runDir, name)
	var devs []*asmDev
	for _, p := range members {
		if p == d.path {
			continue
		}
		if m, _ := probeCandidate(p); m != nil && m.sb.SetUUID == d.sb.SetUUID {
			devs = append(devs, m)
		}
	}
	if len(devs) > 0 && (devs[0].sb.Level != d.sb.Level || devs[0].sb.RaidDisks != d.sb.RaidDisks) {
		in.errf("unexpected difference between %s and %s.\n", mddev, d.path)
		return exitStatus(ExitUsage)
	}
	devs = append(devs, d)
	paths := make([]string, len(devs))
	for i, m := range devs {
		paths[i] = m.path
	}
	if err := writeMemberList(in.o.runDir, name, paths); err != nil {
		return exitf(ExitFailure, "%v", err)
	}
	if err := putMapEntry(in.o.runDir, mapEntry{name: name, uuid: d.sb.SetUUID, path: mddev}); err != nil {
		return exitf(ExitFailure, "%v", err)
	}
	if in.o.export {
		foreign := "no"
		if matchHome(d.sb, in.as.homehost) != 1 && !strings.HasPrefix(d.sb.Name(), "any:") && !in.confMatch(d.sb) {
			foreign = "yes"
		}
		fmt.Fprintf(in.env.Stdout, "MD_DEVICE=%s\nMD_DEVNAME=%s\nMD_FOREIGN=%s\n", name, strings.TrimPrefix(mddev, "/dev/md/"), foreign)
	}
	active, best, avail := countActive(devs)
	clean := best.sb.ResyncOffset == superblock.MaxSector
	if !plan.Enough(int(best.sb.Level), int(best.sb.RaidDisks), best.sb.Layout, clean, avail) {
		if in.o.export {
			fmt.Fprintf(in.env.Stdout, "MD_STARTED=no\n")
			return nil
		}
		in.errf("%s attached to %s, not enough to start (%d).\n", d.path, mddev, active)
		return nil
	}
	journalMissing := best.sb.FeatureMap&superblock.FeatureJournal != 0 && !journalClean(devs, best)
	if !in.o.run && (journalMissing || active < workingDisks(best.sb)) {
		switch {
		case in.o.export:
			fmt.Fprintf(in.env.Stdout, "MD_STARTED=unsafe\n")
		case journalMissing:
			in.errf("Journal device is missing, not safe to start yet.\n")
		default:
			in.errf("%s attached to %s, not enough to start safely.\n", d.path, mddev)
		}
		return nil
	}
	if journalMissing {
		in.errf("Trying to run with missing journal device\n")
	}
	// The assembly takes the waiting members over (an -A given them
	// would otherwise merge them); they wait again if it fails.
	dropMapEntry(in.o.runDir, name)
	if err := in.start(mddev, name, paths); err != nil {
		in.errf("%s attached to %s, but failed to start: %v.\n", d.path, mddev, err)
		_ = writeMemberList(in.o.runDir, name, paths)
		_ = putMapEntry(in.o.runDir, mapEntry{name: name, uuid: d.sb.SetUUID, path: mddev})
		return exitStatus(ExitFailure)
	}
	if in.o.export {
		fmt.Fprintf(in.env.Stdout, "MD_STARTED=yes\n")
		return nil
	}
	in.errf("%s attached to %s, which has been started.\n", d.path, mddev)
	return nil
}

// start assembles the waiting members as "assemble --run" does, in a
// background daemon.
func (in *incr) start(mddev, name string, paths []string) error {
	args := []string{"assemble", "--foreground", "--quiet", "--run", "--incremental-start", "--run-dir", in.o.runDir}
	if in.o.config != "" {
		args = append(args, "--config", in.o.config)
	}
	args = append(append(args, "--", mddev), paths...)
	code, err := spawnSelf(in.env, args)
	var ce *daemon.ChildExitError
	if errors.As(err, &ce) {
		return fmt.Errorf("assembly failed (exit %d)", ce.Code)
	}
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("assembly failed (exit %d)", code)
	}
	return nil
}

// journalClean is count_active's journal_clean: a journal device at
// most one event behind the best member (unsigned, as mdadm compares).
func journalClean(devs []*asmDev, best *asmDev) bool {
	var maxJournal uint64
	for _, d := range devs {
		if d.raidDisk == int(superblock.RoleJournal) && d.events > maxJournal {
			maxJournal = d.events
		}
	}
	return maxJournal >= best.events-1
}

// countActive is Incremental.c's count_active: how many roles the
// freshest in-sync members fill (an event behind counts too), after
// dropping members that think the best one failed; the member with the
// best superblock; which roles are available.
func countActive(devs []*asmDev) (cnt int, best *asmDev, avail []bool) {
	var maxEvents uint64
	rd := int(devs[0].sb.RaidDisks)
	if rd > superblock.RoleMax {
		rd = superblock.RoleMax
	}
	av := make([]int, rd)
	bestOf := make([]*asmDev, rd)
	replcnt := 0
	for _, d := range devs {
		if d.state&mdDiskSync == 0 {
			if d.state&mdDiskReplacement != 0 {
				replcnt++
			}
			continue
		}
		r := d.raidDisk
		if r < 0 || r >= rd {
			continue
		}
		switch {
		case best == nil:
			maxEvents, best = d.events, d
			av[r], bestOf[r] = 2, d
		case d.events == maxEvents:
			av[r], bestOf[r] = 2, d
		case d.events == maxEvents-1:
			if av[r] == 0 {
				av[r], bestOf[r] = 1, d
			}
		case d.events < maxEvents-1:
		case d.events == maxEvents+1:
			maxEvents, best = d.events, d
			for i := range av {
				if av[i] > 0 {
					av[i]--
				}
			}
			av[r], bestOf[r] = 2, d
		default:
			maxEvents, best = d.events, d
			clear(av)
			av[r], bestOf[r] = 2, d
		}
	}
	if best == nil {
		best = devs[0]
	}
	b := 0
	for b < rd && av[b] != 2 {
		b++
	}
	avail = make([]bool, rd)
	for i := 0; i < rd; i++ {
		if i != b && av[i] > 0 && b < rd && (b >= len(bestOf[i].devmap) || !bestOf[i].devmap[b]) {
			av[i] = 0
		}
		if av[i] > 0 {
			cnt++
			avail[i] = true
		}
	}
	return cnt + replcnt, best, avail
}

// The run directory's map: mdadm's map file (/run/mdadm/map) for the
// arrays that wait for members, one line per array: run-directory name,
// metadata version, UUID, md device; NAME.members lists the members that
// arrived, one path per line.

type mapEntry struct {
	name string
	uuid [16]byte
	path string
}

func mapPath(runDir string) string { return filepath.Join(runDir, "map") }

func membersPath(runDir, name string) string { return filepath.Join(runDir, name+".members") }

// lockMap takes the map's lock (mdadm's map_lock).
func lockMap(runDir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(runDir, "map.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

func readMap(runDir string) []mapEntry {
	f, err := os.Open(mapPath(runDir))
	if err != nil {
		return nil
	}
	defer f.Close()
	var es []mapEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		w := strings.Fields(sc.Text())
		if len(w) != 4 {
			continue
		}
		u, ok := parseUUIDText(w[2])
		if !ok {
			continue
		}
		es = append(es, mapEntry{name: w[0], uuid: u, path: w[3]})
	}
	return es
}

func writeMap(runDir string, es []mapEntry) error {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "%s 1.2 %s %s\n", e.name, uuidText(e.uuid, ':'), e.path)
	}
	tmp := mapPath(runDir) + ".new"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, mapPath(runDir))
}

func findMapEntry(runDir string, uuid [16]byte) *mapEntry {
	for _, e := range readMap(runDir) {
		if e.uuid == uuid {
			return &e
		}
	}
	return nil
}

// findMapEntryNamed is the waiting set of run-directory name name.
func findMapEntryNamed(runDir, name string) *mapEntry {
	for _, e := range readMap(runDir) {
		if e.name == name {
			return &e
		}
	}
	return nil
}

func putMapEntry(runDir string, e mapEntry) error {
	es := []mapEntry{e}
	for _, o := range readMap(runDir) {
		if o.name != e.name && o.uuid != e.uuid {
			es = append(es, o)
		}
	}
	return writeMap(runDir, es)
}

func dropMapEntry(runDir, name string) {
	var es []mapEntry
	for _, o := range readMap(runDir) {
		if o.name != name {
			es = append(es, o)
		}
	}
	writeMap(runDir, es)
	os.Remove(membersPath(runDir, name))
}

func readMemberList(runDir, name string) []string {
	b, err := os.ReadFile(membersPath(runDir, name))
	if err != nil {
		return nil
	}
	var ps []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			ps = append(ps, l)
		}
	}
	return ps
}

// confPermits is conf_test_dev: without DEVICE lines every device may be
// an array member; with them, the devices they name.
func confPermits(conf *MdadmConf, dev string) bool {
	if len(conf.Devices) == 0 {
		return true
	}
	for _, p := range conf.DeviceList() {
		if p == dev || sameFile(p, dev) {
			return true
		}
	}
	return false
}

func writeMemberList(runDir, name string, paths []string) error {
	return os.WriteFile(membersPath(runDir, name), []byte(strings.Join(paths, "\n")+"\n"), 0o600)
}
