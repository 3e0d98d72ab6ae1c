package cmd

import (
	"fmt"
	"path/filepath"
)

// backupNeeded is Assemble's words when Grow_restart found no backup of
// an in-place reshape's critical section that the superblocks say was
// in flight.
func (as *assembler) backupNeeded() {
	as.errf("Failed to restore critical section for reshape, sorry.\n")
	if as.o.backupFile == "" {
		fmt.Fprintf(as.env.Stderr, "       Possibly you needed to specify the --backup-file\n")
	}
}

// absBackupFile makes --backup-file absolute: the background daemon
// opens (and at the reshape's end removes) it.
func absBackupFile(o *assembleOptions) {
	if o.backupFile == "" {
		return
	}
	if p, err := filepath.Abs(o.backupFile); err == nil {
		o.backupFile = p
	}
}
