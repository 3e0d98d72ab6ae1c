package daemon

import (
	"errors"

	"mdtool/engine"
	"mdtool/engine/layout"
)

// OpLevel changes the level of the array by md's takeover (mdadm
// --grow --level when no data has to move): {"op":"level","level":5}.
const OpLevel = "level"

// changeLevel is mdadm 4.2's impose_level: to raid0 it first removes the
// spares and fails and removes every member beyond the data roles (the
// parity of a parity-last raid5), then the engine takes the array over
// into the new level (md's level_store).
func (s *Service) changeLevel(req Request) (*Response, error) {
	if s.cfg.ReadOnly {
		return nil, Errorf(CodeReadOnly, "the array is read-only")
	}
	if req.Level == nil {
		return nil, Errorf(CodeInvalid, "level needs a level")
	}
	a := s.cfg.Array
	level := layout.Level(*req.Level)
	if level == layout.RAID0 && a.HasBitmap() {
		// raid0_takeover refuses a bitmap (EBUSY); refuse before
		// impose_level's removals leave the array degraded (mdadm
		// removes the bitmap first: cmd/grow_level_bitmap.go)
		return nil, Errorf(CodeBusy, "raid0 cannot take over an array with a bitmap")
	}
	if level == layout.RAID0 {
		if err := s.dropNonData(); err != nil {
			return nil, err
		}
	}
	if err := a.ChangeLevel(level); err != nil {
		if errors.Is(err, engine.ErrTakeover) {
			return nil, Errorf(CodeInvalid, "%v", err)
		}
		return nil, engineError(err)
	}
	s.takenRaid0.Store(level == layout.RAID0)
	s.cfg.Logf("level changed to %v", level)
	return &Response{}, nil
}

// dropNonData is impose_level's preparation for raid0: a raid4, or a
// raid5 with the parity-last layout, keeps its data roles; spares are removed, the
// members of the other roles failed and removed. Other arrays are left
// as they are (the takeover refuses them).
func (s *Service) dropNonData() error {
	a := s.cfg.Array
	st := a.Geometry()
	sp, ok := st.(*layout.Striped)
	if !ok || (sp.Level() != layout.RAID5 && sp.Level() != layout.RAID4) || sp.Algorithm() != layout.ParityLast {
		return nil
	}
	data := sp.DataDisks()
	// First the spares (so that no recovery starts onto one), then the
	// members of the other roles.
	for _, spares := range []bool{true, false} {
		for _, mi := range a.Members() {
			if mi.Device < 0 || (mi.Role >= 0 && mi.Role < data && mi.State == engine.InSync) || (mi.State == engine.Spare) != spares {
				continue
			}
			if mi.State != engine.Spare && mi.State != engine.Faulty {
				if err := a.FailDevice(mi.Device); err != nil {
					return engineError(err)
				}
			}
			if err := a.RemoveDevice(mi.Device); err != nil {
				return engineError(err)
			}
			s.memMu.Lock()
			s.removed[mi.Device] = true
			s.memMu.Unlock()
		}
	}
	return nil
}
