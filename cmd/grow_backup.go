package cmd

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"mdtool/internal/daemon"
)

// Reshapes with --backup-file (mdadm 4.2's reshape_array without
// set_new_data_offset): given a file, mdadm 4.2 never moves data_offset;
// the reshape runs in place, and the data a crash could lose is kept in
// the file while it moves (the engine's in-place reshapes: a growth's
// critical section once, a shrink's last windows, every window of a
// change that keeps the number of data devices). The file is created as
// reshape_open_backup_file creates it; the daemon removes it when the
// reshape ends.

// inPlace says whether a restripe runs in place: whenever a backup
// file is given, as in mdadm 4.2.
func inPlace(o *growOptions) bool {
	return o.backupFile != ""
}

// inPlaceBlocks is reshape_array's reshape unit from "started:" on: the
// backup blocks, doubled for a change that keeps the number of data
// devices while 32 units fit the component and the unit stays below 16M.
func inPlaceBlocks(r restripe, component uint64) uint64 {
	blocks := r.backupBlocks
	if r.re.afterData == r.re.beforeData {
		for blocks*32 < component && blocks < 16*1024*2 {
			blocks *= 2
		}
	}
	return blocks
}

// createBackupFile is reshape_array's "started:" path up to
// reshape_open_backup_file: the file must not exist (O_EXCL), must not be
// on the array itself, and is filled with zeroes for the backup and its 8
// header sectors (synced).
func createBackupFile(env *Env, o *growOptions, md string, r restripe, component uint64) error {
	blocks := inPlaceBlocks(r, component)
	if r.re.afterData != r.re.beforeData {
		fmt.Fprintf(env.Stderr, "mdtool: Need to backup %dK of critical section..\n", blocks/2)
	}
	if blocks >= component/2 {
		return exitf(ExitFailure, "%s: Something wrong - reshape aborted", md)
	}
	f, err := os.OpenFile(o.backupFile, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return exitf(ExitFailure, "%s: cannot create backup file %s: %s", md, o.backupFile, strerror(err))
	}
	defer f.Close()
	if onArray(f, md) {
		os.Remove(o.backupFile)
		return exitf(ExitFailure, "backup file must NOT be on the array being reshaped.")
	}
	zero := make([]byte, 512)
	w := io.Writer(f)
	for i := uint64(0); i < blocks+8; i++ {
		if _, err := w.Write(zero); err != nil {
			return exitf(ExitFailure, "%s: cannot create backup file %s: %s", md, o.backupFile, strerror(err))
		}
	}
	if err := f.Sync(); err != nil {
		return exitf(ExitFailure, "%s: cannot create backup file %s: %s", md, o.backupFile, strerror(err))
	}
	return nil
}

// onArray is mdadm's guard: the backup file's filesystem is the array's
// block device (the md name, or the door it links to).
func onArray(f *os.File, md string) bool {
	var fs, ms syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &fs); err != nil {
		return false
	}
	if err := syscall.Stat(md, &ms); err != nil || ms.Mode&syscall.S_IFMT != syscall.S_IFBLK {
		return false
	}
	return ms.Rdev == fs.Dev
}

// backupRequest adds the backup file to an in-place reshape's request.
func backupRequest(req daemon.Request, o *growOptions) daemon.Request {
	if inPlace(o) {
		req.BackupFile = o.backupFile
		if p, err := filepath.Abs(o.backupFile); err == nil {
			req.BackupFile = p // the daemon's working directory is not ours
		}
	}
	return req
}

// slideSetup adds to an in-place reshape's request (one that keeps or
// lowers the data devices) what mdadm 4.2's reshape_array does to md on
// its "started:" path before the reshape starts: update_cache_size with
// the reshape unit (inPlaceBlocks) and, when only raid_disks changes,
// SET_ARRAY_INFO
// (impose_reshape). Both cost superblock updates (engine.ReshapeStart).
func slideSetup(req *daemon.Request, o *growOptions, r restripe, component uint64) {
	if !inPlace(o) || r.re.afterData > r.re.beforeData || r.re.afterData <= 0 {
		return
	}
	blocks := inPlaceBlocks(r, component)
	cache := uint64(max(r.oldChunk, r.newChunk)) * 4 / 512 // 4 stripes of the larger chunk, sectors
	if least := 16 + blocks/uint64(r.re.afterData); cache < least {
		cache = least
	}
	req.StripeCache = int(cache / (4096 / 512))
	req.SetArrayInfo = r.oldChunk == r.newChunk && r.re.beforeLayout == r.re.afterLayout
}
