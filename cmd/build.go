package cmd

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"mdtool/engine"
	"mdtool/engine/layout"
	"mdtool/internal/daemon"
	"mdtool/internal/mdadm/plan"
	"mdtool/internal/nbdclient"
	"mdtool/superblock"
)

const buildLong = `Start an array without superblocks, as "mdadm --build" (-B) builds a
legacy array: nothing is read from or written to the members' metadata
areas; the geometry comes from the command line only, and each member's
data starts at its first sector and spans the whole device.

Levels: linear, raid0 (stripe), raid1 (mirror) and raid10, as mdadm 4.2
accepts them (multipath and faulty are accepted by mdadm but not run by
mdtool). --chunk (--rounding for linear) defaults to 64K for raid0 and
linear, as in mdadm. A raid0 gets no layout (-1), as mdadm 4.2's Build
gives md: like md, mdtool then refuses a raid0 with two or more members larger
than the smallest ("RUN_ARRAY failed: Operation not supported"). A raid1
starts with a resync unless --assume-clean; "missing" leaves a raid1
member out.

--bitmap=FILE (raid1, raid10; a path with a '/') gives the array a
write-intent bitmap file, as mdadm -B -b FILE does: an existing file is
used as it is (the chunks its bits mark are resynced, nothing else); a
missing one is created as mdadm 4.2 creates it, once every member has
been opened (every bit set, no UUID, the smallest member's size even for
raid10, --bitmap-chunk or 4K doubled until at most 2^20 chunks, --delay
seconds between bitmap flushes, default 5, --write-behind's number); a
file created here stays when the array then does not start, as mdadm
leaves it. "internal" is refused: there is no superblock to hold it. A
failed member then comes back with "manage MD --re-add DEV", recovering
only the chunks written while it was out (without a bitmap a raid1 or
raid10 skips the recovery, as md does, unless writes went to the
degraded array). "manage MD --add DEV" adds a spare that recovers a
missing role in full.

-W/--write-mostly marks the devices after it write-mostly (read only
when no other member can serve); --write-behind=N (needs --bitmap) is
recorded in a bitmap file created here.

The array is served as assemble serves one (NBD, --fuse, --device) by a
background daemon (--foreground: this process); detail prints what mdadm
4.2 prints for such an array (no Persistence, Name, UUID or Events
lines); stop ends it. Since nothing records the geometry, the same
command builds the array again.

EXIT STATUS
  0  the array was built and started
  1  it could not be started (wrong number of devices, a member that cannot
     be opened, a geometry the engine refuses)
  2  bad arguments (unknown level, a level --build does not take, a
     --bitmap value without a '/', a bad --delay or --bitmap-chunk)`

type buildOptions struct {
	level, chunk, size     string
	sizeKiB                uint64 // --size, 0: max
	raidDevices            int
	assumeClean, run, fore bool
	srv                    serveOptions
	// --bitmap=FILE, --bitmap-chunk, --delay (build_bitmap.go)
	bitmap, bitmapChunk, delay string
	bmChunk                    uint64 // bytes
	bmDelay                    uint32
	// -W/--write-mostly (devMarks: where it stood), --write-behind
	devMarks    []devMark
	writeBehind string
	bmBehind    uint32
}

func newBuildCmd(env *Env) *cobra.Command {
	o := &buildOptions{}
	c := &cobra.Command{
		Use:   "build [flags] MD-DEVICE DEVICE...",
		Short: "Start an array without superblocks and serve it (mdadm --build)",
		Long:  buildLong,
		Example: `  mdtool --build /dev/md0 --level=0 --raid-devices=2 --chunk=64 disk0.img disk1.img
  mdtool -B /dev/md1 -l linear -n 3 a.img b.img c.img
  mdtool -B /dev/md2 -l 1 --assume-clean -n 2 a.img missing
  mdtool -B /dev/md3 -l1 -n2 --bitmap=/var/lib/md3.bitmap -d1 a.img b.img`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			o.srv.verbose = verbosityOf(c)
			return runBuild(env, o, args, c.Flags().Changed("write-behind"))
		},
	}
	f := c.Flags()
	f.StringVarP(&o.level, "level", "l", "", "RAID level: linear, 0, 1, 10 (also stripe, mirror, ...)")
	f.IntVarP(&o.raidDevices, "raid-devices", "n", 0, "number of devices in the array (\"missing\" counts)")
	f.StringVarP(&o.chunk, "chunk", "c", "", "chunk size (default 64K for raid0 and linear; KiB unless suffixed)")
	f.StringVar(&o.chunk, "rounding", "", "alias of --chunk (the rounding of a linear array)")
	f.StringVarP(&o.size, "size", "z", "", "raid1/raid10: the space used on each member (KiB unless suffixed; max: the smallest member's, the default)")
	f.BoolVar(&o.assumeClean, "assume-clean", false, "raid1/raid10: mark the array in sync, no initial resync")
	f.BoolVarP(&o.run, "run", "R", false, "accepted for mdadm compatibility")
	f.BoolVar(&o.fore, "foreground", false, "serve in this process until stopped, instead of a background daemon")
	f.StringVarP(&o.bitmap, "bitmap", "b", "", "raid1/raid10: a write-intent bitmap file (a path with a '/'), created when it does not exist, or none")
	f.StringVar(&o.bitmapChunk, "bitmap-chunk", "", "chunk of a bitmap file created here (default: 4K, doubled until 2^20 chunks; KiB unless suffixed)")
	f.StringVarP(&o.delay, "delay", "d", "", "seconds between bitmap flushes of a bitmap file created here: its daemon sleep (default 5)")
	wm := f.VarPF(&devMarkFlag{fs: f, marks: &o.devMarks, kind: 'W', on: true}, "write-mostly", "W",
		"the devices after this are write-mostly (raid1: read only when no other member can serve)")
	wm.NoOptDefVal = "true"
	f.StringVar(&o.writeBehind, "write-behind", "", "outstanding writes to write-mostly members, recorded in a bitmap file created here (0-16383; needs --bitmap)")
	f.Lookup("write-behind").NoOptDefVal = "\x00"
	addServeFlags(f, &o.srv)
	_ = f.MarkHidden("rounding")
	return c
}

// buildLevel parses --level as mdadm.c does in build mode.
func buildLevel(s string) (int, error) {
	if s == "" {
		return LevelUnset, nil
	}
	lv, err := plan.ParseLevel(s)
	if err != nil {
		return 0, exitf(ExitUsage, "invalid raid level: %s", s)
	}
	switch lv {
	case superblock.LevelRAID0, superblock.LevelLinear, superblock.LevelRAID1,
		superblock.LevelMultipath, superblock.LevelFaulty, superblock.LevelRAID10:
		return lv, nil
	}
	return 0, exitf(ExitUsage, "Raid level %s not permitted with --build.", s)
}

// buildParams checks the command line as mdadm.c and Build() do and
// returns the engine's parameters and the members (no "missing").
func buildParams(o *buildOptions, args []string, wbGiven bool) (engine.BuildParams, []string, error) {
	var bp engine.BuildParams
	lv, err := buildLevel(o.level)
	if err != nil {
		return bp, nil, err
	}
	if o.bmBehind, err = writeBehindValue(strings.TrimPrefix(o.writeBehind, "\x00"), wbGiven); err != nil {
		return bp, nil, err
	}
	bitmapGiven := o.bitmap != "" // "none" too: mdadm.c's check sees the name
	var chunkKiB uint64
	if o.chunk != "" {
		if chunkKiB, err = plan.ParseChunk(o.chunk); err != nil {
			return bp, nil, planError(err)
		}
	}
	if o.size != "" && o.size != "max" {
		if o.sizeKiB, err = plan.ParseSize(o.size); err != nil {
			return bp, nil, planError(err)
		}
	}
	if err := o.buildBitmapArgs(); err != nil {
		return bp, nil, err
	}
	if len(args) == 0 {
		return bp, nil, exitMsg(ExitUsage, "an md device must be given in this mode")
	}
	if o.bmBehind != 0 && !bitmapGiven {
		return bp, nil, exitMsg(ExitFailure, "write-behind mode requires a bitmap.")
	}
	if o.raidDevices == 0 {
		return bp, nil, exitMsg(ExitFailure, "no raid-devices specified.")
	}
	if o.bitmap == "internal" || o.bitmap == "clustered" {
		return bp, nil, o.buildBitmapRefusal(lv)
	}
	if lv == LevelUnset {
		return bp, nil, exitMsg(ExitFailure, "a RAID level is needed to Build an array.")
	}
	devs := args[1:]
	// Build.c: every member but "missing" must exist (stat_is_blkdev; an
	// image file stands for a block device here, an NBD URI is not a path)
	for _, d := range devs {
		if d == "missing" || nbdclient.IsURI(d) {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat(d, &st); err != nil {
			return bp, nil, exitf(ExitFailure, "stat failed for %s: %s", d, openReason(err))
		}
	}
	if o.raidDevices != len(devs) {
		return bp, nil, exitf(ExitFailure, "requested %d devices in array but listed %d", o.raidDevices, len(devs))
	}
	if err := o.buildBitmapRefusal(lv); err != nil {
		return bp, nil, err
	}
	if chunkKiB == 0 && (lv == superblock.LevelRAID0 || lv == superblock.LevelLinear) {
		chunkKiB = 64
	}
	bp = engine.BuildParams{Level: layout.Level(lv), ChunkSectors: chunkKiB * 2, RaidDisks: o.raidDevices, AssumeClean: o.assumeClean,
		SizeSectors: o.sizeKiB * 2}
	switch lv {
	case superblock.LevelRAID0:
		// mdadm 4.2's Build leaves raid0's layout UnSet (-1; its detail
		// says "-unknown-"): md 6.1 refuses a multi-zone raid0 (two or
		// more members beyond the smallest) with it ("RUN_ARRAY failed:
		// Operation not supported").
		bp.Layout = -1
	case superblock.LevelRAID10:
		bp.Layout = 0x102 // mdadm's default_layout: n2
	}
	var members []string
	for i, d := range devs {
		if d == "missing" {
			continue
		}
		bp.Roles = append(bp.Roles, i)
		bp.WriteMostly = append(bp.WriteMostly, writeMostlyAt(o.devMarks, i+1))
		members = append(members, d)
	}
	return bp, members, nil
}

// writeMostlyAt reports whether a -W stood before positional argument
// pos (the md device is 0).
func writeMostlyAt(marks []devMark, pos int) bool {
	for _, m := range marks {
		if m.kind == 'W' && m.pos <= pos {
			return true
		}
	}
	return false
}

func runBuild(env *Env, o *buildOptions, args []string, wbGiven bool) error {
	bp, members, err := buildParams(o, args, wbGiven)
	if err != nil {
		return err
	}
	if _, _, _, err := o.srv.nbdLimits(); err != nil {
		return err
	}
	if err := checkDeviceFlag(o.srv.device); err != nil {
		return err
	}
	daemonChild := os.Getenv(daemon.ReadyFDEnv) != ""
	if !o.fore && !daemonChild {
		return spawnAssemble(env)
	}
	if daemonChild {
		engineLog.hold()
	}
	as := &assembler{env: env, o: &assembleOptions{srv: o.srv, foreground: o.fore}, verbose: o.srv.verbose}
	if w := o.srv.plaintextWarning(); w != "" {
		as.errf("%s\n", w)
	}
	mddev := args[0]
	name, err := daemon.ArrayName(mddev)
	if err != nil {
		return exitf(ExitFailure, "%s is not a usable md device name", mddev)
	}
	lock, err := daemon.AcquireLock(daemon.PathsFor(o.srv.runDir, name))
	if errors.Is(err, daemon.ErrRunning) {
		return exitf(ExitFailure, "md_set_array_info() failed for %s: Device or resource busy", mddev)
	}
	if err != nil {
		return exitf(ExitFailure, "cannot lock %s: %v", mddev, err)
	}
	// Build opens every member (O_EXCL) before it creates a missing
	// bitmap file; a file it created stays when the array then does not
	// start.
	size, uri, err := buildOpenMembers(members)
	if err != nil {
		lock.Release()
		return err
	}
	if o.bitmap != "" {
		if as.o.bitmapFile, err = o.buildBitmapFile(size, uri); err != nil {
			lock.Release()
			return err
		}
	}
	if rc := as.startBuild(mddev, name, members, bp, lock); rc != ExitOK {
		lock.Release()
		return &ExitError{Code: rc}
	}
	return as.serve(ExitOK)
}

// startBuild launches the daemon's engine on the members with bp, and
// says so as Build() does.
func (as *assembler) startBuild(mddev, name string, members []string, bp engine.BuildParams, lock *daemon.Lock) ExitCode {
	devs := make([]*asmDev, len(members))
	order := make([]int, len(members))
	for i, p := range members {
		devs[i] = &asmDev{path: p, sb: &superblock.Superblock{DevNumber: uint32(bp.Roles[i])}, raidDisk: bp.Roles[i]}
		var st unix.Stat_t
		if !nbdclient.IsURI(p) && unix.Stat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK {
			devs[i].block, devs[i].rdev = true, st.Rdev
		}
		order[i] = i
	}
	lc := as.launchConfig(mddev, name, devs, order, lock)
	lc.Build = &bp
	lc.BitmapFile = as.o.bitmapFile
	svc, err := daemon.Launch(lc)
	if err != nil {
		var (
			oe *daemon.MemberOpenError
			re *daemon.RunError
		)
		switch {
		case errors.As(err, &oe):
			as.errf("Cannot open %s: %s\n", oe.Path, openReason(oe.Err))
			return ExitFailure
		case errors.As(err, &re) && errors.Is(re.Err, layout.ErrRAID0Layout):
			as.errf("RUN_ARRAY failed: Operation not supported\n")
		case errors.As(err, &re) && errors.Is(re.Err, layout.ErrInvalid):
			// a geometry md's personality refuses (raid10 without a
			// chunk: mdadm 4.2's Build gives md chunk 0)
			as.errf("RUN_ARRAY failed: Invalid argument\n")
		case errors.As(err, &re) && buildBitmapRunError(re.Err) != "":
			as.errf("RUN_ARRAY failed: %s\n", buildBitmapRunError(re.Err))
		case errors.As(err, &re):
			as.errf("RUN_ARRAY failed: %v\n", re.Err)
		default:
			as.launchFailed(mddev, err)
			return ExitFailure
		}
		if kib := bp.ChunkSectors / 2; kib&(kib-1) != 0 {
			fmt.Fprintf(as.env.Stderr, "       Problem may be that chunk size is not a power of 2\n") // cont_err
		}
		return ExitFailure
	}
	if as.verbose >= 0 {
		as.errf("array %s built and started.\n", mddev)
	}
	as.reportDoor(mddev, svc)
	as.started = append(as.started, &startedArray{name: name, dev: mddev, uuid: svc.Array().UUID(), svc: svc})
	return ExitOK
}
