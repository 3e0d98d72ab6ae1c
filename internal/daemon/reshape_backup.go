package daemon

import (
	"errors"
	"os"

	"mdtool/engine"
)

// Reshapes in place keep their critical section in a backup file
// (mdadm's --backup-file): the caller (grow) creates it as mdadm's
// reshape_open_backup_file does; the daemon opens it for the engine,
// and removes it when the reshape ends, as mdadm's forked child does.

// openReshapeBackup opens the backup file grow created.
func openReshapeBackup(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, Errorf(CodeInvalid, "cannot open backup file %s: %v", path, err)
	}
	return f, nil
}

// openWithBackup is engine.Open with lc's backup file, if any, for the
// engine to restore a critical section from (Grow_restart). A backup
// file that cannot be opened is logged and left out, as mdadm goes on
// without it ("backup file ... inaccessible").
func openWithBackup(lc *LaunchConfig, edevs []engine.Device) (*engine.Array, error) {
	opts := launchOptions(lc)
	if err := openBitmapFile(lc, &opts); err != nil {
		return nil, err
	}
	if lc.BackupFile != "" {
		// read-write: an in-place reshape that keeps or lowers the data
		// devices continues backing up into it (mdadm's child)
		f, err := os.OpenFile(lc.BackupFile, os.O_RDWR, 0)
		if err != nil {
			f, err = os.Open(lc.BackupFile)
		}
		if err != nil {
			if lc.Logf != nil {
				lc.Logf("backup file %s inaccessible: %v", lc.BackupFile, errors.Unwrap(err))
			}
		} else {
			opts.ReshapeBackup = f
		}
	}
	a, err := engine.Open(edevs, opts)
	if err != nil || !a.UsesReshapeBackup() {
		if f, ok := opts.ReshapeBackup.(*os.File); ok {
			f.Close()
		}
	}
	return a, err
}

// removeBackupAfterReshape waits for the reshape to end (not for the
// daemon's stop) and removes its backup file; f, when not nil, is the
// file the reshape wrote, closed once it is over (on a stop the engine
// may still write it while it closes: it stays open then).
func (s *Service) removeBackupAfterReshape(path string, f *os.File) {
	if !s.waitReshapeEnd() {
		return
	}
	if f != nil {
		f.Close()
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		s.cfg.Logf("could not remove backup file %s: %v", path, err)
	}
}
