package daemon

import (
	"encoding/hex"
	"errors"
	"fmt"
	"syscall"

	"mdtool/internal/serve/dmshim"
	"mdtool/internal/serve/export"
	"mdtool/internal/serve/ublkexport"
	"mdtool/ioctl"
)

// The geometry shim (internal/serve/dmshim): when the door cannot carry
// the array's minimum_io_size (chunk) and optimal_io_size (full stripe)
// exactly — NBD carries no hints, ublk only powers of two — the door
// serves the array through dmshim's permutation and a device-mapper
// "striped" device on top of it is the array's block device (/dev/dm-N):
// it announces the geometry, and its mapping undoes the permutation.

// shimDoor is a door under the shim: Path is the dm device's; Kind and
// Index are the door's (the run-dir record re-attaches the door).
type shimDoor struct {
	Door
	dev *dmshim.Device
}

func (d shimDoor) Path() string { return d.dev.Path() }

// Detach removes the dm device (an open one — a forced stop — gets the
// error target and goes when closed), then detaches the door.
func (d shimDoor) Detach() error {
	err := d.dev.Remove(true)
	return errors.Join(err, d.Door.Detach())
}

// shimName is the dm device name of the array, shimUUID its dm uuid.
func (s *Service) shimName() string {
	n := "mdtool-" + s.cfg.Name
	if len(n) > 127 {
		n = n[:127]
	}
	return n
}

func (s *Service) shimUUID() string {
	u := s.cfg.Array.UUID()
	return "mdtool-" + hex.EncodeToString(u[:])
}

// shimGeometry is the shim's geometry for the array, if it has a chunk
// and a full stripe of whole chunks.
func (s *Service) shimGeometry() (dmshim.Geometry, bool) {
	a := s.cfg.Array
	chunk, opt := a.IOMin(), a.IOOpt()
	if chunk <= 0 || opt < chunk || opt%chunk != 0 {
		return dmshim.Geometry{}, false
	}
	g := dmshim.Geometry{Size: s.backend.Size(), Chunk: chunk, Stripes: opt / chunk}
	return g, g.Valid()
}

// shimWanted says whether the door of kind gets the shim (shimDecision).
func (s *Service) shimWanted(kind string, rec *DoorRecord) (dmshim.Geometry, bool) {
	g, ok := s.shimGeometry()
	use, note := shimDecision(kind, rec, s.backendID(), g, ok, dmshim.Available)
	if note != "" {
		s.cfg.Logf("%s", note)
	}
	return g, use
}

// shimDecision: as recorded when the door a killed daemon of the array
// (id) left is re-attached (its users keep seeing the same addresses),
// else when the array has a striped geometry g (ok) that the door cannot
// say and device-mapper is there (avail). note is for the log (a recorded
// shim that cannot be kept).
func shimDecision(kind string, rec *DoorRecord, id string, g dmshim.Geometry, ok bool, avail func() error) (use bool, note string) {
	if rec != nil && rec.Kind == kind && rec.Backend == id {
		if rec.Shim != "" && !ok {
			note = fmt.Sprintf("%s had the geometry shim %s, but the array has no striped geometry now", rec.Path, rec.Shim)
		}
		return ok && rec.Shim != "", note
	}
	if !ok {
		return false, ""
	}
	if kind == DoorUblk {
		chunk, opt := uint32(g.Chunk), uint32(g.Chunk*g.Stripes)
		if ublkexport.Hint(chunk) == chunk && ublkexport.Hint(opt) == opt {
			return false, "" // ublk says it exactly
		}
	}
	if avail() != nil {
		// the door alone, without a word: mdadm's text stays as it is
		return false, ""
	}
	return true, ""
}

// doorBackend is what a door of kind serves: the array, or its permutation
// when the shim goes on top (s.shimGeo set).
func (s *Service) doorBackend(kind string, rec *DoorRecord) export.Backend {
	s.shimGeo = nil
	g, ok := s.shimWanted(kind, rec)
	if !ok {
		return s.backend
	}
	b, err := dmshim.NewBackend(s.backend, g)
	if err != nil {
		s.cfg.Logf("geometry shim: %v", err)
		return s.backend
	}
	s.shimGeo = &g
	return b
}

// attachShim puts the dm device on the door just attached when its
// Backend is the permutation: a new one, or the one a killed daemon left
// (re-pointed at the door if that was attached anew). On failure the door
// is detached: its addresses are not the array's.
func (s *Service) attachShim() error {
	if s.shimGeo == nil {
		return nil
	}
	dev, _, err := dmshim.Ensure(s.shimName(), s.shimUUID(), s.door.Path(), *s.shimGeo)
	if err != nil {
		s.door.Detach()
		s.door = nil
		return err
	}
	s.door = shimDoor{Door: s.door, dev: dev}
	return nil
}

// releaseStaleShim removes the dm device a killed daemon of this array
// left, when this one attaches no shim (not while it is open).
func (s *Service) releaseStaleShim(rec *DoorRecord) {
	if rec == nil || rec.Shim == "" || (s.door != nil && shimOf(s.door) == rec.Shim) {
		return
	}
	if err := ioctl.DMRemove(rec.Shim); err != nil && !errors.Is(err, syscall.ENXIO) {
		s.cfg.Logf("removing the geometry shim %s: %v", rec.Shim, err)
	}
}

// shimOf is the dm device name of a door ("" without the shim), and
// lowerPath the door's own device.
func shimOf(d Door) string {
	if sd, ok := d.(shimDoor); ok {
		return sd.dev.Name
	}
	return ""
}

func lowerPath(d Door) string {
	if sd, ok := d.(shimDoor); ok {
		return sd.Door.Path()
	}
	return ""
}
