package engine

import (
	"errors"
	"fmt"
)

// JournalMode is md's journal_mode (r5c_journal_mode): how the write
// journal of a raid4/5/6 array takes writes.
type JournalMode int

const (
	// JournalWriteThrough: a stripe write is logged with its parity and
	// then written to the members before it completes (md's default,
	// and the mode every start begins in).
	JournalWriteThrough JournalMode = iota
	// JournalWriteBack: a write completes once its data is durable in the
	// journal; the data stays cached and goes to the members (with its
	// parity, logged first) later: when the cache or the log fills, when
	// the mode changes back, a member fails, and at the stop.
	JournalWriteBack
)

func (m JournalMode) String() string {
	if m == JournalWriteBack {
		return "write-back"
	}
	return "write-through"
}

// ParseJournalMode reads md's names for the modes.
func ParseJournalMode(s string) (JournalMode, error) {
	switch s {
	case "write-through":
		return JournalWriteThrough, nil
	case "write-back":
		return JournalWriteBack, nil
	}
	return 0, fmt.Errorf("%w: journal mode %q (write-through or write-back)", ErrInvalidArgument, s)
}

// ErrNoJournal: the array has no running write journal (md's
// journal_mode store: ENODEV).
var ErrNoJournal = errors.New("engine: the array has no running write journal")

// ErrDegradedWriteBack: md refuses write-back mode on a degraded array
// (r5c_journal_mode_set: EINVAL).
var ErrDegradedWriteBack = fmt.Errorf("%w: write-back journal mode on a degraded array", ErrInvalidArgument)

// ErrInvalidArgument is md's EINVAL for a setting it refuses.
var ErrInvalidArgument = errors.New("engine: invalid argument")

// HasJournal reports whether the array started with its write journal
// device (md's conf->log): it still has it when the device failed since.
func (a *Array) HasJournal() bool { return a.jm != nil }

// JournalMode is the journal's current mode (write-through when the
// array has none running).
func (a *Array) JournalMode() JournalMode {
	if a.jnl == nil {
		return JournalWriteThrough
	}
	return a.jnl.getMode()
}

// SetJournalMode is md's journal_mode store: the journal takes writes in
// mode m from now on. Going to write-through writes everything cached to
// the members first (md suspends the array, which flushes its cache).
func (a *Array) SetJournalMode(m JournalMode) error {
	if m != JournalWriteThrough && m != JournalWriteBack {
		return fmt.Errorf("%w: journal mode %d", ErrInvalidArgument, m)
	}
	if a.jnl == nil {
		return ErrNoJournal
	}
	if m == JournalWriteBack && a.Degraded() > 0 {
		return ErrDegradedWriteBack
	}
	if err := a.enter(0); err != nil {
		return err
	}
	defer a.leave(0)
	return a.jnl.setMode(m)
}

// QuiesceJournal is the write journal's part of md_set_readonly
// (raid5_quiesce, r5l_quiesce): the write-back cache is written out and
// the tail moves to the newest io_unit on the members, recorded in the
// superblocks (an event) when it moved.
func (a *Array) QuiesceJournal() error {
	j := a.jnl
	if j == nil {
		return nil
	}
	if err := a.enter(0); err != nil {
		return err
	}
	defer a.leave(0)
	j.subMu.Lock()
	defer j.subMu.Unlock()
	if err := j.flushCacheLocked(); err != nil {
		return err
	}
	if _, _, moved := j.tailTarget(); !moved {
		return nil
	}
	return j.checkpoint()
}

// RecordReadWrite is what md writes when a read-only array becomes
// writable again (RESTART_ARRAY_RW): md_check_recovery reaped the sync
// thread while the array was read-only, and md_reap_sync_thread's
// md_update_sb(mddev, 1) could only leave MD_SB_CHANGE_DEVS pending; md
// writes it now, an event. raid0 and linear have no md thread to reap
// anything: none.
func (a *Array) RecordReadWrite() error {
	if a.opts.ReadOnly {
		return ErrReadOnly
	}
	if !a.redundant() {
		return nil // raid0, linear: no md thread, no md_check_recovery
	}
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	a.meta.changeDevs = true
	return a.updateSuperLocked(true)
}
