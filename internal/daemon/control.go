package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// The control protocol: a client connects to NAME.sock, writes one JSON
// Request on one line and reads one JSON Response on one line; it may send
// more requests on the same connection. Requests:
//
//	{"op":"ping"}                           -> ok
//	{"op":"status"}                         -> Status
//	{"op":"stop"}                           -> ok, then the daemon stops
//	{"op":"fail","device":"/dev/loop1"}     -> ok or an error
//	{"op":"remove","device":"/dev/loop1"}   -> ok or an error
//	{"op":"add","device":"/dev/loop1"}      -> ok or an error
//	{"op":"re-add","device":"/dev/loop1"}   -> ok or an error
//	{"op":"add-spare","device":"/dev/loop1"} -> ok (never a re-add)
//	{"op":"replace","device":"/dev/loop1","with":"/dev/loop4"} -> ok, role
//	{"op":"action","action":"check"}        -> ok or an error (sync_action)
//	{"op":"sync-limits","sync_speed_min":1000,"sync_speed_max":5000} -> ok
//	{"op":"journal-mode","journal_mode":"write-back"} -> ok or an error
//	{"op":"grow-bitmap","bitmap":"internal","bitmap_chunk":4194304} -> ok
//
// add and re-add take "force" (add a device that holds other data) and
// "write_mostly".
//
// Errors carry a Code saying which kind of failure it was, so that the
// client can word it the way mdadm does.

// Operations.
const (
	OpPing   = "ping"
	OpStatus = "status"
	OpStop   = "stop"
	OpFail   = "fail"
	OpRemove = "remove"
	OpAdd    = "add"
	OpReAdd  = "re-add"
	// OpAddSpare adds the device as a spare, never as a re-add
	// (mdadm --add-spare).
	OpAddSpare = "add-spare"
	// OpReplace marks Device for replacement (md's want_replacement),
	// with the spare With if given.
	OpReplace = "replace"
	// OpAction writes md's sync_action (Action).
	OpAction = "action"
	// OpSyncLimits sets sync_speed_min / sync_speed_max.
	OpSyncLimits = "sync-limits"
	// OpJournalMode sets md's journal_mode (JournalMode) of a raid4/5/6
	// with a write journal: CodeInvalid for a degraded array's
	// write-back (EINVAL), CodeNoJournal without a journal (ENODEV).
	OpJournalMode = "journal-mode"
	// OpReshape starts growing a raid4/5/6 to RaidDisks devices onto
	// its spares (mdadm --grow --raid-devices).
	OpReshape = "reshape"
	// OpReadOnly, OpReadWrite switch md's read-only mode (mdadm -o, -w).
	OpReadOnly  = "readonly"
	OpReadWrite = "readwrite"
)

// Results of a successful add (Response.Result).
const (
	ResultAdded   = "added"    // a new spare (or into a missing role)
	ResultReAdded = "re-added" // back into its old role (bitmap-guided)
	// ResultReAddedFaulty: a faulty member still in the array was put
	// back (md's "re-add" written to the member's sysfs state).
	ResultReAddedFaulty = "re-added-faulty"
)

// Request is one control request.
type Request struct {
	Op     string `json:"op"`
	Device string `json:"device,omitempty"`
	// With is the spare that replaces Device (OpReplace).
	With string `json:"with,omitempty"`
	// Force adds a device that holds a filesystem, a partition table or
	// another array's superblock (OpAdd, OpReAdd, OpAddSpare); OpStop
	// stops even while the array is in use.
	Force       bool `json:"force,omitempty"`
	WriteMostly bool `json:"write_mostly,omitempty"`
	// FailFast, NoFailFast: mdadm's --failfast, --nofailfast before an
	// added device.
	FailFast   bool `json:"fail_fast,omitempty"`
	NoFailFast bool `json:"no_fail_fast,omitempty"`
	// More: another add of the same command follows (OpAdd, OpAddSpare,
	// OpReAdd); spares take roles after the last one, as in md.
	More bool `json:"more,omitempty"`
	// Action is the sync_action to write (OpAction).
	Action string `json:"action,omitempty"`
	// SpeedMin, SpeedMax: KiB/s (OpSyncLimits); nil leaves it, 0 is
	// md's default.
	SpeedMin *uint64 `json:"sync_speed_min,omitempty"`
	SpeedMax *uint64 `json:"sync_speed_max,omitempty"`
	// JournalMode is md's name of the mode to set (OpJournalMode):
	// write-through or write-back.
	JournalMode string `json:"journal_mode,omitempty"`
	// RaidDisks is the new number of devices (OpReshape, OpRaidDevices;
	// OpReshape: 0 leaves it).
	RaidDisks int `json:"raid_disks,omitempty"`
	// Layout, ChunkSectors: OpReshape's new layout (nil: unchanged) and
	// chunk size (0: unchanged); FinalLevel: the level to take the array
	// to when the reshape ends (manage_reshape.go).
	Layout       *int   `json:"layout,omitempty"`
	ChunkSectors uint64 `json:"chunk_sectors,omitempty"`
	FinalLevel   *int   `json:"final_level,omitempty"`
	// BackupFile: OpReshape in place, its critical section kept in this
	// file (mdadm's --backup-file, created by the caller), which the
	// daemon removes when the reshape ends.
	BackupFile string `json:"backup_file,omitempty"`
	// StripeCache, SetArrayInfo: OpReshape's setup as mdadm makes it
	// (engine.ReshapeStart's fields of those names).
	StripeCache  int  `json:"stripe_cache,omitempty"`
	SetArrayInfo bool `json:"set_array_info,omitempty"`
	// Bitmap ("internal" or "none") and BitmapChunk (bytes, 0: mdadm's
	// choice): OpGrowBitmap (grow_bitmap.go).
	Bitmap      string `json:"bitmap,omitempty"`
	BitmapChunk uint64 `json:"bitmap_chunk,omitempty"`
	// BitmapDelay: OpGrowBitmap's daemon sleep in seconds (--delay; 0:
	// mdadm's default).
	BitmapDelay uint32 `json:"bitmap_delay,omitempty"`
	// SizeSectors, AssumeClean: OpGrowSize, OpArraySize (grow_size.go).
	SizeSectors uint64 `json:"size_sectors,omitempty"`
	AssumeClean bool   `json:"assume_clean,omitempty"`
	// Level is the new level (OpLevel, grow_level.go).
	Level *int `json:"level,omitempty"`
}

// Error codes of a Response.
const (
	CodeBusy        = "busy"        // EBUSY: in use, or md refuses (last copy, active member)
	CodeNotMember   = "not-member"  // the device is not a member of the array
	CodeUnsupported = "unsupported" // the engine cannot do it (yet)
	CodeInvalid     = "invalid"     // a bad request
	CodeFailed      = "failed"      // anything else
	// CodeOpen: the device cannot be opened; Error is the reason
	// (strerror's text, e.g. "Device or resource busy").
	CodeOpen = "open"
	// CodeHoldsData: the device holds a filesystem, partition table or
	// another array's superblock (Response.Signatures) and Force was not
	// given.
	CodeHoldsData = "holds-data"
	// CodeTooSmall: the device is too small to join the array.
	CodeTooSmall = "too-small"
	// CodeNotReAddable: --re-add is not possible for the device.
	CodeNotReAddable = "not-re-addable"
	// CodeArrayFailed: the array has failed beyond its redundancy, so
	// --add cannot work.
	CodeArrayFailed = "array-failed"
	// CodeNotActive: the member to replace is not active.
	CodeNotActive = "not-active"
	// CodeWithFaulty, CodeWithActive, CodeWithNotMember: the --with
	// device of a replace is faulty, active, or not in the array.
	CodeWithFaulty    = "with-faulty"
	CodeWithActive    = "with-active"
	CodeWithNotMember = "with-not-member"
	// CodeReadOnly: the array is read-only (EROFS).
	CodeReadOnly = "read-only"
	// CodeNoDevice: md's ENXIO (e.g. setting read-only mode twice).
	CodeNoDevice = "no-device"
	// CodeNoJournal: the array has no running write journal (md's
	// journal_mode store: ENODEV).
	CodeNoJournal = "no-journal"
)

// Response is the answer to one request.
type Response struct {
	OK     bool    `json:"ok"`
	Code   string  `json:"code,omitempty"`
	Error  string  `json:"error,omitempty"`
	Status *Status `json:"status,omitempty"`
	// Result says what an add did (Result* constants).
	Result string `json:"result,omitempty"`
	// Role is the role a replace applies to; Number the descriptor
	// number an add used or tried (mdadm's "as %d").
	Role   int `json:"role,omitempty"`
	Number int `json:"number,omitempty"`
	// Signatures: what a device refused with CodeHoldsData holds.
	Signatures []string `json:"signatures,omitempty"`
	// OldSectors, NewSectors: the component size before and after
	// OpGrowSize.
	OldSectors uint64 `json:"old_sectors,omitempty"`
	NewSectors uint64 `json:"new_sectors,omitempty"`
}

// OpError is a failed operation as the client sees it.
type OpError struct {
	Code string
	Msg  string
	// Resp is the whole answer (extra fields such as Signatures), if any.
	Resp *Response
}

func (e *OpError) Error() string { return e.Msg }

// Errorf builds an *OpError.
func Errorf(code, format string, a ...any) error {
	return &OpError{Code: code, Msg: fmt.Sprintf(format, a...)}
}

// Status describes a running array: what mdadm --detail reads from the
// kernel (GET_ARRAY_INFO, GET_DISK_INFO, sysfs) and the superblock.
type Status struct {
	Name    string    `json:"name"`   // run-directory name
	Device  string    `json:"device"` // md device as given to assemble
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`

	// Superblock is the current v1.x superblock (256 bytes + dev_roles)
	// of the first active in-sync member, as on disk; SuperMinor is its
	// minor version (0, 1, 2).
	Superblock []byte `json:"superblock"`
	SuperMinor int    `json:"super_minor"`
	// Superblock090 is that member's 0.90 superblock (4096 bytes) when
	// SuperMinor is 90; Superblock is then its v1 view.
	Superblock090 []byte `json:"superblock090,omitempty"`
	// NotPersistent: an array without superblocks (mdadm --build);
	// Superblock is then empty.
	NotPersistent bool `json:"not_persistent,omitempty"`

	Level            int    `json:"level"`
	Layout           int    `json:"layout"` // as md reports it: -1 for a raid0 without a layout
	RaidDisks        int    `json:"raid_disks"`
	ChunkBytes       int64  `json:"chunk_bytes"`
	Size             int64  `json:"size_bytes"`        // array size
	ComponentSectors uint64 `json:"component_sectors"` // used per member
	BlockSize        int64  `json:"block_size"`
	Events           uint64 `json:"events"`
	Clean            bool   `json:"clean"`
	Degraded         int    `json:"degraded"`
	Bitmap           bool   `json:"bitmap"`
	BitmapFile       string `json:"bitmap_file,omitempty"` // the bitmap is this file (mdadm --bitmap=FILE)
	ReadOnly         bool   `json:"read_only"`
	// SyncAction is md's sync_action: idle, resync, recover, check,
	// repair, frozen; SyncDone/SyncTotal its progress in sectors (md's
	// sync_completed: member sectors, array sectors for a raid10
	// resync/check).
	SyncAction string `json:"sync_action"`
	SyncDone   uint64 `json:"sync_done,omitempty"`
	SyncTotal  uint64 `json:"sync_total,omitempty"`
	// SyncSpeed is md's sync_speed (KiB/s over the recent window).
	SyncSpeed uint64 `json:"sync_speed_kibps,omitempty"`
	// SyncStarted is when the running action started.
	SyncStarted time.Time `json:"sync_started,omitzero"`
	// LastSyncAction is md's last_sync_action; Mismatches its
	// mismatch_cnt (sectors).
	LastSyncAction string `json:"last_sync_action,omitempty"`
	Mismatches     uint64 `json:"mismatch_cnt"`
	// SyncWritten: member sectors the running or last action wrote.
	SyncWritten uint64 `json:"sync_written,omitempty"`
	// SyncCheckpoint: the last recorded resync/recovery position.
	SyncCheckpoint uint64 `json:"sync_checkpoint,omitempty"`
	// SyncSpeedMin, SyncSpeedMax: the limits in force (KiB/s; md's
	// defaults filled in).
	SyncSpeedMin uint64 `json:"sync_speed_min"`
	SyncSpeedMax uint64 `json:"sync_speed_max"`
	// FailedReason says why the array stopped accepting writes (failed
	// beyond its redundancy); "" while it works.
	FailedReason string `json:"failed_reason,omitempty"`
	// JournalMode is md's journal_mode (write-through, write-back) of an
	// array whose write journal device is in it; "" for other arrays.
	JournalMode string `json:"journal_mode,omitempty"`

	Members []MemberStatus `json:"members"`

	NBDSocket string `json:"nbd_socket,omitempty"`
	NBDListen string `json:"nbd_listen,omitempty"`
	NBDTLS    bool   `json:"nbd_tls,omitempty"`
	FUSEFile  string `json:"fuse_file,omitempty"`
	Metrics   string `json:"metrics,omitempty"`

	// KernelDevice is the block device serving the array (/dev/nbdN),
	// KernelDeviceKind its door (nbd, ublk); KernelDeviceNote says why
	// "auto" attached none.
	KernelDevice     string `json:"kernel_device,omitempty"`
	KernelDeviceKind string `json:"kernel_device_kind,omitempty"`
	KernelDeviceNote string `json:"kernel_device_note,omitempty"`
}

// MemberStatus is one member device (or an empty slot, State "missing").
type MemberStatus struct {
	Path      string `json:"path,omitempty"`
	Block     bool   `json:"block_device,omitempty"`
	Major     uint32 `json:"major"`
	Minor     uint32 `json:"minor"`
	DevNumber int    `json:"dev_number"` // superblock dev_number (mdadm's "Number"), -1 for an empty slot
	Role      int    `json:"role"`       // -1 for spares and faulty members out of a slot
	Slot      int    `json:"slot"`       // the slot a faulty member was in, else Role
	// State: in_sync, recovering, spare, faulty, missing.
	State          string `json:"state"`
	WriteMostly    bool   `json:"write_mostly,omitempty"`
	FailFast       bool   `json:"fail_fast,omitempty"`
	Events         uint64 `json:"events"`
	RecoveryOffset uint64 `json:"recovery_offset,omitempty"`
	// Remote describes a member on an NBD server (Path is its URI).
	Remote *RemoteStatus `json:"remote,omitempty"`
}

// RemoteStatus is the connection of a member on an NBD server.
type RemoteStatus struct {
	// State: connected, or lost (the connection broke or timed out; the
	// member is failed).
	State     string `json:"state"`
	Error     string `json:"error,omitempty"`
	Conns     int    `json:"connections"`
	LatencyUS int64  `json:"latency_us"` // recent reply time (moving average)
}

// Handler executes control requests.
type Handler interface {
	Status() (*Status, error)
	// Stop stops the array; it returns once the array is stopped (or
	// refuses, e.g. while an export is in use).
	Stop() error
	// Manage runs an operation on the members or the sync machinery:
	// OpFail, OpRemove, OpAdd, OpReAdd, OpAddSpare, OpReplace, OpAction,
	// OpSyncLimits, OpJournalMode.
	Manage(req Request) (*Response, error)
}

// Server serves the control socket.
type Server struct {
	h  Handler
	l  net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
	// after is called with a successful stop's connection closed.
	stopped chan struct{}
}

// NewServer listens on path (mode 0600) and serves h until Close.
func NewServer(path string, h Handler) (*Server, error) {
	l, err := ListenUnix(path)
	if err != nil {
		return nil, err
	}
	s := &Server{h: h, l: l, conns: map[net.Conn]bool{}, stopped: make(chan struct{})}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Stopped is closed when a stop request succeeded.
func (s *Server) Stopped() <-chan struct{} { return s.stopped }

// Addr is the socket path.
func (s *Server) Addr() string { return s.l.Addr().String() }

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.l.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	r := bufio.NewReaderSize(c, 4096)
	enc := json.NewEncoder(c)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		var req Request
		var resp Response
		if err := json.Unmarshal(line, &req); err != nil {
			resp = errResponse(Errorf(CodeInvalid, "bad request: %v", err))
		} else {
			resp = s.do(req)
		}
		if err := enc.Encode(&resp); err != nil {
			return
		}
		if req.Op == OpStop && resp.OK {
			s.signalStopped()
			return
		}
	}
}

func (s *Server) signalStopped() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.stopped:
	default:
		close(s.stopped)
	}
}

func errResponse(err error) Response {
	var oe *OpError
	if errors.As(err, &oe) {
		r := Response{Code: oe.Code, Error: oe.Msg}
		if oe.Resp != nil {
			r = *oe.Resp
			r.OK, r.Code, r.Error = false, oe.Code, oe.Msg
		}
		return r
	}
	return Response{Code: CodeFailed, Error: err.Error()}
}

func (s *Server) do(req Request) Response {
	switch req.Op {
	case OpPing:
		return Response{OK: true}
	case OpStatus:
		st, err := s.h.Status()
		if err != nil {
			return errResponse(err)
		}
		return Response{OK: true, Status: st}
	case OpStop:
		stop := s.h.Stop
		if f, ok := s.h.(interface{ StopForce() error }); ok && req.Force {
			stop = f.StopForce // stop --force: even while in use
		}
		if err := stop(); err != nil {
			return errResponse(err)
		}
		return Response{OK: true}
	case OpFail, OpRemove, OpAdd, OpReAdd, OpAddSpare, OpReplace, OpAction, OpSyncLimits, OpReshape, OpReadOnly, OpReadWrite,
		OpGrowSize, OpArraySize, OpRaidDevices, OpLevel, OpJournalMode:
		switch {
		case req.Op == OpGrowSize || req.Op == OpArraySize || req.Op == OpRaidDevices || req.Op == OpLevel:
		case req.Op == OpJournalMode:
		case req.Op == OpAction && req.Action == "":
			return errResponse(Errorf(CodeInvalid, "%s needs an action", req.Op))
		case req.Op != OpAction && req.Op != OpSyncLimits && req.Op != OpReshape && req.Op != OpReadOnly && req.Op != OpReadWrite && req.Device == "":
			return errResponse(Errorf(CodeInvalid, "%s needs a device", req.Op))
		}
		resp, err := s.h.Manage(req)
		if err != nil {
			return errResponse(err)
		}
		if resp == nil {
			resp = &Response{}
		}
		resp.OK = true
		return *resp
	case OpGrowBitmap:
		return s.manageResponse(req)
	}
	return errResponse(Errorf(CodeInvalid, "unknown operation %q", req.Op))
}

// Close stops accepting, closes every connection and waits for the
// handlers to return.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.l.Close()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// Client talks to one daemon's control socket.
type Client struct {
	c   net.Conn
	r   *bufio.Reader
	enc *json.Encoder
}

// Dial connects to the daemon of array name in dir. It returns
// ErrNotRunning when nobody serves the array.
func Dial(dir, name string) (*Client, error) {
	return DialPath(PathsFor(dir, name).Control())
}

// DialPath connects to a control socket.
func DialPath(path string) (*Client, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || isRefused(err) {
			return nil, ErrNotRunning
		}
		return nil, err
	}
	return &Client{c: c, r: bufio.NewReader(c), enc: json.NewEncoder(c)}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.c.Close() }

// Call sends a request and reads the response. A failed operation comes
// back as an *OpError.
func (c *Client) Call(ctx context.Context, req Request) (*Response, error) {
	if dl, ok := ctx.Deadline(); ok {
		c.c.SetDeadline(dl)
	} else {
		c.c.SetDeadline(time.Time{})
	}
	if err := c.enc.Encode(&req); err != nil {
		return nil, err
	}
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("daemon: no answer: %w", err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, fmt.Errorf("daemon: bad answer: %w", err)
	}
	if !resp.OK {
		return &resp, &OpError{Code: resp.Code, Msg: resp.Error, Resp: &resp}
	}
	return &resp, nil
}

// Status asks for the array status.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	resp, err := c.Call(ctx, Request{Op: OpStatus})
	if err != nil {
		return nil, err
	}
	if resp.Status == nil {
		return nil, errors.New("daemon: status missing from the answer")
	}
	return resp.Status, nil
}

func isRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
}
