package cmd

import (
	"github.com/spf13/cobra"
)

// growOptions are mdadm --grow's options. grow.go parses them and picks
// the operation as mdadm 4.2's Grow mode does; each operation lives in its
// own file: grow_bitmap.go (--bitmap), grow_size.go (--size, --array-size,
// raid1 --raid-devices) and grow_reshape.go (everything that moves data
// between members).
type growOptions struct {
	bitmap      string // --bitmap: internal, none (or a file name, refused)
	bitmapChunk string // --bitmap-chunk
	size        string // --size/-z: max or a size (KiB unless suffixed)
	arraySize   string // --array-size/-Z: max or a size
	raidDevices int    // --raid-devices/-n; 0: unchanged
	level       string // --level/-l
	chunk       string // --chunk/-c
	layout      string // --layout/-p
	backupFile  string // --backup-file
	delay       string // --delay/-d: a new bitmap file's daemon sleep (seconds)
	add         []string
	assumeClean bool
	force       bool
	runDir      string
	verbose     int
}

const growLong = `Change a running array, as "mdadm --grow" (-G) does.

MD-DEVICE names an array served by an mdtool daemon (/dev/md/NAME, /dev/mdN,
NAME or mdN). The change is made online, through the daemon, while I/O
continues; only one kind of change is made per command, chosen as mdadm 4.2
chooses it:

  --bitmap=internal [--bitmap-chunk=N]   add a write-intent bitmap
  --bitmap=/path/FILE [--delay=S]        add a bitmap file (mdadm's CreateBitmap)
  --bitmap=none                          remove it
  --size=max|N (-z)                      use more (or less) of each member
  --array-size=max|N (-Z)                the size the array exports (not stored)
  --raid-devices=N (-n)                  raid1: add or drop mirrors
  --raid-devices=N (-n)                  raid4/5/6: reshape onto the spares,
                                         or onto fewer devices after
                                         --array-size
  --chunk=N (-c), --layout=L (-p)        raid4/5/6: restripe (data_offset
                                         moves, as mdadm 4.2 moves it without
                                         a backup file)
  --backup-file=F                        with any of the above: reshape in
                                         place, as mdadm 4.2 does with a
                                         backup file (data_offset unchanged;
                                         F keeps what a crash could lose and
                                         is removed at the end)
  --level=N [--layout=L] [--add DEV]     change the level: by md's takeover
                                         (no data moves; a spare recovers a
                                         new role), or by mdadm 4.2's
                                         takeover-and-restripe sequence

EXIT STATUS
  0  the change was made (or started)
  1  the change was refused or failed
  2  bad arguments`

func newGrowCmd(env *Env) *cobra.Command {
	var o growOptions
	c := &cobra.Command{
		Use:   "grow MD-DEVICE [flags]",
		Short: "Change a running array: bitmap, size, mirrors (mdadm --grow)",
		Long:  growLong,
		Example: `  mdtool --grow /dev/md/data --bitmap=internal --bitmap-chunk=64M
  mdtool --grow /dev/md/data --size=max
  mdtool --grow /dev/md/data --raid-devices=3 --add /dev/sdd`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if q, _ := c.Flags().GetBool("quiet"); q {
				o.verbose = -1
			}
			return runGrow(c, env, &o, args)
		},
	}
	f := c.Flags()
	f.StringVarP(&o.bitmap, "bitmap", "b", "", "add (internal, or a file: a path with a '/') or remove (none) the write-intent bitmap")
	f.StringVar(&o.bitmapChunk, "bitmap-chunk", "", "bitmap chunk size for --bitmap=internal or a file (KiB unless suffixed)")
	f.StringVarP(&o.delay, "delay", "d", "", "with --bitmap=FILE: seconds between bitmap flushes (default 5)")
	f.StringVarP(&o.size, "size", "z", "", "space to use on each device: max, or a size (KiB unless suffixed)")
	f.StringVarP(&o.arraySize, "array-size", "Z", "", "size of the exported array: max, or a size (not stored)")
	f.IntVarP(&o.raidDevices, "raid-devices", "n", 0, "new number of active devices")
	f.IntVar(&o.raidDevices, "raid-disks", 0, "alias of --raid-devices")
	f.StringVarP(&o.level, "level", "l", "", "new RAID level")
	f.StringVarP(&o.chunk, "chunk", "c", "", "new chunk size")
	f.StringVarP(&o.layout, "layout", "p", "", "new layout")
	f.StringVar(&o.layout, "parity", "", "alias of --layout")
	f.StringVar(&o.backupFile, "backup-file", "", "file for the critical section of a reshape")
	f.StringArrayVarP(&o.add, "add", "a", nil, "add this device as the array grows")
	f.BoolVar(&o.assumeClean, "assume-clean", false, "do not resync the region a --size grow adds")
	f.BoolVarP(&o.force, "force", "f", false, "allow what mdadm allows only with --force")
	addRunDirFlag(f, &o.runDir)
	for _, n := range []string{"raid-disks", "parity"} {
		_ = f.MarkHidden(n)
	}
	return c
}

// runGrow picks the operation as mdadm 4.2's Grow mode does.
func runGrow(c *cobra.Command, env *Env, o *growOptions, args []string) error {
	if len(args) == 0 {
		return usagef("no devices given.")
	}
	md, devs := args[0], args[1:]
	o.add = append(o.add, devs...)
	f := c.Flags()
	switch {
	case flagChanged(f, "bitmap"):
		return growBitmap(env, o, md)
	case flagChanged(f, "array-size") && !flagChanged(f, "size") && o.raidDevices == 0 &&
		o.level == "" && o.chunk == "" && o.layout == "":
		return growArraySize(env, o, md)
	case flagChanged(f, "size") || o.raidDevices != 0 || o.level != "" || o.chunk != "" || o.layout != "":
		return growShape(env, o, md)
	}
	return exitf(ExitFailure, "no changes to --grow")
}
