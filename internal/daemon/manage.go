package daemon

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"mdtool/engine"
	"mdtool/engine/layout"
	"mdtool/internal/mdadm/member"
	"mdtool/internal/mdadm/plan"
	"mdtool/internal/mdadm/probe"
	"mdtool/internal/nbdclient"
	"mdtool/ioctl"
	"mdtool/superblock"
)

// Manage runs a manage operation (mdadm --fail, --remove, --add,
// --re-add, --add-spare, --replace), a sync control (sync_action,
// sync_speed_min/max) or the journal's mode (journal_mode). Operations
// are serialised with each other and with Stop.
func (s *Service) Manage(req Request) (*Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil, Errorf(CodeFailed, "the array is stopping")
	}
	if err := s.refuseBuilt(req.Op); err != nil {
		return nil, err
	}
	switch req.Op {
	case OpFail:
		return nil, s.fail(req.Device)
	case OpRemove:
		return nil, s.remove(req.Device)
	case OpAdd, OpReAdd, OpAddSpare:
		if req.Op == OpReAdd && !s.cfg.Array.Persistent() {
			return s.reAddBuilt(req) // build_readd.go
		}
		return s.add(req)
	case OpReplace:
		return s.replace(req)
	case OpAction:
		return nil, s.action(req.Action)
	case OpReshape:
		return nil, s.reshape(req)
	case OpReadOnly, OpReadWrite:
		return nil, s.setReadOnly(req.Op == OpReadOnly)
	case OpGrowBitmap:
		return nil, s.growBitmap(req)
	case OpGrowSize:
		return s.growSize(req)
	case OpArraySize:
		return s.arraySize(req)
	case OpRaidDevices:
		return s.raidDevices(req)
	case OpLevel:
		return s.changeLevel(req)
	case OpJournalMode:
		return nil, s.journalMode(req) // journal_mode.go
	case OpSyncLimits:
		l := s.cfg.Array.SyncLimitsOf()
		if req.SpeedMin != nil {
			l.MinKBps = *req.SpeedMin
		}
		if req.SpeedMax != nil {
			l.MaxKBps = *req.SpeedMax
		}
		s.cfg.Array.SetSyncLimits(l)
		s.cfg.Logf("sync limits: min %d KiB/s, max %d KiB/s", l.MinKBps, l.MaxKBps)
		return nil, nil
	}
	return nil, Errorf(CodeInvalid, "unknown operation %q", req.Op)
}

// engineError turns an engine error into an *OpError.
func engineError(err error) error {
	switch {
	case errors.Is(err, engine.ErrBusy):
		return Errorf(CodeBusy, "%v", err)
	case errors.Is(err, engine.ErrUnsupported):
		return Errorf(CodeUnsupported, "%v", err)
	case errors.Is(err, engine.ErrNotReAddable):
		return Errorf(CodeNotReAddable, "%v", err)
	case errors.Is(err, engine.ErrReadOnly):
		return Errorf(CodeReadOnly, "%v", err)
	case errors.Is(err, engine.ErrFailed):
		return Errorf(CodeArrayFailed, "%v", err)
	case strings.Contains(err.Error(), "not large enough"):
		return Errorf(CodeTooSmall, "%v", err)
	}
	return Errorf(CodeFailed, "%v", err)
}

// memberInfo returns the engine's view of device index idx (nil when the
// engine does not list it).
func (s *Service) memberInfo(idx int) *engine.MemberInfo {
	for _, mi := range s.cfg.Array.Members() {
		if mi.Device == idx {
			mi := mi
			return &mi
		}
	}
	return nil
}

// spec returns a copy of the spec of device index idx.
func (s *Service) spec(idx int) MemberSpec {
	s.memMu.RLock()
	defer s.memMu.RUnlock()
	return s.cfg.Members[idx]
}

func (s *Service) fail(device string) error {
	a := s.cfg.Array
	idx := s.findMember(device)
	if idx < 0 {
		return Errorf(CodeNotMember, "%s is not a member of the array", device)
	}
	info := s.memberInfo(idx)
	if info == nil {
		return Errorf(CodeNotMember, "%s is not a member of the array", device)
	}
	if s.cfg.ReadOnly {
		return Errorf(CodeReadOnly, "the array is read-only")
	}
	if info.State == engine.Faulty {
		return nil // md_error on a faulty member changes nothing
	}
	err := a.FailDevice(idx)
	if errors.Is(err, engine.ErrUnsupported) && info.Role >= 0 {
		// An engine without FailDevice: fail the role.
		if err = a.Fail(info.Role); err == nil {
			if mi := s.memberInfo(idx); mi != nil && mi.State != engine.Faulty {
				err = engine.ErrBusy
			}
		}
	}
	if err != nil {
		if errors.Is(err, engine.ErrBusy) {
			// md refuses to fail the last working copy of the data.
			return Errorf(CodeBusy, "md refuses to fail the last working copy")
		}
		return engineError(err)
	}
	s.cfg.Logf("md: %s marked faulty", device)
	if why := a.FailedReason(); why != "" {
		// Linux 6.1's md_set_faulty: the member is faulty, but the
		// array is broken (MD_BROKEN), which SET_DISK_FAULTY reports
		// as EBUSY.
		return Errorf(CodeBusy, "the array has failed: %s", why)
	}
	return nil
}

func (s *Service) remove(device string) error {
	idx := s.findMember(device)
	if idx < 0 {
		return Errorf(CodeNotMember, "%s is not a member of the array", device)
	}
	info := s.memberInfo(idx)
	if info == nil {
		return Errorf(CodeNotMember, "%s is not a member of the array", device)
	}
	if info.State == engine.InSync || info.State == engine.Recovering {
		return Errorf(CodeBusy, "%s is an active member", device)
	}
	if err := s.cfg.Array.RemoveDevice(idx); err != nil {
		return engineError(err)
	}
	s.memMu.Lock()
	s.removed[idx] = true
	s.memMu.Unlock()
	s.cfg.Logf("md: %s removed", device)
	return nil
}

// openMember opens path for the array as assemble opens members:
// exclusively (O_EXCL for block devices, an flock for image files).
func (s *Service) openMember(path string) (engine.Device, engine.Device, MemberSpec, error) {
	abs := MemberPath(path)
	spec := MemberSpec{Path: abs}
	fd, err := engine.OpenMember(abs, engine.FileOptions{Exclusive: true, RemoteTimeout: s.cfg.RemoteTimeout})
	if err != nil {
		return nil, nil, spec, Errorf(CodeOpen, "%s", openReason(err))
	}
	var fi os.FileInfo
	if f, ok := fd.(*engine.FileDevice); ok {
		if fi, err = f.File().Stat(); err != nil {
			fd.Close()
			return nil, nil, spec, Errorf(CodeOpen, "%s", openReason(err))
		}
	}
	if fi != nil && fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0 {
		spec.Block = true
		if rdev, ok := rdevOf(fi); ok {
			spec.Major, spec.Minor = rdev[0], rdev[1]
		}
	}
	spec.Dev = fd
	var dev engine.Device = fd
	if s.cfg.WrapDevice != nil {
		if dev, err = s.cfg.WrapDevice(abs, fd); err != nil {
			fd.Close()
			return nil, nil, spec, Errorf(CodeFailed, "%v", err)
		}
	}
	return fd, dev, spec, nil
}

// openReason is strerror's text for an open error.
func openReason(err error) string {
	var errno unix.Errno
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "No such file or directory"
	case errors.Is(err, os.ErrPermission):
		return "Permission denied"
	case errors.Is(err, unix.EBUSY):
		return "Device or resource busy"
	case errors.Is(err, ioctl.ErrNotMember):
		return "Not a block device or regular file"
	case errors.As(err, &errno):
		// Go's texts are strerror's, lower-cased.
		t := errno.Error()
		if t != "" && t[0] >= 'a' && t[0] <= 'z' {
			t = string(t[0]-'a'+'A') + t[1:]
		}
		return t
	}
	return err.Error()
}

// nextNumber is the descriptor number mdadm's Manage_add picks for a new
// device: the first free one from raid_disks on.
func (s *Service) nextNumber() int {
	used := map[int]bool{}
	s.memMu.RLock()
	for i, m := range s.cfg.Members {
		if !s.removed[i] {
			used[m.DevNumber] = true
		}
	}
	s.memMu.RUnlock()
	n := s.cfg.Array.Geometry().RaidDisks()
	for used[n] {
		n++
	}
	return n
}

func (s *Service) add(req Request) (*Response, error) {
	a := s.cfg.Array
	resp := &Response{Number: s.nextNumber()}
	fail := func(err error) (*Response, error) { return failWith(resp, err) }
	if idx := s.findMember(req.Device); idx >= 0 {
		info := s.memberInfo(idx)
		if req.Op == OpReAdd && info != nil && info.State == engine.Faulty {
			return s.reAddFaulty(req, idx)
		}
		// The array holds the device: mdadm's exclusive open fails.
		return fail(Errorf(CodeOpen, "Device or resource busy"))
	}
	if s.cfg.ReadOnly {
		return fail(Errorf(CodeReadOnly, "the array is read-only"))
	}
	if lv := a.Geometry().Level(); lv == layout.RAID0 || lv == layout.Linear {
		// md: "personality does not support diskops" (EINVAL).
		return fail(Errorf(CodeInvalid, "%v takes no spares", lv))
	}
	fd, dev, spec, err := s.openMember(req.Device)
	if err != nil {
		return fail(err)
	}
	done := false
	defer func() {
		if !done {
			dev.Close()
			fd.Close()
		}
	}()
	size := fd.Geometry().Size
	// Is it big enough? (For 1.0 the engine checks: the room the bitmap
	// needs at the end depends on the bitmap.)
	if ref, err := s.refSuper(); err == nil && ref.SuperOffset < ref.DataOffset {
		if need := ref.DataOffset + s.cfg.Array.Geometry().DevSectors(0); uint64(size)/512 < need {
			return fail(Errorf(CodeTooSmall, "%s is too small: %d sectors, %d needed", req.Device, size/512, need))
		}
	}
	// What is on it? A superblock of this array is what --re-add wants;
	// anything else is data that --add would destroy.
	sigs, err := probe.Probe(alignedReader{fd, int64(fd.Geometry().LogicalBlock)}, size)
	if err != nil {
		return fail(Errorf(CodeOpen, "%v", err))
	}
	uuid := superblock.FormatUUID(a.UUID())
	// An array without superblocks (mdadm --build) has none to find on
	// the device: Manage_add tries no re-add, every signature is data.
	persistent := a.Persistent()
	sameArray, wasActive090, is090 := false, false, false
	if persistent {
		sameArray, wasActive090, is090 = s.added090(fd, size)
	}
	for _, sg := range sigs {
		if persistent && sg.Kind == probe.KindRAID && sg.UUID == uuid && (sg.Version == fmt.Sprintf("1.%d", s.cfg.SuperMinor) || is090 && sg.Version == "0.90") {
			sameArray = true
			continue
		}
		d := sg.Description
		if sg.Note != "" {
			d += " (" + sg.Note + ")"
		}
		resp.Signatures = append(resp.Signatures, d)
	}
	if len(resp.Signatures) > 0 && !req.Force {
		return fail(Errorf(CodeHoldsData, "%s holds data", req.Device))
	}
	// Was it an active member of this array (worth a re-add)?
	wasActive := wasActive090
	if sameArray && !is090 {
		if v, err := member.FindV1(fd, uint64(size)/512, s.cfg.SuperMinor); err == nil && v.Err == nil {
			sb := v.SB
			if int(sb.DevNumber) < len(sb.DevRoles) && sb.DevRoles[sb.DevNumber] < superblock.RoleSpare {
				wasActive = true
			}
		}
	}
	if req.Op == OpReAdd && !wasActive {
		return fail(Errorf(CodeNotReAddable, "%s was not an active member of the array", req.Device))
	}
	if !s.enough() {
		return fail(Errorf(CodeArrayFailed, "the array has failed"))
	}
	opts := engine.AddOptions{Replacement: -1, WriteMostly: req.WriteMostly, DeferRecovery: req.More,
		FailFast: req.FailFast, NoFailFast: req.NoFailFast, Major: spec.Major, Minor: spec.Minor}
	result := ResultAdded
	idx := -1
	if wasActive && req.Op != OpAddSpare {
		opts.ReAdd = true
		idx, err = a.AddDevice(dev, opts)
		if err != nil && idx >= 0 {
			done = true
			s.recordMember(idx, spec, size)
			return fail(engineError(err))
		}
		switch {
		case err == nil:
			result = ResultReAdded
		case errors.Is(err, engine.ErrNotReAddable) && req.Op == OpAdd:
			// mdadm --add goes on with a plain add.
			opts.ReAdd = false
		case errors.Is(err, engine.ErrNotReAddable):
			return fail(Errorf(CodeNotReAddable, "%v", err))
		default:
			return fail(engineError(err))
		}
	}
	if idx < 0 {
		idx, err = a.AddDevice(dev, opts)
		if err != nil && idx >= 0 {
			// In the array, but failed at once: keep track of it.
			done = true
			s.recordMember(idx, spec, size)
		}
		if err != nil {
			return fail(engineError(err))
		}
	}
	done = true
	s.recordMember(idx, spec, size)
	if !persistent {
		s.memMu.Lock()
		s.cfg.Members[idx].DevNumber = resp.Number // Manage_add's disc.number
		s.memMu.Unlock()
	}
	if !req.More {
		s.awaitRecoveryStart()
	}
	resp.Result = result
	resp.Number = s.spec(idx).DevNumber
	s.cfg.Logf("md: %s %s as device %d", req.Device, result, idx)
	return resp, nil
}

// awaitRecoveryStart gives the engine a moment to start the recovery an
// add makes necessary, so that a "wait" right after the add finds it
// running, as md's sync_action shows "recover" as soon as ADD_NEW_DISK
// returns.
func (s *Service) awaitRecoveryStart() {
	a := s.cfg.Array
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if act := a.SyncStatus().Action; act != engine.ActionIdle || a.Degraded() == 0 || a.FailedReason() != "" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reAddFaulty puts a faulty member that is still in the array back into
// its role, as writing "re-add" to md's dev-*/state does.
func (s *Service) reAddFaulty(req Request, idx int) (*Response, error) {
	a := s.cfg.Array
	path := s.spec(idx).Path
	// md keeps the rdev's flags; a member without a superblock has them
	// nowhere else
	keepWM := !a.Persistent() && s.memberInfo(idx) != nil && s.memberInfo(idx).WriteMostly
	if err := a.DetachFaulty(idx); err != nil {
		if errors.Is(err, engine.ErrBusy) {
			return nil, Errorf(CodeOpen, "Device or resource busy")
		}
		return nil, engineError(err)
	}
	s.memMu.Lock()
	s.removed[idx] = true
	s.memMu.Unlock()
	fd, dev, spec, err := s.openMember(path)
	if err != nil {
		return nil, err
	}
	n, err := a.AddDevice(dev, engine.AddOptions{ReAdd: true, Faulty: true, Replacement: -1, WriteMostly: req.WriteMostly || keepWM,
		FailFast: req.FailFast, NoFailFast: req.NoFailFast})
	if err != nil {
		dev.Close()
		fd.Close()
		// The member is out of the array now: say so.
		s.cfg.Logf("md: re-add of %s failed, it was removed: %v", path, err)
		return nil, engineError(fmt.Errorf("%w (the device was removed from the array)", err))
	}
	s.recordMember(n, spec, fd.Geometry().Size)
	s.awaitRecoveryStart()
	s.cfg.Logf("md: %s re-added as device %d", path, n)
	return &Response{Result: ResultReAddedFaulty, Number: s.spec(n).DevNumber}, nil
}

// recordMember stores the spec of the device the engine added as index
// idx, with its superblock's location and dev_number.
func (s *Service) recordMember(idx int, spec MemberSpec, size int64) {
	spec.DevNumber = -1
	if s.cfg.SuperMinor == engine.Minor090 {
		record090(&spec, size)
	} else if v, err := member.FindV1(spec.Dev, uint64(size)/512, s.cfg.SuperMinor); err == nil {
		spec.SBOffset = int64(v.Offset) * 512
		spec.DevNumber = int(v.SB.DevNumber)
		spec.FailFast = v.SB.DevFlags&superblock.DevFlagFailFast != 0
	} else if off, err := superblock.Offset(s.cfg.SuperMinor, uint64(size)/512); err == nil {
		spec.SBOffset = int64(off) * 512
	}
	s.memMu.Lock()
	defer s.memMu.Unlock()
	for len(s.cfg.Members) <= idx {
		s.cfg.Members = append(s.cfg.Members, MemberSpec{DevNumber: -1})
		s.removed[len(s.cfg.Members)-1] = true
	}
	s.cfg.Members[idx] = spec
	delete(s.removed, idx)
}

// refSuper reads the superblock of an in-sync member.
func (s *Service) refSuper() (*superblock.Superblock, error) {
	for _, mi := range s.cfg.Array.Members() {
		if mi.State != engine.InSync || mi.Device < 0 {
			continue
		}
		spec := s.spec(mi.Device)
		sb, _, err := readSuper(&spec)
		return sb, err
	}
	return nil, errors.New("no in-sync member")
}

func (s *Service) replace(req Request) (*Response, error) {
	a := s.cfg.Array
	idx := s.findMember(req.Device)
	var info *engine.MemberInfo
	if idx >= 0 {
		info = s.memberInfo(idx)
	}
	if info == nil {
		return nil, Errorf(CodeNotMember, "%s is not a member of the array", req.Device)
	}
	if info.Role < 0 || (info.State != engine.InSync && info.State != engine.Recovering) {
		return nil, Errorf(CodeNotActive, "%s is not active", req.Device)
	}
	with := -1
	if req.With != "" {
		with = s.findMember(req.With)
		var wi *engine.MemberInfo
		if with >= 0 {
			wi = s.memberInfo(with)
		}
		switch {
		case wi == nil:
			return nil, &OpError{Code: CodeWithNotMember, Msg: req.With + " is not a member of the array", Resp: &Response{Role: info.Role}}
		case wi.State == engine.Faulty:
			return nil, &OpError{Code: CodeWithFaulty, Msg: req.With + " is faulty", Resp: &Response{Role: info.Role}}
		case wi.Role >= 0:
			return nil, &OpError{Code: CodeWithActive, Msg: req.With + " is active", Resp: &Response{Role: info.Role}}
		}
	}
	if err := a.Replace(info.Role, with); err != nil {
		return nil, engineError(err)
	}
	s.cfg.Logf("md: %s (role %d) marked for replacement", req.Device, info.Role)
	return &Response{Role: info.Role}, nil
}

// Actions that OpAction accepts.
var actions = map[string]bool{
	engine.ActionIdle: true, engine.ActionFrozen: true, engine.ActionCheck: true,
	engine.ActionRepair: true, engine.ActionResync: true, engine.ActionRecover: true,
}

func (s *Service) action(act string) error {
	if !actions[act] {
		return Errorf(CodeInvalid, "unknown sync action %q", act)
	}
	// The engine answers ErrBusy only while an action runs, as md does.
	if err := s.cfg.Array.StartAction(act); err != nil {
		return engineError(err)
	}
	s.cfg.Logf("md: sync_action %s", act)
	return nil
}

// enough reports whether the array still has every block of data (mdadm's
// enough() for a clean array, from the in-sync roles).
func (s *Service) enough() bool {
	a := s.cfg.Array
	if a.FailedReason() != "" {
		return false
	}
	g := a.Geometry()
	rd := g.RaidDisks()
	avail := make([]bool, rd)
	for _, mi := range a.Members() {
		if mi.Role >= 0 && mi.Role < rd && mi.State == engine.InSync {
			avail[mi.Role] = true
		}
	}
	var lay uint32
	if r10, ok := g.(*layout.RAID10Geometry); ok {
		lay = uint32(r10.NearCopies()) | uint32(r10.FarCopies())<<8
		if r10.Offset() {
			lay |= 0x10000
		}
	}
	return plan.Enough(int(g.Level()), rd, lay, true, avail)
}

// alignedReader reads any range of a device that only takes reads
// aligned to its logical block (O_DIRECT).
type alignedReader struct {
	d     engine.Device
	block int64
}

func (r alignedReader) ReadAt(p []byte, off int64) (int, error) {
	if r.block <= 1 {
		return r.d.ReadAt(p, off)
	}
	start := off / r.block * r.block
	end := (off + int64(len(p)) + r.block - 1) / r.block * r.block
	if size := r.d.Geometry().Size; end > size {
		end = size
	}
	if end <= off {
		return 0, io.EOF
	}
	buf := make([]byte, end-start)
	n, err := r.d.ReadAt(buf, start)
	if int64(n) <= off-start {
		if err == nil {
			err = io.EOF
		}
		return 0, err
	}
	c := copy(p, buf[off-start:n])
	if c < len(p) {
		if err == nil {
			err = io.EOF
		}
		return c, err
	}
	return c, nil
}

// MemberPath is the absolute path of a member given as a path, or the URI
// of a remote one (an NBD URI is not a path).
func MemberPath(p string) string {
	if nbdclient.IsURI(p) {
		return p
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// failWith gives an OpError without a response resp (the number mdadm
// prints with the failure) and returns it.
func failWith(resp *Response, err error) (*Response, error) {
	var oe *OpError
	if errors.As(err, &oe) && oe.Resp == nil {
		oe.Resp = resp
	}
	return nil, err
}
