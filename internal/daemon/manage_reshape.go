package daemon

import (
	"context"
	"time"

	"mdtool/engine/layout"
)

// reshape starts a restriping reshape (engine.StartReshape): more or
// fewer devices, a new layout or chunk size; the engine's sync thread
// then moves the data. With FinalLevel the level is changed when the
// reshape ends, as mdadm 4.2's forked child does (wait_reshape, then
// impose_level). That child lives only as long as the command that
// started it: after a restart (mdadm's Grow_continue at assembly returns
// at once for a reshape that moves data_offset) the array stays at the
// level the reshape ran at, and so it does here.
func (s *Service) reshape(req Request) error {
	if s.cfg.ReadOnly {
		return Errorf(CodeReadOnly, "the array is read-only")
	}
	if req.RaidDisks < 0 {
		return Errorf(CodeInvalid, "reshape needs a number of devices")
	}
	if req.RaidDisks == 0 && req.Layout == nil && req.ChunkSectors == 0 {
		return Errorf(CodeInvalid, "reshape needs a number of devices, a layout or a chunk size")
	}
	bf, err := s.startReshape(req)
	if err != nil {
		return err
	}
	s.cfg.Logf("reshape started (raid_disks %d)", s.cfg.Array.Geometry().RaidDisks())
	if req.BackupFile != "" {
		go s.removeBackupAfterReshape(req.BackupFile, bf)
	}
	if req.FinalLevel != nil {
		go s.levelAfterReshape(layout.Level(*req.FinalLevel))
	}
	return nil
}

// levelAfterReshape waits for the reshape to end and imposes level.
func (s *Service) levelAfterReshape(level layout.Level) {
	if !s.waitReshapeEnd() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return
	}
	lv := int(level)
	if _, err := s.changeLevel(Request{Op: OpLevel, Level: &lv}); err != nil {
		s.cfg.Logf("could not set level to %v after the reshape: %v", level, err)
		return
	}
	s.cfg.Logf("level of %s changed to %v", s.cfg.Name, level)
}

// waitReshapeEnd waits until the array runs no reshape; false when the
// daemon stops first.
func (s *Service) waitReshapeEnd() bool {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	a := s.cfg.Array
	for {
		if active, _ := a.Reshaping(); !active {
			break
		}
		if err := a.WaitSync(ctx); err != nil {
			return false
		}
		select { // a reshape recorded but not running (frozen): look again later
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	return true
}
