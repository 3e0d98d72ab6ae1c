package daemon

import (
	"errors"

	"mdtool/engine"
)

// Grow operations on the size of the array (mdadm --grow --size and
// --array-size):
//
//	{"op":"grow-size","size_sectors":0,"assume_clean":false} -> old_sectors, new_sectors
//	{"op":"array-size","size_sectors":0}                      -> ok
//
// size_sectors 0 means "max" (grow-size) or "default" (array-size).
const (
	OpGrowSize  = "grow-size"
	OpArraySize = "array-size"
	// OpRaidDevices sets the number of raid1 mirrors (RaidDisks).
	OpRaidDevices = "raid-devices"
)

// More error codes of a Response.
const (
	CodeNoSpace = "no-space" // ENOSPC: a member has no room for the size
	CodeTooBig  = "too-big"  // E2BIG: an array size beyond the component sizes
)

// growSize changes the component size (md's update_size).
func (s *Service) growSize(req Request) (*Response, error) {
	ch, err := s.cfg.Array.GrowSize(req.SizeSectors, req.AssumeClean)
	if err != nil {
		return nil, growError(err)
	}
	s.cfg.Logf("component size %d -> %d sectors (assume-clean: %v)", ch.Old, ch.New, req.AssumeClean)
	// A 1.0 superblock moved to the new end of its member.
	s.memMu.Lock()
	for i := range s.cfg.Members {
		if off, ok := s.cfg.Array.SuperOffset(i); ok {
			s.cfg.Members[i].SBOffset = int64(off) * 512
		}
	}
	s.memMu.Unlock()
	return &Response{OldSectors: ch.Old, NewSectors: ch.New}, nil
}

// arraySize sets the exported size (md's array_size).
func (s *Service) arraySize(req Request) (*Response, error) {
	if err := s.cfg.Array.SetArraySize(req.SizeSectors); err != nil {
		return nil, growError(err)
	}
	s.cfg.Logf("array size set to %d sectors (0: default)", req.SizeSectors)
	return &Response{}, nil
}

// raidDevices changes the number of raid1 mirrors (md's raid1_reshape).
func (s *Service) raidDevices(req Request) (*Response, error) {
	if err := s.cfg.Array.SetRaidDisks(req.RaidDisks); err != nil {
		return nil, growError(err)
	}
	s.cfg.Logf("raid_disks set to %d", req.RaidDisks)
	return &Response{}, nil
}

func growError(err error) error {
	switch {
	case errors.Is(err, engine.ErrNoSpace):
		return Errorf(CodeNoSpace, "%v", err)
	case errors.Is(err, engine.ErrTooBig):
		return Errorf(CodeTooBig, "%v", err)
	}
	return engineError(err)
}
