package cmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"mdtool/internal/daemon"
	"mdtool/internal/mdadm/plan"
)

// maxSize stands for "--size=max" (mdadm's MAX_SIZE).
const maxSize = ^uint64(0)

// growTimeout bounds one grow request to the daemon.
const growTimeout = 10 * time.Minute

// growDial connects to the daemon serving md; an array nobody serves is
// "not an active md array", as mdadm's GET_ARRAY_INFO failure says.
func growDial(o *growOptions, md string) (*daemon.Client, *daemon.Status, error) {
	name, err := daemon.ArrayName(md)
	if err != nil {
		return nil, nil, exitf(ExitFailure, "%s is not an active md array - aborting", md)
	}
	cl, err := daemon.Dial(o.runDir, name)
	if errors.Is(err, daemon.ErrNotRunning) {
		return nil, nil, exitf(ExitFailure, "%s is not an active md array - aborting", md)
	}
	if err != nil {
		return nil, nil, exitf(ExitFailure, "cannot reach the daemon of %s: %v", md, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := cl.Status(ctx)
	if err != nil {
		cl.Close()
		return nil, nil, exitf(ExitFailure, "cannot reach the daemon of %s: %v", md, err)
	}
	return cl, st, nil
}

// growArraySize sets the exported size (--array-size, not stored), as
// mdadm's main does before any other grow: "max" writes "default" to md's
// array_size.
func growArraySize(env *Env, o *growOptions, md string) error {
	sectors, err := parseArraySize(o.arraySize)
	if err != nil {
		return err
	}
	if o.raidDevices != 0 || o.level != "" {
		return exitMsg(ExitFailure, "cannot change array size in same operation as changing raiddisks or level.\n"+
			"    Change size first, then check that data is still intact.")
	}
	cl, _, err := growDial(o, md)
	if err != nil {
		return err
	}
	defer cl.Close()
	return setArraySize(cl, sectors)
}

// parseArraySize parses --array-size: "max" (0 here: md's "default") or
// a size (KiB unless suffixed).
func parseArraySize(s string) (uint64, error) {
	if s == "max" {
		return 0, nil
	}
	sec, err := plan.ParseSectors(s)
	if err != nil || sec/2 == 0 {
		return 0, usagef("invalid array size: %s", s)
	}
	return sec / 2 * 2, nil
}

func setArraySize(cl *daemon.Client, sectors uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), growTimeout)
	defer cancel()
	_, err := cl.Call(ctx, daemon.Request{Op: daemon.OpArraySize, SizeSectors: sectors})
	var oe *daemon.OpError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &oe) && oe.Code == daemon.CodeTooBig:
		return exitf(ExitFailure, "--array-size setting is too large.")
	}
	return exitf(ExitFailure, "current kernel does not support setting --array-size")
}

// growShape handles mdadm's Grow_reshape: --size, raid1 --raid-devices, and
// (through growReshape) the changes that move data.
func growShape(env *Env, o *growOptions, md string) error {
	var arraySectors uint64
	if o.arraySize != "" {
		var err error
		if arraySectors, err = parseArraySize(o.arraySize); err != nil {
			return err
		}
		if o.raidDevices != 0 || o.level != "" {
			return exitMsg(ExitFailure, "cannot change array size in same operation as changing raiddisks or level.\n"+
				"    Change size first, then check that data is still intact.")
		}
	}
	var sizeKiB uint64
	if o.size != "" {
		if o.size == "max" {
			sizeKiB = maxSize
		} else {
			var err error
			if sizeKiB, err = plan.ParseSize(o.size); err != nil {
				return usagef("invalid size: %s", o.size)
			}
		}
	}
	if len(o.add) > 0 && o.raidDevices == 0 && o.level == "" && (sizeKiB > 0 || o.chunk != "" || o.layout != "") {
		return exitf(ExitFailure, "--add cannot be used with other geometry changes in --grow mode")
	}
	cl, st, err := growDial(o, md)
	if err != nil {
		return err
	}
	defer cl.Close()
	if o.arraySize != "" {
		if err := setArraySize(cl, arraySectors); err != nil {
			return err
		}
	}
	if sizeKiB > 0 && (o.chunk != "" || o.level != "" || o.layout != "" || o.raidDevices != 0) {
		return exitMsg(ExitFailure, "cannot change component size at the same time as other changes.\n"+
			"   Change size first, then check data is intact before making other changes.")
	}
	if st.Level > 1 && sizeKiB > 1 && uint64(st.ChunkBytes/1024) > sizeKiB {
		return exitf(ExitFailure, "component size must be larger than chunk size.")
	}
	if sizeKiB == 0 && (o.level != "" || o.chunk != "" || o.layout != "" || st.Level != 1) {
		return growReshape(env, o, md)
	}
	unfreeze, err := growFreeze(cl, st, md)
	if err != nil {
		return err
	}
	defer unfreeze()
	changed := false
	if sizeKiB > 0 && (sizeKiB == maxSize || sizeKiB != st.ComponentSectors/2) {
		if err := growComponentSize(env, o, cl, st, md, sizeKiB); err != nil {
			return err
		}
		changed = true
	}
	if o.raidDevices == 0 || o.raidDevices == st.RaidDisks {
		if !changed && o.verbose >= 0 {
			fmt.Fprintf(env.Stderr, "mdtool: %s: no change requested\n", md)
		}
		return nil
	}
	return growRaid1Disks(env, o, cl, st, md)
}

// growFreeze is mdadm's freeze(): a resync, check or repair in progress
// refuses the change; a recovery is frozen until the change is made.
func growFreeze(cl *daemon.Client, st *daemon.Status, md string) (func(), error) {
	switch st.SyncAction {
	case "idle", "frozen", "":
		return func() {}, nil
	case "recover":
	default:
		return nil, exitf(ExitFailure, "%s is performing resync/recovery and cannot be reshaped", md)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cl.Call(ctx, daemon.Request{Op: daemon.OpAction, Action: "frozen"}); err != nil {
		return nil, exitf(ExitFailure, "%s is performing resync/recovery and cannot be reshaped", md)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cl.Call(ctx, daemon.Request{Op: daemon.OpAction, Action: "idle"})
	}, nil
}

// growComponentSize is the "set size" step of Grow_reshape.
func growComponentSize(env *Env, o *growOptions, cl *daemon.Client, st *daemon.Status, md string, sizeKiB uint64) error {
	req := daemon.Request{Op: daemon.OpGrowSize, AssumeClean: o.assumeClean}
	if sizeKiB != maxSize {
		req.SizeSectors = sizeKiB * 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), growTimeout)
	defer cancel()
	resp, err := cl.Call(ctx, req)
	if err != nil {
		var oe *daemon.OpError
		reason := err.Error()
		if errors.As(err, &oe) {
			switch oe.Code {
			case daemon.CodeBusy:
				reason = "Device or resource busy"
			case daemon.CodeNoSpace:
				reason = "No space left on device"
			case daemon.CodeUnsupported, daemon.CodeInvalid:
				reason = "Invalid argument"
			case daemon.CodeReadOnly:
				reason = "Read-only file system"
			}
		}
		msg := fmt.Sprintf("Cannot set device size for %s: %s", md, reason)
		if oe != nil && oe.Code == daemon.CodeBusy && st.Bitmap {
			msg += "\n       Bitmap must be removed before size can be changed"
		}
		return exitMsg(ExitFailure, msg)
	}
	if o.verbose >= 0 {
		orig, now := st.ComponentSectors/2, resp.NewSectors/2
		if now == orig {
			fmt.Fprintf(env.Stderr, "mdtool: component size of %s unchanged at %dK\n", md, now)
		} else {
			fmt.Fprintf(env.Stderr, "mdtool: component size of %s has been set to %dK\n", md, now)
		}
	}
	return nil
}

// growRaid1Disks changes the number of raid1 mirrors: mdadm's spare
// check, the devices given added first (as --add), then raid_disks set
// ("raid_disks for MD set to N" on stdout, "failed to set raid disks" when
// md refuses, e.g. fewer mirrors than active members).
func growRaid1Disks(env *Env, o *growOptions, cl *daemon.Client, st *daemon.Status, md string) error {
	if o.raidDevices > st.RaidDisks {
		spares := 0
		for _, m := range st.Members {
			if m.State == "spare" {
				spares++
			}
		}
		need := o.raidDevices - st.RaidDisks
		if spares+len(o.add) < need && !o.force {
			s := "s"
			if need == 1 {
				s = ""
			}
			return exitMsg(ExitFailure, fmt.Sprintf("Need %d spare%s to avoid degraded array, and only have %d.\n"+
				"       Use --force to over-ride this check.", need, s, spares+len(o.add)))
		}
	}
	if len(o.add) > 0 {
		args := append([]string{"manage", "--run-dir", o.runDir, md, "--add"}, o.add...)
		if rc := Main(args, env); rc != 0 {
			return exitStatus(ExitFailure)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), growTimeout)
	defer cancel()
	if _, err := cl.Call(ctx, daemon.Request{Op: daemon.OpRaidDevices, RaidDisks: o.raidDevices}); err != nil {
		return exitf(ExitFailure, "failed to set raid disks")
	}
	if o.verbose >= 0 {
		fmt.Fprintf(env.Stdout, "raid_disks for %s set to %d\n", md, o.raidDevices)
	}
	return nil
}
