package cmd

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"mdtool/internal/daemon"
	"mdtool/internal/mdadm/member"
	"mdtool/internal/mdadm/plan"
	sigprobe "mdtool/internal/mdadm/probe"
	"mdtool/ioctl"
	"mdtool/superblock"
)

type createOptions struct {
	level        string
	raidDevices  int
	spareDevices int
	chunk        string
	layout       string
	size         string
	metadata     string
	bitmap       string
	bitmapChunk  string
	name         string
	uuid         string
	dataOffset   string
	assumeClean  bool
	run          bool
	force        bool
	auto         string
	consistency  string
	mdadmConf    string
	start        bool
	delay        string       // --delay: the bitmap's daemon sleep (seconds)
	refuseData   bool         // today's stricter check instead of mdadm's question
	quiet        bool         // -q, --quiet
	verbose      bool         // -v, --verbose
	verbosity    int          // mdadm's c->verbose (create_notes.go)
	srv          serveOptions // the NBD limits of the daemon it starts
	devMarks     []devMark    // --write-mostly, --failfast, --nofailfast and where they stood
	writeBehind  string       // --write-behind
	journal      journalMark  // --write-journal and where it stood
}

func newCreateCmd(env *Env) *cobra.Command {
	var o createOptions
	c := &cobra.Command{
		Use:   "create MD-DEVICE DEVICE...",
		Short: "Create a new array: write md superblocks and bitmap (mdadm --create)",
		Long: `Create a new md array on the given devices, as mdadm --create does.

MD-DEVICE names the array as mdadm expects: /dev/md0, /dev/md/NAME or NAME.
The array name stored in the superblocks is derived from it unless --name is
given, and is prefixed with the homehost ("host:name") as mdadm does. Names
and homehosts holding control characters, white space, quotes, '#' or '\'
are refused (exit 2): mdadm 4.2 stores them, and they break ARRAY lines.
DEVICE is a block device or a regular (image) file; the word "missing" leaves
a slot empty (a degraded array).

Defaults are mdadm 4.2's: metadata 1.2, chunk 512K, layout left-symmetric
(raid5/6) or n2 (raid10), the data offset formula, bad-block log and bitmap
placement, a 64M bitmap chunk, and an automatic internal bitmap when the
component size exceeds 100 GiB (mdadm 4.4 and later no longer add one).
--bitmap=FILE (a path with a '/') writes an external bitmap file as mdadm
4.2 does instead (chunk 4K doubled up to at most 2^20 chunks unless
--bitmap-chunk is given; an existing file needs --force); the daemon is
started with "--bitmap=FILE", and the array is assembled again with it.
Sizes take mdadm's suffixes: K (default), M, G, T, and s for sectors.

Like mdadm --create, create then starts the new array: it runs
"mdtool assemble MD-DEVICE DEVICE... --run" in the background, so the array
is served (NBD socket in the run directory) and its initial resync or
recovery runs. --start=false (or MDTOOL_START=false, or "start: false" in
the config file) only writes the metadata. The NBD limits
--nbd-max-clients, --nbd-max-memory and --nbd-idle-timeout are passed to
that daemon (see "mdtool help assemble").

Everything is checked before the first write: on any refusal no device is
modified. As mdadm does, create warns about a device that holds another
array's md superblock, an ext2/3/4 or reiserfs filesystem or a partition
table ("... appears to be part of a raid array: ...") and asks "Continue
creating array?"; --run goes ahead without asking, and without --run an
answer other than y (or no terminal input) aborts ("create aborted.").
--refuse-data (or "refuse-data: true" in the config file) is stricter:
a device holding any recognised signature (md, filesystem, partition
table, LVM, LUKS, swap, ...) is refused unless --force is given.
A device that a running array holds is always refused.

EXIT STATUS
  0  superblocks written (and the array started, unless --start=false)
  1  create refused or aborted, a write failed, or the array did not start
  2  bad arguments, or a device could not be opened`,
		Example: `  mdtool --create /dev/md/data --level=10 --raid-devices=4 --bitmap=internal \
         --bitmap-chunk=64M /dev/nvme0n1 /dev/nvme1n1 /dev/nvme2n1 /dev/nvme3n1
  mdtool create /dev/md0 -l5 -n3 --assume-clean disk0.img disk1.img missing`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return runCreate(c, env, &o, args)
		},
	}
	f := c.Flags()
	f.StringVarP(&o.level, "level", "l", "", "RAID level: linear, 0, 1, 4, 5, 6, 10, multipath (also raid5, mirror, stripe, mp, ...)")
	f.IntVarP(&o.raidDevices, "raid-devices", "n", 0, "number of active devices in the array")
	f.IntVar(&o.raidDevices, "raid-disks", 0, "alias of --raid-devices")
	f.IntVarP(&o.spareDevices, "spare-devices", "x", 0, "number of spare devices")
	f.IntVar(&o.spareDevices, "spare-disks", 0, "alias of --spare-devices")
	f.StringVarP(&o.chunk, "chunk", "c", "", "chunk size (default 512K; KiB unless suffixed)")
	f.StringVar(&o.chunk, "rounding", "", "alias of --chunk (the rounding of a linear array)")
	f.StringVarP(&o.layout, "layout", "p", "", "data layout: left-symmetric, ra, parity-first, n2, f2, o2, original, ...")
	f.StringVar(&o.layout, "parity", "", "alias of --layout")
	f.StringVarP(&o.size, "size", "z", "", "space to use on each device (KiB unless suffixed; default: all)")
	f.StringVarP(&o.metadata, "metadata", "e", "", "superblock version: 1.0, 1.1 or 1.2 (default 1.2)")
	f.StringVarP(&o.bitmap, "bitmap", "b", "", "write-intent bitmap: internal, none or a file (a path with a '/')")
	f.StringVar(&o.bitmapChunk, "bitmap-chunk", "", "bitmap chunk size (default 64M; KiB unless suffixed)")
	f.StringVarP(&o.delay, "delay", "d", "", "seconds between bitmap flushes: the bitmap's daemon sleep (default 5)")
	f.StringVarP(&o.name, "name", "N", "", "array name (default: from MD-DEVICE)")
	f.StringVarP(&o.uuid, "uuid", "u", "", "array UUID (default: random)")
	f.StringVar(&o.dataOffset, "data-offset", "", "start of data on each device (KiB unless suffixed; default: mdadm's formula)")
	f.BoolVar(&o.assumeClean, "assume-clean", false, "mark the array in sync: no initial resync or recovery")
	f.BoolVarP(&o.run, "run", "R", false, "do not ask for confirmation")
	f.BoolVarP(&o.force, "force", "f", false, "allow unusual geometries and overwriting devices that hold data")
	f.StringVarP(&o.auto, "auto", "a", "", "accepted for mdadm compatibility; device nodes are not created")
	f.StringVarP(&o.consistency, "consistency-policy", "k", "", "resync, bitmap or journal (ppl is not supported)")
	f.BoolVar(&o.refuseData, "refuse-data", false, "refuse devices holding an md superblock, a filesystem or a partition table unless --force (mdadm warns and asks)")
	addDevMarkFlags(f, &o.devMarks)
	f.Var(&journalFlag{fs: f, m: &o.journal}, "write-journal", "the raid4/5/6 write journal device (md's r5l log; consistency policy journal)")
	f.StringVar(&o.writeBehind, "write-behind", "", "outstanding writes to write-mostly members before a write completes (0-16383; needs a bitmap)")
	f.Lookup("write-behind").NoOptDefVal = "\x00"
	f.BoolVar(&o.start, "start", true, "start serving the new array, as mdadm --create starts it (false: metadata only)")
	addNBDLimitFlags(f, &o.srv)
	addDeviceFlag(f, &o.srv.device)
	f.StringVar(&o.mdadmConf, "config", "", "mdadm.conf to read (HOMEHOST, CREATE)")
	_ = f.MarkHidden("config")
	for _, n := range []string{"raid-disks", "spare-disks", "rounding", "parity"} {
		_ = f.MarkHidden(n)
	}
	markConfigurable(f, "metadata", "bitmap", "bitmap-chunk", "chunk", "start", "refuse-data")
	return c
}

func runCreate(c *cobra.Command, env *Env, o *createOptions, args []string) error {
	if len(args) == 0 {
		return usagef("an md device must be given in --create mode")
	}
	mddev, devs := args[0], args[1:]
	o.journal.warnExtras(env)
	devs, journalAt := o.journal.insert(devs)
	wb, err := writeBehindValue(strings.TrimPrefix(o.writeBehind, "\x00"), c.Flags().Changed("write-behind"))
	if err != nil {
		return err
	}
	o.verbosity = verbosityOf(c)
	opts, err := o.planOptions(c, env, mddev)
	if err != nil {
		return err
	}
	members := make([]*member.Member, len(devs))
	defer func() {
		for _, m := range members {
			if m != nil {
				m.Close()
			}
		}
	}()
	if err := openMembers(devs, members); err != nil {
		return err
	}
	opts.Devices = planDevices(devs, members)
	applyDevMarks(opts.Devices, o.devMarks)
	if journalAt >= 0 {
		opts.Devices[journalAt].Journal = true
	}
	opts.WriteBehind = wb
	res, err := plan.Plan(opts)
	if err != nil {
		return planError(err)
	}
	o.quiet, _ = c.Flags().GetBool("quiet")
	o.verbose, _ = c.Flags().GetBool("verbose")
	printGeometryNotes(env.Stderr, o, res)
	if err := confirmCreate(env, o, res, members); err != nil {
		return err
	}
	startFlags := append(nbdLimitArgs(c.Flags()), "--device="+o.srv.device)
	if res.BitmapFileHeader != nil {
		abs, err := createBitmapFile(env, o.bitmap, o.force, res.BitmapFileHeader)
		if err != nil {
			return err
		}
		startFlags = append(startFlags, "--bitmap="+abs)
	}
	if err := writeMembers(res, members); err != nil {
		return err
	}
	if !o.start {
		if o.verbosity >= 0 {
			fmt.Fprintf(env.Stderr, "mdtool: array %s created.\n", mddev)
		}
		return nil
	}
	// Start it as mdadm --create does (RUN_ARRAY): the devices are closed
	// first so that the daemon can open them exclusively. They go to the
	// engine in mdadm's ADD_NEW_DISK order (res.Members: raid4/5/6's
	// recovery spare last): md binds each new device at the head of its
	// list, so the device added last is offered the empty slot first,
	// which is how mdadm makes the kernel recover into that device.
	var paths []string
	for _, pm := range res.Members {
		paths = append(paths, devs[pm.Device])
	}
	for i, m := range members {
		if m != nil {
			m.Close()
			members[i] = nil
		}
	}
	if err := startCreated(env, createdName(mddev), paths, startFlags...); err != nil {
		return err
	}
	if o.verbosity >= 0 {
		fmt.Fprintf(env.Stderr, "mdtool: array %s started.\n", createdName(mddev))
	}
	return nil
}

// planOptions turns the flags into the create rules' options (without
// the devices), refusing what mdadm refuses while parsing.
func (o *createOptions) planOptions(c *cobra.Command, env *Env, mddev string) (plan.Options, error) {
	opts := plan.Options{
		MDDevice:     mddev,
		Metadata:     o.metadata,
		Level:        o.level,
		Layout:       o.layout,
		RaidDevices:  o.raidDevices,
		SpareDevices: o.spareDevices,
		Bitmap:       o.bitmap,
		Name:         o.name,
		AssumeClean:  o.assumeClean,
		Force:        o.force,
		Now:          env.Now(),
	}
	if _, _, _, err := o.srv.nbdLimits(); err != nil {
		return opts, err
	}
	if err := checkDeviceFlag(o.srv.device); err != nil {
		return opts, err
	}
	if o.level == "" {
		return opts, exitMsg(ExitUsage, "a RAID level is needed to create an array.")
	}
	if o.raidDevices == 0 {
		return opts, exitMsg(ExitUsage, "no raid-devices specified.")
	}
	if err := o.parseSizes(&opts); err != nil {
		return opts, err
	}
	switch o.consistency {
	case "":
	case "journal":
		if o.journal.path == "" {
			return opts, exitMsg(ExitUsage, "--write-journal is required for consistency policy: journal")
		}
	case "resync", "bitmap":
		if o.consistency == "bitmap" && o.bitmap != "internal" && !plan.IsBitmapFile(o.bitmap) {
			return opts, exitMsg(ExitUsage, "--bitmap is required for consistency policy: bitmap")
		}
		if o.consistency == "resync" && o.bitmap == "" {
			opts.Bitmap = "none"
		}
	default:
		return opts, exitf(ExitUsage, "consistency policy %s is not supported", o.consistency)
	}
	if o.uuid != "" {
		u, err := superblock.ParseUUID(o.uuid)
		if err != nil {
			return opts, exitMsg(ExitUsage, "Bad uuid: "+o.uuid)
		}
		opts.UUID = &u
	}
	host, _ := env.Hostname()
	opts.SystemHostname = host
	opts.Homehost, _ = c.Flags().GetString("homehost")
	return opts, nil
}

// parseSizes parses --chunk, --size, --data-offset and --bitmap-chunk.
func (o *createOptions) parseSizes(opts *plan.Options) error {
	var err error
	if o.chunk != "" {
		if opts.ChunkKiB, err = plan.ParseChunk(o.chunk); err != nil {
			return planError(err)
		}
	}
	if o.size != "" && o.size != "max" {
		if opts.SizeKiB, err = plan.ParseSize(o.size); err != nil {
			return planError(err)
		}
	}
	if o.dataOffset != "" {
		if opts.DataOffset, err = plan.ParseSectors(o.dataOffset); err != nil {
			return exitf(ExitUsage, "invalid data-offset: %s", o.dataOffset)
		}
	}
	if o.bitmapChunk != "" {
		if opts.BitmapChunk, err = plan.ParseBitmapChunk(o.bitmapChunk); err != nil {
			return planError(err)
		}
	}
	if opts.BitmapDelay, err = parseDelay(o.delay); err != nil {
		return err
	}
	return nil
}

// openMembers opens every device exclusively (O_EXCL, or flock for image
// files) into members, to be kept open until the end, so nothing else
// can start using it between the checks and the writes. The locks are
// taken in one order (by device and inode), whatever the order of the
// arguments: of two creates over the same devices, the one that loses
// the first lock holds none and fails; the other gets them all.
func openMembers(devs []string, members []*member.Member) error {
	type lockKey struct{ block, dev, ino uint64 }
	keys := make([]lockKey, len(devs))
	known := make([]bool, len(devs))
	var order []int
	for i, d := range devs {
		if strings.EqualFold(d, "missing") {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat(d, &st); err == nil {
			keys[i] = lockKey{0, st.Dev, st.Ino}
			if st.Mode&unix.S_IFMT == unix.S_IFBLK {
				keys[i] = lockKey{1, st.Rdev, 0}
			}
			known[i] = true
			for j := 0; j < i; j++ {
				if known[j] && keys[j] == keys[i] {
					return exitf(ExitUsage, "%s is listed more than once", d)
				}
			}
		}
		order = append(order, i)
	}
	sort.SliceStable(order, func(a, b int) bool {
		ka, kb := keys[order[a]], keys[order[b]]
		if ka.block != kb.block {
			return ka.block < kb.block
		}
		if ka.dev != kb.dev {
			return ka.dev < kb.dev
		}
		return ka.ino < kb.ino
	})
	for _, i := range order {
		d := devs[i]
		m, err := member.Open(d, member.Exclusive)
		if err != nil {
			if errors.Is(err, ioctl.ErrNotMember) {
				return exitMsg(ExitUsage, openFailure(d, err))
			}
			return exitf(ExitUsage, "cannot open %s: %s", d, openReason(err))
		}
		members[i] = m
	}
	return nil
}

// planDevices is the device list of the create rules: the opened
// members' sizes, and "missing" for the empty slots.
func planDevices(devs []string, members []*member.Member) []plan.Device {
	var out []plan.Device
	for i, d := range devs {
		m := members[i]
		if m == nil {
			out = append(out, plan.Device{Path: d, Missing: true})
			continue
		}
		pd := plan.Device{
			Path:              d,
			Sectors:           m.Sectors(),
			LogicalBlockSize:  m.Geom.LogicalBlockSize,
			PhysicalBlockSize: m.Geom.PhysicalBlockSize,
		}
		var st unix.Stat_t
		if unix.Stat(d, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK {
			pd.Major, pd.Minor = unix.Major(st.Rdev), unix.Minor(st.Rdev)
		}
		out = append(out, pd)
	}
	return out
}

// confirmCreate shows mdadm's warnings about old contents and the plan's,
// and asks to continue (unless --run); with --refuse-data it refuses to
// overwrite data without --force instead.
func confirmCreate(env *Env, o *createOptions, res *plan.Result, members []*member.Member) error {
	if !o.refuseData {
		return confirmCreateMdadm(env, o, res, members)
	}
	stderr := env.Stderr
	found := false
	for _, m := range members {
		if m == nil {
			continue
		}
		sigs, err := signaturesOn(m)
		if err != nil {
			return exitf(ExitFailure, "cannot read %s: %v", m.Path, err)
		}
		for _, s := range sigs {
			fmt.Fprintf(stderr, "mdtool: %s appears to contain %s\n", m.Path, s)
			found = true
		}
	}
	if found && !o.force {
		return exitMsg(ExitFailure, "create aborted: the devices above hold data; use --force to overwrite them")
	}
	for _, w := range res.Warnings {
		if showCreateWarnings(o) {
			fmt.Fprintf(stderr, "mdtool: %s\n", warningText(w))
		}
	}
	printSizeNotes(stderr, o, res, found || len(res.Warnings) > 0)
	if len(res.Warnings) > 0 && !o.run {
		if !ask(env, "Continue creating array? ") {
			return exitMsg(ExitFailure, "create aborted.")
		}
	}
	if res.DefaultedMetadata && o.verbosity >= 0 {
		fmt.Fprintf(stderr, "mdtool: Defaulting to version %s metadata\n", res.Metadata)
	}
	return nil
}

// writeMembers writes the planned metadata, every member's old
// superblocks erased first (mdadm's Kill).
func writeMembers(res *plan.Result, members []*member.Member) error {
	for _, pm := range res.Members {
		m := members[pm.Device]
		if _, err := m.EraseSuperblocks(); err != nil {
			return exitf(ExitFailure, "cannot erase old superblock on %s: %v", m.Path, err)
		}
		ws := make([]member.Write, len(pm.Writes))
		for i, w := range pm.Writes {
			ws[i] = member.Write{Offset: w.Offset, Data: w.Data}
		}
		if err := m.WriteAll(ws); err != nil {
			return exitf(ExitFailure, "failed to write metadata to %s: %v", m.Path, err)
		}
	}
	return nil
}

// startCreated runs "mdtool assemble --foreground --run --quiet --created MD DEVS..."
// as a background daemon and waits until it serves the array.
func startCreated(env *Env, mddev string, devs []string, flags ...string) error {
	args := append(append([]string{"assemble", "--foreground", "--run", "--quiet", "--created"}, flags...), mddev)
	args = append(args, devs...)
	code, err := spawnSelf(env, args)
	var ce *daemon.ChildExitError
	switch {
	case errors.As(err, &ce):
		return exitf(ExitFailure, "array %s created but not started (assemble exited with status %d)", mddev, ce.Code)
	case err != nil:
		return exitf(ExitFailure, "array %s created but not started: %v", mddev, err)
	case code != 0:
		return exitf(ExitFailure, "array %s created but not started", mddev)
	}
	return nil
}

func openReason(err error) string {
	var be *ioctl.BusyError
	switch {
	case errors.As(err, &be), errors.Is(err, ioctl.ErrBusy):
		return "Device or resource busy"
	case errors.Is(err, os.ErrNotExist):
		return "No such file or directory"
	case errors.Is(err, os.ErrPermission):
		return "Permission denied"
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// ask prints a question on stderr and reads the answer from stdin, as
// mdadm's ask(): a line starting with y or Y is yes, n or N no; anything
// else asks again with "(y/n) " added, five times at most ("assuming
// 'no'"). End of input means no.
func ask(env *Env, q string) bool {
	add := ""
	r := bufio.NewReader(env.Stdin)
	for i := 0; i < 5; i++ {
		fmt.Fprint(env.Stderr, q+add)
		line, err := r.ReadString('\n')
		if line == "" && err != nil {
			return false
		}
		switch line[0] {
		case 'y', 'Y':
			return true
		case 'n', 'N':
			return false
		}
		add = "(y/n) "
	}
	fmt.Fprintln(env.Stderr, "mdtool: assuming 'no'")
	return false
}

// signaturesOn lists what a device holds that create must not overwrite
// without --force: md superblocks, filesystems, partition tables.
func signaturesOn(m *member.Member) ([]string, error) {
	sigs, err := sigprobe.Probe(m, int64(m.Geom.Size))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range sigs {
		d := s.Description
		if s.Note != "" {
			d += " (" + s.Note + ")"
		}
		out = append(out, d)
	}
	return out, nil
}
