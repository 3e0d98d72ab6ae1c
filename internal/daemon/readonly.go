package daemon

import (
	"time"

	"mdtool/engine"
)

// setReadOnly switches md's read-only mode on the running array, as
// STOP_ARRAY_RO and RESTART_ARRAY_RW do (md_set_readonly, restart_array):
// read-only refuses while a client has the array open (EBUSY; a client
// that has hung up no longer counts, as md's openers drop at close) and when it
// is read-only already (ENXIO); it stops the sync action, which waits
// (frozen) until the array is writable again, and writes get EROFS.
// Writable again refuses an array that is not read-only (EBUSY). An array
// assembled read-only stays so (the engine opened its members read-only).
// Called with s.mu held.
func (s *Service) setReadOnly(ro bool) error {
	a := s.cfg.Array
	if !ro {
		if s.cfg.ReadOnly {
			return Errorf(CodeUnsupported, "the array was assembled read-only")
		}
		if !s.backend.ro.Load() {
			return Errorf(CodeBusy, "the array is not read-only")
		}
		s.backend.ro.Store(false)
		// md writes the superblock change left pending while read-only
		if err := a.RecordReadWrite(); err != nil {
			s.cfg.Logf("superblock update after read-only mode: %v", err)
		}
		if err := a.StartAction(engine.ActionIdle); err != nil {
			return engineError(err)
		}
		s.cfg.Logf("md: %s switched to read-write mode.", s.cfg.Name)
		return nil
	}
	if n := liveConns(&s.nbdConns); n > 0 {
		return Errorf(CodeBusy, "md: %s still in use.", s.cfg.Name)
	}
	if s.cfg.ReadOnly || s.backend.ro.Load() {
		return Errorf(CodeNoDevice, "the array is read-only already")
	}
	s.backend.ro.Store(true)
	if err := a.StartAction(engine.ActionFrozen); err != nil {
		s.backend.ro.Store(false)
		return engineError(err)
	}
	if err := a.Flush(); err != nil {
		s.cfg.Logf("flush before read-only mode: %v", err)
	}
	// a write journal is quiesced: the cache written out, the tail moved
	if err := a.QuiesceJournal(); err != nil {
		s.cfg.Logf("journal before read-only mode: %v", err)
	}
	// md writes the superblocks clean as it goes read-only; with no
	// write coming, safe mode does it within its delay.
	for deadline := time.Now().Add(10 * time.Second); !a.Clean() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	s.cfg.Logf("md: %s switched to read-only mode.", s.cfg.Name)
	return nil
}
