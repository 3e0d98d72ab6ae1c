package daemon

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"mdtool/internal/serve/kernelnbd"
	"mdtool/internal/serve/ublkexport"
)

// The kernel block device an array is served as (Config.BlockDevice).
const (
	DoorAuto = "auto" // ublk if there, else NBD if there, else none
	DoorUblk = "ublk" // ublk_drv: /dev/ublkbN
	DoorNBD  = "nbd"  // the kernel NBD client: /dev/nbdN
	DoorNone = "none" // no block device: the NBD socket and FUSE only
)

// Door is the kernel block device serving the array.
type Door interface {
	Kind() string // DoorUblk or DoorNBD
	Path() string // /dev/nbdN, /dev/ublkbN
	Index() int   // N
	// Detach flushes the device, takes it away from the kernel and stops
	// serving it.
	Detach() error
}

// DoorRecord is what the run directory (NAME.dev) keeps of the door, so
// that the next daemon of the array after a crash re-attaches the same
// device and removes the links.
type DoorRecord struct {
	Kind    string   `json:"kind"`
	Index   int      `json:"index"`
	Path    string   `json:"path"`
	Backend string   `json:"backend"` // identifier of the array the device serves
	Links   []string `json:"links,omitempty"`
	Shim    string   `json:"shim,omitempty"`  // the dm device of the geometry shim (Path is its node)
	Lower   string   `json:"lower,omitempty"` // under the shim: the door's own device
}

// DoorPath is the door record of the array.
func (p Paths) DoorPath() string { return p.join(".dev") }

// ReadDoorRecord reads the door record of the array (nil if none).
func ReadDoorRecord(p Paths) (*DoorRecord, error) {
	b, err := os.ReadFile(p.DoorPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r DoorRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", p.DoorPath(), err)
	}
	return &r, nil
}

func writeDoorRecord(p Paths, r *DoorRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp := p.DoorPath() + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p.DoorPath())
}

type nbdDoor struct{ *kernelnbd.Device }

func (nbdDoor) Kind() string { return DoorNBD }

// backendID identifies the array to the kernel (NBD's backend
// identifier): a reattach to a device serving another array is refused.
func (s *Service) backendID() string {
	u := s.cfg.Array.UUID()
	return "mdtool:" + hex.EncodeToString(u[:])
}

// attachDoor attaches the array to a kernel block device as
// Config.BlockDevice says, re-attaching the device a killed daemon of the
// same array left (NAME.dev), and makes the md names links to it. With
// "auto" a missing door is no error: doorNote says why there is none.
func (s *Service) attachDoor() error {
	mode := s.cfg.BlockDevice
	p := PathsFor(s.cfg.RunDir, s.cfg.Name)
	rec, err := ReadDoorRecord(p)
	if err != nil {
		s.cfg.Logf("%v (ignored)", err)
		rec = nil
	}
	if rec != nil {
		// The previous daemon died without detaching: its links go.
		removeLinks(rec.Links)
	}
	switch mode {
	case "", DoorNone:
		s.releaseStale(rec, p)
		return nil
	case DoorUblk:
		if err = ublkexport.Available(true); err != nil {
			return err
		}
		err = s.attachUblk(rec)
	case DoorNBD:
		err = s.attachNBD(rec)
	case DoorAuto:
		if ublkexport.Available(true) == nil {
			err = s.attachUblk(rec)
			break
		}
		if err = kernelnbd.Available(); err != nil {
			s.doorNote = "no kernel block device: no ublk door, and " + err.Error()
			s.releaseStale(rec, p)
			return nil
		}
		err = s.attachNBD(rec)
	default:
		return fmt.Errorf("unknown block device kind %q", mode)
	}
	if err == nil {
		err = s.attachShim()
	}
	if err != nil {
		return err
	}
	s.releaseStaleShim(rec)
	s.doorLinks = makeLinks(mdLinks(s.cfg.Device), s.door.Path(), s.cfg.Logf)
	r := &DoorRecord{Kind: s.door.Kind(), Index: s.door.Index(), Path: s.door.Path(), Backend: s.backendID(), Links: s.doorLinks,
		Shim: shimOf(s.door), Lower: lowerPath(s.door)}
	if err := writeDoorRecord(p, r); err != nil {
		s.cfg.Logf("recording the block device: %v", err)
	}
	return nil
}

// attachNBD re-attaches the recorded NBD device when it still serves this
// array (NBD_CMD_RECONFIGURE), else attaches a new one.
func (s *Service) attachNBD(rec *DoorRecord) error {
	opts := kernelnbd.Options{Backend: s.backendID(), ReadOnly: s.cfg.ReadOnly, MaxBytes: s.cfg.NBDMaxBytes}
	be := s.doorBackend(DoorNBD, rec)
	if rec != nil && rec.Kind == DoorNBD && kernelnbd.Configured(rec.Index) && kernelnbd.BackendOf(rec.Index) == opts.Backend {
		d, err := kernelnbd.Reattach(be, rec.Index, opts)
		if err == nil {
			s.door, s.doorReattached = nbdDoor{d}, true
			return nil
		}
		s.cfg.Logf("re-attaching %s: %v; attaching a new device", rec.Path, err)
	}
	d, err := kernelnbd.Attach(be, -1, opts)
	if err != nil {
		return err
	}
	s.door = nbdDoor{d}
	return nil
}

type ublkDoor struct{ *ublkexport.Device }

func (ublkDoor) Kind() string { return DoorUblk }

func (d ublkDoor) Index() int { return d.ID() }

// attachUblk takes over the recorded ublk device a killed daemon of this
// array left (UBLK_F_USER_RECOVERY: the block device, and a file system
// mounted on it, stay; queued I/O continues), else attaches a new one.
// The array's geometry becomes the device's: logical and physical block,
// io_min = chunk, io_opt = full stripe (as far as ublk's power-of-two
// hints carry it), requests split at full stripes.
func (s *Service) attachUblk(rec *DoorRecord) error {
	a := s.cfg.Array
	o := ublkexport.Options{ID: -1, IOMin: uint32(a.IOMin()), IOOpt: uint32(a.IOOpt()),
		PhysicalBlock: uint32(a.BlockSize()), Discard: true}
	if o.IOOpt > o.IOMin && o.IOMin > 0 {
		o.Boundary = o.IOOpt
	}
	be := s.doorBackend(DoorUblk, rec)
	if s.shimGeo != nil {
		// the dm device above announces the geometry; the door's
		// requests stay inside a chunk (one piece of the permutation)
		o.IOOpt, o.Boundary = o.IOMin, o.IOMin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if rec != nil && rec.Kind == DoorUblk && rec.Backend == s.backendID() {
		d, err := ublkexport.Recover(ctx, rec.Index, be, o)
		if err == nil {
			s.door, s.doorReattached = ublkDoor{d}, true
			return nil
		}
		s.cfg.Logf("re-attaching %s: %v; attaching a new device", rec.Path, err)
	}
	d, err := ublkexport.Attach(ctx, be, o)
	if err != nil {
		return err
	}
	s.door = ublkDoor{d}
	return nil
}

// releaseStale disconnects the device a killed daemon of this array left
// configured, when this one attaches none.
func (s *Service) releaseStale(rec *DoorRecord, p Paths) {
	s.releaseStaleShim(rec)
	if rec != nil && rec.Kind == DoorNBD && kernelnbd.Configured(rec.Index) && kernelnbd.BackendOf(rec.Index) == s.backendID() {
		if err := kernelnbd.Disconnect(rec.Index); err != nil {
			s.cfg.Logf("disconnecting %s: %v", rec.Path, err)
		}
	}
	if rec != nil {
		os.Remove(p.DoorPath())
	}
}

// detachDoor detaches the door, removes the links and the record.
func (s *Service) detachDoor() error {
	if s.door == nil {
		return nil
	}
	err := s.door.Detach()
	removeLinks(s.doorLinks)
	os.Remove(PathsFor(s.cfg.RunDir, s.cfg.Name).DoorPath())
	s.door = nil
	return err
}

// doorBusy says whether the block device is in use: mounted, held open
// exclusively (O_EXCL fails with EBUSY) or open by a process.
func (s *Service) doorBusy() error {
	if s.door == nil {
		return nil
	}
	return DeviceBusy(s.door.Path())
}

// DeviceBusy opens a block device with O_EXCL as md's STOP_ARRAY checks
// its openers: EBUSY (mounted, held by another exclusive opener) is a
// CodeBusy error.
func DeviceBusy(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if errors.Is(err, syscall.EBUSY) {
		return Errorf(CodeBusy, "%s is in use", path)
	}
	if err == nil {
		unix.Close(fd)
	}
	return nil
}

// mdLinks are the names of the array that become links to the block
// device: /dev/md/NAME (as udev makes for md), and /dev/mdN or any other
// /dev path the user named when no real device holds it.
func mdLinks(device string) []string {
	switch {
	case strings.Contains(device, ".."):
		return nil
	case strings.HasPrefix(device, "/dev/"):
		return []string{filepath.Clean(device)}
	case device == "" || strings.Contains(device, "/"):
		return nil
	case strings.HasPrefix(device, "md") && isDigits(device[2:]):
		return []string{"/dev/" + device}
	case isDigits(device):
		return []string{"/dev/md" + device}
	}
	return []string{"/dev/md/" + device}
}

// makeLinks makes links to target (relative, as udev's: /dev/md/data ->
// ../nbd0) and returns those made. A name held by anything but a symlink
// (a real md device node) is left alone.
func makeLinks(links []string, target string, logf func(string, ...any)) []string {
	var made []string
	for _, l := range links {
		if fi, err := os.Lstat(l); err == nil && fi.Mode()&os.ModeSymlink == 0 {
			logf("%s exists and is not a link: not linked to %s", l, target)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(l), 0o755); err != nil {
			logf("link %s: %v", l, err)
			continue
		}
		rel, err := filepath.Rel(filepath.Dir(l), target)
		if err != nil {
			rel = target
		}
		tmp := l + ".mdtool-tmp"
		os.Remove(tmp)
		if err := os.Symlink(rel, tmp); err != nil {
			logf("link %s: %v", l, err)
			continue
		}
		if err := os.Rename(tmp, l); err != nil {
			os.Remove(tmp)
			logf("link %s: %v", l, err)
			continue
		}
		made = append(made, l)
	}
	return made
}

// removeLinks removes the links that still are symlinks.
func removeLinks(links []string) {
	for _, l := range links {
		if fi, err := os.Lstat(l); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			os.Remove(l)
		}
	}
}

// Door is the kernel block device serving the array (nil if none);
// Reattached says that it is the device a killed daemon left, given new
// connections.
func (s *Service) Door() (d Door, reattached bool) { return s.door, s.doorReattached }

// DoorNote says why "auto" attached no block device ("" if it did, or
// none was asked for).
func (s *Service) DoorNote() string { return s.doorNote }

// StopForce stops the array even while its block device is in use
// (mounted: the file system sees I/O errors) or NBD clients are connected
// (control request stop with force, "mdtool stop --force").
func (s *Service) StopForce() error {
	s.mu.Lock()
	s.answerStop = true
	s.mu.Unlock()
	return s.stop(true)
}

// NameForDevice finds the running array whose block device dev is (the
// node, or a link to it, e.g. /dev/nbd0; under the geometry shim also the
// door's own device): its run-directory name.
func NameForDevice(runDir, dev string) (string, bool) {
	real, err := filepath.EvalSymlinks(dev)
	if err != nil {
		return "", false
	}
	names, err := Names(runDir)
	if err != nil {
		return "", false
	}
	for _, n := range names {
		p := PathsFor(runDir, n)
		if rec, err := ReadDoorRecord(p); err == nil && rec != nil && (rec.Path == real || rec.Lower == real) && Held(p) {
			return n, true
		}
	}
	return "", false
}
