package daemon

import (
	"mdtool/engine"
)

// reAddBuilt is --re-add on an array without superblocks (mdadm 4.2's
// Manage_add for a not_persistent array: no superblock is read or
// written; the device goes back into the lowest role no working member
// holds, with MD_DISK_SYNC, which md 6.1 keeps as its saved_raid_disk).
// With a bitmap (build --bitmap=FILE) only the dirty chunks are
// recovered, without one the whole role. mdadm then says "added". A
// faulty member still in the array is re-added through md's state file
// (reAddFaulty), as mdadm tries first.
func (s *Service) reAddBuilt(req Request) (*Response, error) {
	a := s.cfg.Array
	resp := &Response{Number: s.nextNumber()}
	fail := func(err error) (*Response, error) { return failWith(resp, err) }
	if idx := s.findMember(req.Device); idx >= 0 {
		if info := s.memberInfo(idx); info != nil && info.State == engine.Faulty {
			// mdadm writes "re-add" to its dev-*/state first: md puts
			// a faulty member back into its saved role whatever the
			// array's persistence. It keeps its descriptor number.
			num := s.spec(idx).DevNumber
			r, err := s.reAddFaulty(req, idx)
			if n := s.findMember(req.Device); err == nil && n >= 0 {
				s.memMu.Lock()
				s.cfg.Members[n].DevNumber = num
				s.memMu.Unlock()
				r.Number = num
			}
			return r, err
		}
		// The array holds the device: mdadm's exclusive open fails.
		return fail(Errorf(CodeOpen, "Device or resource busy"))
	}
	if s.cfg.ReadOnly {
		return fail(Errorf(CodeReadOnly, "the array is read-only"))
	}
	if !s.enough() {
		return fail(Errorf(CodeArrayFailed, "the array has failed"))
	}
	fd, dev, spec, err := s.openMember(req.Device)
	if err != nil {
		return fail(err)
	}
	idx, err := a.AddDevice(dev, engine.AddOptions{ReAdd: true, Replacement: -1, WriteMostly: req.WriteMostly,
		FailFast: req.FailFast, Major: spec.Major, Minor: spec.Minor})
	if err != nil && idx < 0 {
		dev.Close()
		fd.Close()
		return fail(engineError(err))
	}
	size := fd.Geometry().Size
	s.recordMember(idx, spec, size)
	s.memMu.Lock()
	s.cfg.Members[idx].DevNumber = resp.Number // Manage_add's disc.number
	s.memMu.Unlock()
	if err != nil {
		return fail(engineError(err))
	}
	s.awaitRecoveryStart()
	resp.Result = ResultAdded
	s.cfg.Logf("md: %s %s as device %d", req.Device, ResultAdded, idx)
	return resp, nil
}
