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
)

// Request is one control request.
type Request struct {
	Op     string `json:"op"`
	Device string `json:"device,omitempty"`
}

// Error codes of a Response.
const (
	CodeBusy        = "busy"        // EBUSY: in use, or md refuses (last copy, active member)
	CodeNotMember   = "not-member"  // the device is not a member of the array
	CodeUnsupported = "unsupported" // the engine cannot do it (yet)
	CodeInvalid     = "invalid"     // a bad request
	CodeFailed      = "failed"      // anything else
)

// Response is the answer to one request.
type Response struct {
	OK     bool    `json:"ok"`
	Code   string  `json:"code,omitempty"`
	Error  string  `json:"error,omitempty"`
	Status *Status `json:"status,omitempty"`
}

// OpError is a failed operation as the client sees it.
type OpError struct {
	Code string
	Msg  string
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
	ReadOnly         bool   `json:"read_only"`
	// SyncAction is md's sync_action: idle, resync, recover, check,
	// repair; SyncDone/SyncTotal its progress in sectors.
	SyncAction string `json:"sync_action"`
	SyncDone   uint64 `json:"sync_done,omitempty"`
	SyncTotal  uint64 `json:"sync_total,omitempty"`

	Members []MemberStatus `json:"members"`

	NBDSocket string `json:"nbd_socket,omitempty"`
	NBDListen string `json:"nbd_listen,omitempty"`
	NBDTLS    bool   `json:"nbd_tls,omitempty"`
	FUSEFile  string `json:"fuse_file,omitempty"`
	Metrics   string `json:"metrics,omitempty"`
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
}

// Handler executes control requests.
type Handler interface {
	Status() (*Status, error)
	// Stop stops the array; it returns once the array is stopped (or
	// refuses, e.g. while an export is in use).
	Stop() error
	Manage(op, device string) error
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
		return Response{Code: oe.Code, Error: oe.Msg}
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
		if err := s.h.Stop(); err != nil {
			return errResponse(err)
		}
		return Response{OK: true}
	case OpFail, OpRemove, OpAdd, OpReAdd:
		if req.Device == "" {
			return errResponse(Errorf(CodeInvalid, "%s needs a device", req.Op))
		}
		if err := s.h.Manage(req.Op, req.Device); err != nil {
			return errResponse(err)
		}
		return Response{OK: true}
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
		return &resp, &OpError{Code: resp.Code, Msg: resp.Error}
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
