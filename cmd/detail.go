package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"mdtool/engine"
	"mdtool/internal/daemon"
	"mdtool/internal/mdadm/plan"
	"mdtool/superblock"
)

const detailLong = `Print the details of running arrays, as "mdadm --detail" (-D) prints them.

MD-DEVICE names an array served by an mdtool daemon (see assemble):
/dev/md/NAME, /dev/mdN, NAME or mdN. The daemon is asked over its control
socket in the run directory (--run-dir, MDTOOL_RUN_DIR, default
/run/mdtool). The text is mdadm 4.2's, field for field: Version, Creation
Time, Raid Level, Array Size, Used Dev Size, Raid Devices, Total Devices,
Persistence, Intent Bitmap, Update Time, State (clean/active, degraded,
FAILED), Active/Working/Failed/Spare Devices, Layout, Chunk Size,
Consistency Policy, Name, UUID, Events and the device table. Members that
are image files show major and minor 0. While a resync, recovery, check or
repair runs, State says so (", resyncing", ", recovering", ", checking") and
mdadm's "Rebuild Status", "Resync Status" or "Check Status : N% complete"
line is printed; a spare being rebuilt shows as "spare rebuilding" in its
role.

mdtool's additions to the text: under the Status line, a "Progress" line in
the form of /proc/mdstat's, with speed and time left:

          Progress : [====>................]  recovery = 22.1% (14532/65472) finish=0.4min speed=2000K/sec

a "Failed Reason" line under State when the array has failed beyond its
redundancy and refuses writes; and after the device table, where the array
is exported (NBD socket, TCP address, FUSE file, metrics). --brief, --export
and --test print exactly what mdadm prints.

  --brief (-b)    an ARRAY line for mdadm.conf (with -v: level=, num-devices=
                  and a devices= line)
  --scan (-s)     every running array, as ARRAY lines
  --export (-Y)   KEY=VALUE lines, as for udev (MD_LEVEL, MD_DEVICES,
                  MD_METADATA, MD_UUID, MD_DEVNAME, MD_NAME, MD_DEVICE_*)
  --json          one JSON document: {"arrays": [...]}, each array with the
                  fields above plus "exports", "daemon", "failed_reason",
                  "journal_mode" (write-through or write-back, md's
                  journal_mode of an array with a write journal) and
                  "sync": action, status, done_sectors, total_sectors,
                  percent, complete, speed_kib_per_second, finish_seconds,
                  progress, mismatch_cnt, last_action, written_sectors,
                  checkpoint_sectors, speed_min/max_kib_per_second
  --test (-t)     exit status tells the array's health (below)

EXIT STATUS
  0  success (with --test: the array is fully working)
  1  an array is not running or cannot be asked (with --test: degraded)
  2  (with --test) the array is unusable: too many members missing
  4  (with --test) the array's state could not be read`

type detailOptions struct {
	brief, scan, export, json, test, noDevices bool
	verbose                                    int
	runDir                                     string
	homehost                                   string
	homehostGiven                              bool
	config                                     string
}

func newDetailCmd(env *Env) *cobra.Command {
	o := &detailOptions{}
	c := &cobra.Command{
		Use:   "detail [flags] MD-DEVICE...",
		Short: "Print the details of running arrays (mdadm --detail)",
		Long:  detailLong,
		RunE: func(c *cobra.Command, args []string) error {
			o.verbose = verbosityOf(c)
			o.homehost, _ = c.Flags().GetString("homehost")
			o.homehostGiven = flagChanged(c.Flags(), "homehost")
			return runDetail(env, o, args)
		},
	}
	f := c.Flags()
	f.BoolVarP(&o.brief, "brief", "b", false, "print an ARRAY line for mdadm.conf")
	f.BoolVarP(&o.scan, "scan", "s", false, "every running array, as ARRAY lines")
	f.BoolVarP(&o.export, "export", "Y", false, "print KEY=VALUE lines (for udev)")
	f.BoolVar(&o.json, "json", false, "print one JSON document")
	f.BoolVarP(&o.test, "test", "t", false, "exit status 1 when degraded, 2 when unusable")
	f.BoolVar(&o.noDevices, "no-devices", false, "leave the member devices out")
	f.StringVarP(&o.config, "config", "c", "", "mdadm.conf to read (HOMEHOST)")
	addRunDirFlag(f, &o.runDir)
	return c
}

// queryStatus asks the daemon of array name for its status.
func queryStatus(runDir, name string) (*daemon.Status, error) {
	cl, err := daemon.Dial(runDir, name)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return cl.Status(ctx)
}

func runDetail(env *Env, o *detailOptions, args []string) error {
	if len(args) == 0 && !o.scan {
		return usagef("No devices given.")
	}
	var conf *MdadmConf
	if !o.homehostGiven {
		conf, _ = LoadMdadmConf(o.config)
	}
	homehost := ResolveHomeHost(o.homehost, o.homehostGiven, conf, env.Hostname)
	devs := args
	if len(devs) == 0 {
		names, err := daemon.Names(o.runDir)
		if err != nil {
			return exitf(ExitFailure, "%v", err)
		}
		for _, n := range names {
			devs = append(devs, n)
		}
		if !o.export && !o.json {
			o.brief = true
		}
	}
	rv := ExitOK
	var docs []*detailJSON
	for _, dev := range devs {
		var st *daemon.Status
		var err error
		if len(args) == 0 {
			st, err = statusByName(o.runDir, dev) // a run-directory name
		} else {
			st, err = detailStatus(o.runDir, dev)
		}
		if err != nil && len(args) > 0 && !o.export && !o.json && !o.brief && !o.test {
			if ws := waitingSet(o.runDir, dev); len(ws) > 0 && writeInactive(env.Stdout, dev, ws, homehost) {
				continue
			}
		}
		if err != nil {
			fmt.Fprintf(env.Stderr, "mdtool: cannot open %s: %v\n", dev, err)
			if o.test {
				rv |= ExitTestNoArray
			} else {
				rv |= ExitFailure
			}
			continue
		}
		if len(args) == 0 {
			dev = st.Device
		}
		d, err := newDetailView(st, homehost)
		if err != nil {
			fmt.Fprintf(env.Stderr, "mdtool: cannot get array detail for %s: %v\n", dev, err)
			if o.test {
				rv |= ExitTestNoArray
			} else {
				rv |= ExitFailure
			}
			continue
		}
		switch {
		case o.json:
			docs = append(docs, d.json(dev))
		case o.export:
			d.writeExport(env.Stdout, o.noDevices)
		case o.brief:
			d.writeBrief(env.Stdout, dev, o.verbose)
		default:
			d.writeDetail(env.Stdout, dev, o.noDevices)
		}
		if o.test {
			rv |= d.testStatus()
		}
	}
	if o.json {
		if docs == nil {
			docs = []*detailJSON{}
		}
		b, err := json.MarshalIndent(map[string]any{"arrays": docs}, "", "  ")
		if err != nil {
			return exitf(ExitFailure, "%v", err)
		}
		env.Stdout.Write(append(jsonSafe(b), '\n'))
	}
	return exitStatus(rv)
}

// detailStatus finds the array dev names and asks its daemon.
func detailStatus(runDir, dev string) (*daemon.Status, error) {
	name, err := daemon.ArrayName(dev)
	if err != nil {
		return nil, errors.New("not an md device name")
	}
	st, err := statusByName(runDir, name)
	if err != nil {
		// The block device (/dev/nbd0) or a link to it.
		if n, ok := daemon.NameForDevice(runDir, dev); ok {
			return statusByName(runDir, n)
		}
	}
	return st, err
}

// statusByName asks the daemon of the run-directory entry name (as
// daemon.Names lists it: already escaped, not to be passed through
// daemon.ArrayName again).
func statusByName(runDir, name string) (*daemon.Status, error) {
	st, err := queryStatus(runDir, name)
	if errors.Is(err, daemon.ErrNotRunning) {
		// mdadm opens the md device node, which an array that is not
		// running does not have: "cannot open /dev/md5: No such file or
		// directory".
		return nil, errors.New("No such file or directory")
	}
	return st, err
}

// Disk state bits (md_p.h's MD_DISK_*), as the kernel's GET_DISK_INFO
// and mdadm's getinfo_super1 report them.
const (
	mdDiskFaulty      = 1 << 0
	mdDiskActive      = 1 << 1
	mdDiskSync        = 1 << 2
	mdDiskRemoved     = 1 << 3
	mdDiskWriteMostly = 1 << 9
	mdDiskFailFast    = 1 << 10
	mdDiskReplacement = 1 << 17
	mdDiskJournal     = 1 << 18
)

// detailDisk is one row of the device table (mdu_disk_info_t plus the
// path).
type detailDisk struct {
	number       int // -1: none
	major, minor uint32
	raidDisk     int
	state        int
	path         string
}

// detailView is what mdadm's Detail() gathers: GET_ARRAY_INFO, the disk
// table, and the superblock.
type detailView struct {
	st       *daemon.Status
	sb       *superblock.Superblock
	homehost string
	disks    []detailDisk // slots (2 per raid disk) then the others
	extra    int          // index of the first non-slot disk
	avail    []bool
	// GET_ARRAY_INFO counts.
	nr, active, working, failed, spare int
}

func newDetailView(st *daemon.Status, homehost string) (*detailView, error) {
	sb, err := detailSuper(st)
	if sb == nil {
		if err == nil {
			err = errors.New("no superblock")
		}
		return nil, err
	}
	d := &detailView{st: reshapeSyncUnits(st, sb), sb: sb, homehost: homehost}
	rd := st.RaidDisks
	d.disks = make([]detailDisk, rd*2)
	for i := range d.disks {
		d.disks[i] = detailDisk{number: -1, raidDisk: i / 2, state: mdDiskRemoved}
	}
	var others []detailDisk
	for _, m := range st.Members {
		if m.State == "missing" || m.Path == "" {
			continue
		}
		d.nr++
		disk := detailDisk{number: m.DevNumber, major: m.Major, minor: m.Minor, raidDisk: m.Role, path: m.Path}
		switch m.State {
		case "faulty":
			d.failed++
			disk.state = mdDiskFaulty
			disk.raidDisk = -1
		case "in_sync":
			d.working++
			d.active++
			disk.state = mdDiskActive | mdDiskSync
		case "journal":
			// md's get_array_info counts the journal as working, not as
			// a spare
			d.working++
			disk.state = mdDiskJournal
			disk.raidDisk = -1
		default: // recovering, spare
			d.working++
			d.spare++
		}
		if m.State == "spare" {
			disk.raidDisk = -1
		}
		if m.WriteMostly {
			disk.state |= mdDiskWriteMostly
		}
		if m.FailFast {
			disk.state |= mdDiskFailFast
		}
		switch {
		case disk.raidDisk >= 0 && disk.raidDisk < rd && d.disks[disk.raidDisk*2].state == mdDiskRemoved:
			d.disks[disk.raidDisk*2] = disk
		case disk.raidDisk >= 0 && disk.raidDisk < rd && d.disks[disk.raidDisk*2+1].state == mdDiskRemoved:
			d.disks[disk.raidDisk*2+1] = disk
		default:
			others = append(others, disk)
		}
	}
	// The kernel lists the rest by descriptor number.
	sort.SliceStable(others, func(i, j int) bool { return others[i].number < others[j].number })
	d.extra = len(d.disks)
	d.disks = append(d.disks, others...)
	d.avail = make([]bool, rd)
	for i := 0; i < rd; i++ {
		if d.disks[i*2].state&mdDiskSync != 0 || d.disks[i*2+1].state&mdDiskSync != 0 {
			d.avail[i] = true
		}
	}
	return d, nil
}

// present reports whether a table entry is a device (not an empty slot).
func (dd detailDisk) present() bool { return dd.path != "" }

func (d *detailView) availCount() int {
	n := 0
	for _, a := range d.avail {
		if a {
			n++
		}
	}
	return n
}

// testStatus is --test's contribution to the exit status.
func (d *detailView) testStatus() ExitCode {
	rv := ExitOK
	if d.availCount() < d.st.RaidDisks {
		rv |= ExitTestDegraded
	}
	if !plan.Enough(d.st.Level, d.st.RaidDisks, uint32(d.st.Layout), true, d.avail) {
		rv = ExitTestFailed
	}
	return rv
}

func (d *detailView) version() string {
	if d.st.NotPersistent {
		return "" // sysfs metadata_version "none": mdadm prints its empty text_version
	}
	if d.st.SuperMinor == engine.Minor090 {
		return "0.90"
	}
	return fmt.Sprintf("1.%d", d.st.SuperMinor)
}

// arrayState is the State line's value (without the trailing space).
func (d *detailView) arrayState() []string {
	st := d.st
	var words []string
	switch {
	case !st.Clean:
		words = append(words, "active")
	case st.Level == superblock.LevelRAID0 || st.Level == superblock.LevelLinear:
		// mdadm prints the sysfs array_state for raid0 and linear.
		if st.ReadOnly {
			words = append(words, "readonly")
		} else {
			words = append(words, "clean")
		}
	default:
		words = append(words, "clean")
	}
	switch {
	case d.availCount() == st.RaidDisks:
	case !plan.Enough(st.Level, st.RaidDisks, uint32(st.Layout), true, d.avail):
		words = append(words, "FAILED")
	default:
		words = append(words, "degraded")
	}
	if _, w, _, ok := syncWords(st.SyncAction); ok && syncRunning(st) {
		words = append(words, w)
	}
	if st.Size == 0 {
		words = append(words, "Not Started")
	}
	return words
}

func (d *detailView) consistencyPolicy() string {
	switch {
	case d.sb.FeatureMap&superblock.FeatureJournal != 0:
		return "journal"
	case d.st.Bitmap:
		return "bitmap"
	case d.st.Level <= 0:
		return "none"
	}
	return "resync"
}

func (d *detailView) local() bool {
	l := len(d.homehost)
	return l > 0 && l < 32 && d.sb.SetName[l] == ':' && string(d.sb.SetName[:l]) == d.homehost
}

// setName32 is "%.32s" of set_name.
func (d *detailView) setName32() string { return string(cString(d.sb.SetName[:])) }

// writeDetail prints mdadm --detail's text.
func (d *detailView) writeDetail(w io.Writer, dev string, noDevices bool) {
	st, sb := d.st, d.sb
	fmt.Fprintf(w, "%s:\n", escName(dev))
	fmt.Fprintf(w, "           Version : %s\n", d.version())
	if t := sb.CTime.Seconds(); t != 0 {
		fmt.Fprintf(w, "     Creation Time : %s\n", ctime24(t))
	}
	fmt.Fprintf(w, "        Raid Level : %s\n", levelName(st.Level))
	if st.Size > 0 {
		fmt.Fprintf(w, "        Array Size : %d%s\n", st.Size>>10, humanSize(st.Size))
	}
	if st.Level >= 1 {
		fmt.Fprintf(w, "     Used Dev Size : %d%s\n", st.ComponentSectors/2, humanSize(int64(st.ComponentSectors)<<9))
	}
	fmt.Fprintf(w, "      Raid Devices : %d\n", st.RaidDisks)
	fmt.Fprintf(w, "     Total Devices : %d\n", d.nr)
	sb090 := d.sb090()
	if sb090 != nil {
		fmt.Fprintf(w, "   Preferred Minor : %d\n", sb090.MDMinor)
	}
	if !st.NotPersistent { // mdadm 4.2 prints no Persistence line for a build array
		fmt.Fprintf(w, "       Persistence : Superblock is persistent\n")
	}
	fmt.Fprintf(w, "\n")
	switch {
	case st.BitmapFile != "": // GET_BITMAP_FILE's pathname
		fmt.Fprintf(w, "     Intent Bitmap : %s\n\n", st.BitmapFile)
	case st.Bitmap:
		fmt.Fprintf(w, "     Intent Bitmap : Internal\n\n")
	}
	if t := sb.UTime.Seconds(); t != 0 {
		fmt.Fprintf(w, "       Update Time : %s\n", ctime24(t))
	}
	words := d.arrayState()
	fmt.Fprintf(w, "             State : %s \n", strings.Join(words, ", "))
	if st.FailedReason != "" {
		// mdtool's addition: why the array stopped accepting writes.
		fmt.Fprintf(w, "     Failed Reason : %s\n", st.FailedReason)
	}
	fmt.Fprintf(w, "    Active Devices : %d\n", d.active)
	if d.working > 0 {
		fmt.Fprintf(w, "   Working Devices : %d\n", d.working)
	}
	fmt.Fprintf(w, "    Failed Devices : %d\n", d.failed)
	fmt.Fprintf(w, "     Spare Devices : %d\n", d.spare)
	fmt.Fprintf(w, "\n")
	switch st.Level {
	case 5, 6:
		n, _ := layoutName(st.Level, uint32(st.Layout), false)
		fmt.Fprintf(w, "            Layout : %s\n", n)
	case 0:
		if st.Layout != 0 {
			n, _ := layoutName(0, uint32(int32(st.Layout)), true)
			fmt.Fprintf(w, "            Layout : %s\n", n)
		}
	case 10:
		fmt.Fprintf(w, "            Layout :%s\n", r10LayoutText(uint32(st.Layout)))
	}
	switch st.Level {
	case 0, 4, 5, 6, 10:
		if st.ChunkBytes > 0 {
			fmt.Fprintf(w, "        Chunk Size : %dK\n\n", st.ChunkBytes/1024)
		}
	case -1:
		fmt.Fprintf(w, "          Rounding : %dK\n\n", st.ChunkBytes/1024)
	}
	fmt.Fprintf(w, "Consistency Policy : %s\n\n", d.consistencyPolicy())
	if syncRunning(st) {
		_, _, title, _ := syncWords(st.SyncAction)
		fmt.Fprintf(w, "    %7s Status : %d%% complete\n", title, perMille(st.SyncDone, st.SyncTotal)/10)
		// mdtool's addition: /proc/mdstat's progress line.
		fmt.Fprintf(w, "          Progress : %s\n", progressLine(st))
		if d.reshape() == nil {
			fmt.Fprintf(w, "\n")
		}
	}
	if r := d.reshape(); r != nil {
		r.write(w)
	}
	switch {
	case st.NotPersistent: // no superblock: no name, UUID or events
	case sb090 != nil:
		d.writeIdentity090(w, sb090)
	default:
		fmt.Fprintf(w, "              Name : %s", escName(d.setName32()))
		if d.local() {
			fmt.Fprintf(w, "  (local to host %s)", escName(d.homehost))
		}
		fmt.Fprintf(w, "\n              UUID : %s", uuidText(sb.SetUUID, ':'))
		fmt.Fprintf(w, "\n            Events : %d\n\n", sb.Events)
	}
	if !noDevices {
		fmt.Fprintf(w, "    Number   Major   Minor   RaidDevice State\n")
		d.writeTable(w)
	}
	d.writeExports(w)
}

// writeTable prints the device table rows.
func (d *detailView) writeTable(w io.Writer) {
	rd := d.st.RaidDisks
	for i, disk := range d.disks {
		if i >= rd*2 && !disk.present() {
			continue
		}
		if i&1 == 1 && i < rd*2 && !disk.present() {
			continue
		}
		if i == d.extra {
			fmt.Fprintf(w, "\n")
		}
		switch {
		case disk.number < 0 && disk.raidDisk < 0:
			fmt.Fprintf(w, "       -   %5d    %5d        -     ", disk.major, disk.minor)
		case disk.raidDisk < 0:
			fmt.Fprintf(w, "   %5d   %5d    %5d        -     ", disk.number, disk.major, disk.minor)
		case disk.number < 0:
			fmt.Fprintf(w, "       -   %5d    %5d    %5d     ", disk.major, disk.minor, disk.raidDisk)
		default:
			fmt.Fprintf(w, "   %5d   %5d    %5d    %5d     ", disk.number, disk.major, disk.minor, disk.raidDisk)
		}
		s := disk.state
		if s&mdDiskFaulty != 0 {
			fmt.Fprint(w, " faulty")
		}
		if s&mdDiskActive != 0 {
			fmt.Fprint(w, " active")
		}
		if s&mdDiskSync != 0 {
			fmt.Fprint(w, " sync")
			lay := uint32(d.st.Layout)
			if d.st.Level == superblock.LevelRAID10 && lay&^0x1FFFF == 0 {
				nc, fc := superblock.RAID10Near(lay), superblock.RAID10Far(lay)
				copies := nc * fc
				if fc == 1 && copies > 0 && rd%copies == 0 && copies <= 26 {
					fmt.Fprintf(w, " set-%c", 'A'+disk.raidDisk%copies)
				}
			}
		}
		if s&mdDiskRemoved != 0 {
			fmt.Fprint(w, " removed")
		}
		if s&mdDiskWriteMostly != 0 {
			fmt.Fprint(w, " writemostly")
		}
		if s&mdDiskFailFast != 0 {
			fmt.Fprint(w, " failfast")
		}
		if s&mdDiskJournal != 0 {
			fmt.Fprint(w, " journal")
		}
		if s&(mdDiskActive|mdDiskSync|mdDiskRemoved|mdDiskFaulty|mdDiskJournal) == 0 {
			fmt.Fprint(w, " spare")
			if disk.raidDisk >= 0 && disk.raidDisk < rd {
				fmt.Fprint(w, " rebuilding")
			}
		}
		if disk.present() {
			fmt.Fprintf(w, "   %s", disk.path)
		}
		fmt.Fprintf(w, "\n")
	}
}

// writeExports adds where the array is served (mdtool only).
func (d *detailView) writeExports(w io.Writer) {
	st := d.st
	if st.NBDSocket == "" && st.NBDListen == "" && st.FUSEFile == "" && st.Metrics == "" && st.KernelDevice == "" {
		return
	}
	fmt.Fprintf(w, "\n")
	if st.KernelDevice != "" {
		fmt.Fprintf(w, "      Block Device : %s (%s)\n", st.KernelDevice, st.KernelDeviceKind)
	}
	if st.NBDSocket != "" {
		fmt.Fprintf(w, "        NBD Socket : %s\n", st.NBDSocket)
	}
	if st.NBDListen != "" {
		tls := ""
		if st.NBDTLS {
			tls = " (TLS)"
		}
		fmt.Fprintf(w, "           NBD TCP : %s%s\n", st.NBDListen, tls)
	}
	if st.FUSEFile != "" {
		fmt.Fprintf(w, "         FUSE File : %s\n", st.FUSEFile)
	}
	if st.Metrics != "" {
		fmt.Fprintf(w, "           Metrics : http://%s/metrics\n", st.Metrics)
	}
}

// spareCount is Detail's "spares": table entries with state 0.
func (d *detailView) spareCount() int {
	n := 0
	for i, disk := range d.disks {
		if i >= d.st.RaidDisks*2 && !disk.present() {
			continue
		}
		if disk.present() && disk.state&^(mdDiskWriteMostly|mdDiskFailFast) == 0 {
			n++
		}
	}
	return n
}

// writeBrief prints the ARRAY line.
func (d *detailView) writeBrief(w io.Writer, dev string, verbose int) {
	var b strings.Builder
	fmt.Fprintf(&b, "ARRAY %s", confValue(dev))
	if verbose > 0 {
		fmt.Fprintf(&b, " level=%s num-devices=%d", levelName(d.st.Level), d.st.RaidDisks)
	}
	fmt.Fprintf(&b, " metadata=%s", d.version())
	if n := d.spareCount(); n > 0 {
		fmt.Fprintf(&b, " spares=%d", n)
	}
	if name := d.setName32(); name != "" {
		fmt.Fprintf(&b, " name=%s", confValue(name))
	}
	if !d.st.NotPersistent { // no superblock, no UUID (mdadm 4.2: "ARRAY /dev/md0 metadata=")
		fmt.Fprintf(&b, " UUID=%s", uuidText(d.sb.SetUUID, ':'))
	}
	if verbose > 0 {
		var paths []string
		for _, disk := range d.disks {
			if disk.present() {
				paths = append(paths, disk.path)
			}
		}
		sort.Strings(paths)
		if len(paths) > 0 {
			fmt.Fprintf(&b, "\n   devices=%s", strings.Join(paths, ","))
		}
	}
	b.WriteString("\n")
	io.WriteString(w, b.String())
}

// writeExport prints --export's KEY=VALUE lines.
func (d *detailView) writeExport(w io.Writer, noDevices bool) {
	st := d.st
	fmt.Fprintf(w, "MD_LEVEL=%s\n", levelNameOrNull(st.Level))
	fmt.Fprintf(w, "MD_DEVICES=%d\n", st.RaidDisks)
	fmt.Fprintf(w, "MD_METADATA=%s\n", d.version())
	fmt.Fprintf(w, "MD_UUID=%s\n", uuidText(d.sb.SetUUID, ':'))
	if rest, ok := strings.CutPrefix(st.Device, "/dev/md/"); ok {
		fmt.Fprintf(w, "MD_DEVNAME=%s\n", exportValue(printEscape(rest)))
	}
	// mdadm cuts the name at a newline and prints the rest raw; mdtool
	// prints all of it, escaped and shell-safe (exportValue).
	if name := d.setName32(); name != "" {
		fmt.Fprintf(w, "MD_NAME=%s\n", exportValue(name))
	}
	if noDevices {
		return
	}
	type ent struct {
		sys  string
		role string
		path string
	}
	var ents []ent
	for _, m := range st.Members {
		if m.Path == "" || m.State == "missing" {
			continue
		}
		role := "spare"
		if m.Role >= 0 && m.State != "faulty" && m.State != "spare" {
			role = fmt.Sprint(m.Role)
		}
		ents = append(ents, ent{sys: memberSysName(m.Path), role: role, path: m.Path})
	}
	// The kernel lists md/dev-* in kernfs order: by name hash.
	sort.SliceStable(ents, func(i, j int) bool { return kernfsLess(ents[i].sys, ents[j].sys) })
	for _, e := range ents {
		key := sysKey(e.sys)
		fmt.Fprintf(w, "MD_DEVICE_%s_ROLE=%s\n", key, e.role)
		fmt.Fprintf(w, "MD_DEVICE_%s_DEV=%s\n", key, e.path)
	}
}

// memberSysName is the member's sysfs directory name under md/: "dev-"
// and the kernel name (for an image file: its base name).
func memberSysName(path string) string {
	base := path
	if i := strings.LastIndexByte(base, '/'); i >= 0 {
		base = base[i+1:]
	}
	return "dev-" + base
}

// sysKey replaces every non-alphanumeric character by '_', as Detail does
// for the MD_DEVICE_ keys.
func sysKey(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			b[i] = '_'
		}
	}
	return string(b)
}

// kernfsHash is kernfs_name_hash (Linux 6.1, no namespace): the order in
// which readdir returns the entries of a sysfs directory.
func kernfsHash(name string) uint32 {
	var h uint64
	for i := 0; i < len(name); i++ {
		c := uint64(name[i])
		h = (h + (c << 4) + (c >> 4)) * 11
	}
	v := uint32((h * 0x61C8864680B583EB) >> 32)
	v &= 0x7fffffff
	if v < 2 {
		v += 2
	}
	if v >= 0x7fffffff {
		v = 0x7fffffff - 1
	}
	return v
}

func kernfsLess(a, b string) bool {
	ha, hb := kernfsHash(a), kernfsHash(b)
	if ha != hb {
		return ha < hb
	}
	return a < b
}

// detailJSON is one array in --json.
type detailJSON struct {
	Device            string             `json:"device"`
	Version           string             `json:"version"`
	CreationTime      string             `json:"creation_time"`
	CreationTimeUnix  int64              `json:"creation_time_unix"`
	RaidLevel         string             `json:"raid_level"`
	ArraySizeKiB      int64              `json:"array_size_kib"`
	ArraySizeBytes    int64              `json:"array_size_bytes"`
	UsedDevSizeKiB    *uint64            `json:"used_dev_size_kib,omitempty"`
	RaidDevices       int                `json:"raid_devices"`
	TotalDevices      int                `json:"total_devices"`
	IntentBitmap      *string            `json:"intent_bitmap"`
	UpdateTime        string             `json:"update_time"`
	UpdateTimeUnix    int64              `json:"update_time_unix"`
	State             []string           `json:"state"`
	ActiveDevices     int                `json:"active_devices"`
	WorkingDevices    int                `json:"working_devices"`
	FailedDevices     int                `json:"failed_devices"`
	SpareDevices      int                `json:"spare_devices"`
	Layout            *string            `json:"layout,omitempty"`
	ChunkKiB          *int64             `json:"chunk_size_kib,omitempty"`
	ConsistencyPolicy string             `json:"consistency_policy"`
	JournalMode       string             `json:"journal_mode,omitempty"`
	Name              string             `json:"name"`
	Local             bool               `json:"local"`
	UUID              string             `json:"uuid"`
	Events            uint64             `json:"events"`
	FailedReason      string             `json:"failed_reason,omitempty"`
	Sync              detailJSONSync     `json:"sync"`
	Reshape           *detailJSONReshape `json:"reshape,omitempty"`
	Devices           []detailJSONDevice `json:"devices"`
	Exports           detailJSONExports  `json:"exports"`
	Daemon            detailJSONDaemon   `json:"daemon"`
}

type detailJSONDevice struct {
	Number     *int     `json:"number"`
	Major      uint32   `json:"major"`
	Minor      uint32   `json:"minor"`
	RaidDevice *int     `json:"raid_device"`
	State      []string `json:"state"`
	Path       string   `json:"path,omitempty"`
	// Remote: a member on an NBD server (Path its URI): its connection.
	Remote *daemon.RemoteStatus `json:"remote,omitempty"`
}

type detailJSONExports struct {
	NBDSocket string `json:"nbd_socket,omitempty"`
	NBDTCP    string `json:"nbd_tcp,omitempty"`
	NBDTLS    bool   `json:"nbd_tls,omitempty"`
	FUSEFile  string `json:"fuse_file,omitempty"`
	Metrics   string `json:"metrics,omitempty"`
	// BlockDevice is the kernel block device serving the array
	// (/dev/nbdN), BlockDeviceKind its door (nbd, ublk).
	BlockDevice     string `json:"block_device,omitempty"`
	BlockDeviceKind string `json:"block_device_kind,omitempty"`
}

type detailJSONDaemon struct {
	PID     int    `json:"pid"`
	Started string `json:"started"`
	Name    string `json:"name"`
}

func (d *detailView) json(dev string) *detailJSON {
	st, sb := d.st, d.sb
	j := &detailJSON{
		Device: dev, Version: d.version(),
		CreationTime: timeRFC3339(sb.CTime.Seconds()), CreationTimeUnix: sb.CTime.Seconds(),
		RaidLevel: levelName(st.Level), ArraySizeKiB: st.Size >> 10, ArraySizeBytes: st.Size,
		RaidDevices: st.RaidDisks, TotalDevices: d.nr,
		UpdateTime: timeRFC3339(sb.UTime.Seconds()), UpdateTimeUnix: sb.UTime.Seconds(),
		State: d.arrayState(), ActiveDevices: d.active, WorkingDevices: d.working,
		FailedDevices: d.failed, SpareDevices: d.spare, ConsistencyPolicy: d.consistencyPolicy(),
		Name: d.setName32(), Local: d.local(), UUID: uuidText(sb.SetUUID, ':'), Events: sb.Events,
		Exports: detailJSONExports{NBDSocket: st.NBDSocket, NBDTCP: st.NBDListen, NBDTLS: st.NBDTLS,
			FUSEFile: st.FUSEFile, Metrics: st.Metrics, BlockDevice: st.KernelDevice, BlockDeviceKind: st.KernelDeviceKind},
		Daemon:       detailJSONDaemon{PID: st.PID, Started: st.Started.UTC().Format(time.RFC3339), Name: st.Name},
		FailedReason: st.FailedReason,
		JournalMode:  st.JournalMode,
		Sync:         syncJSON(st),
	}
	if r := d.reshape(); r != nil {
		j.Reshape = r.json()
	}
	if st.Level >= 1 {
		v := st.ComponentSectors / 2
		j.UsedDevSizeKiB = &v
	}
	if st.Bitmap {
		s := "internal"
		if st.BitmapFile != "" {
			s = st.BitmapFile
		}
		j.IntentBitmap = &s
	}
	switch st.Level {
	case 5, 6:
		n, _ := layoutName(st.Level, uint32(st.Layout), false)
		j.Layout = &n
	case 10:
		n := r10LayoutShort(uint32(st.Layout))
		j.Layout = &n
	case 0:
		if st.Layout != 0 {
			n, _ := layoutName(0, uint32(int32(st.Layout)), true)
			j.Layout = &n
		}
	}
	switch st.Level {
	case 0, 4, 5, 6, 10:
		if st.ChunkBytes > 0 {
			v := st.ChunkBytes / 1024
			j.ChunkKiB = &v
		}
	}
	j.Devices = []detailJSONDevice{}
	rd := st.RaidDisks
	for i, disk := range d.disks {
		if !disk.present() && (i >= rd*2 || i&1 == 1) {
			continue
		}
		jd := detailJSONDevice{Major: disk.major, Minor: disk.minor, Path: disk.path, State: []string{}}
		for _, m := range st.Members {
			if m.Remote != nil && m.Path == disk.path && disk.path != "" {
				jd.Remote = m.Remote
			}
		}
		if disk.number >= 0 {
			n := disk.number
			jd.Number = &n
		}
		if disk.raidDisk >= 0 {
			r := disk.raidDisk
			jd.RaidDevice = &r
		}
		s := disk.state
		for _, f := range []struct {
			bit  int
			word string
		}{{mdDiskFaulty, "faulty"}, {mdDiskActive, "active"}, {mdDiskSync, "sync"}, {mdDiskRemoved, "removed"},
			{mdDiskWriteMostly, "writemostly"}, {mdDiskFailFast, "failfast"}, {mdDiskJournal, "journal"}} {
			if s&f.bit != 0 {
				jd.State = append(jd.State, f.word)
			}
		}
		if s&(mdDiskActive|mdDiskSync|mdDiskRemoved|mdDiskFaulty|mdDiskJournal) == 0 {
			jd.State = append(jd.State, "spare")
			if disk.raidDisk >= 0 && disk.raidDisk < rd {
				jd.State = append(jd.State, "rebuilding")
			}
		}
		j.Devices = append(j.Devices, jd)
	}
	return j
}
