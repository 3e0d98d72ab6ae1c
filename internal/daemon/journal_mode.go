package daemon

import (
	"errors"

	"mdtool/engine"
)

// journalMode is OpJournalMode: md's journal_mode store
// (r5c_journal_mode_store, Linux 6.1): an unknown name or write-back on a
// degraded array is EINVAL (CodeInvalid), an array without a running
// journal ENODEV (CodeNoJournal).
func (s *Service) journalMode(req Request) error {
	m, err := engine.ParseJournalMode(req.JournalMode)
	if err != nil {
		return Errorf(CodeInvalid, "%v", err)
	}
	if err := s.cfg.Array.SetJournalMode(m); err != nil {
		switch {
		case errors.Is(err, engine.ErrNoJournal):
			return Errorf(CodeNoJournal, "%v", err)
		case errors.Is(err, engine.ErrInvalidArgument):
			return Errorf(CodeInvalid, "%v", err)
		}
		return engineError(err)
	}
	s.cfg.Logf("md: journal mode %s", m)
	return nil
}

// journalModeOf is the Status's JournalMode: md's journal_mode when the
// array started with its write journal device (conf->log, kept when the
// device fails), "" otherwise (md's journal_mode reads empty).
func journalModeOf(a *engine.Array) string {
	if !a.HasJournal() {
		return ""
	}
	return a.JournalMode().String()
}
