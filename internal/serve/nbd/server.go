// Package nbd is a Network Block Device server (fixed newstyle negotiation,
// structured replies, TLS) that serves export.Backends.
//
// Protocol facts come from the NBD protocol specification
// (NetworkBlockDevice/nbd doc/proto.md). Supported: options EXPORT_NAME,
// ABORT, LIST, STARTTLS, INFO, GO (NBD_INFO_EXPORT, NAME, DESCRIPTION,
// BLOCK_SIZE) and STRUCTURED_REPLY; commands READ, WRITE, DISC, FLUSH, TRIM
// and WRITE_ZEROES (with NO_HOLE), FUA on every command. Every export
// advertises CAN_MULTI_CONN: Backend.Flush is global.
//
// Requests are validated before they reach the Backend, with the errors
// the spec recommends: EINVAL for unknown commands, flags not valid for the
// command (NBD_CMD_FLAG_DF and FAST_ZERO are not advertised), reads and
// trims beyond the end, offsets or lengths not aligned to the minimum block
// size (whether or not the client asked for block sizes) and READ or WRITE
// payloads over the maximum (the advertised one if the client asked for
// NBD_INFO_BLOCK_SIZE in NBD_OPT_GO, else 32 MiB); ENOSPC for writes and
// zeroing beyond the end; EPERM for writes to read-only exports. The
// payload of a refused WRITE is read and dropped, up to 32 MiB; beyond
// that the server answers and then disconnects. Backend errors map to EIO,
// or to EPERM, ENOSPC, EINVAL, ENOMEM, ESHUTDOWN for the matching errnos.
// With structured replies a failed read sends the data read before the
// failure and an NBD_REPLY_TYPE_ERROR_OFFSET chunk; invalid requests get an
// NBD_REPLY_TYPE_ERROR chunk with a message. No error ends a connection,
// except a bad request magic (the stream cannot be resynchronised).
//
// Each connection has one reader goroutine that parses and validates
// requests, a bounded pool of workers that call the Backend, and one writer
// that sends replies in completion order, batching small replies into one
// write. Payload buffers are pooled. The payload bytes in flight are bounded
// per connection and over all connections (Limits, shared by Servers that
// are given the same one; small requests beyond it use a 1 MiB reserve of
// their connection), as are the connections; an idle sweep drops
// connections that neither send requests nor take their replies.
package nbd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"mdtool/internal/serve/export"
)

// Export is one named export.
type Export struct {
	// Name is the export name; "" is the default export, which clients
	// select with an empty name. A client's empty name selects the first
	// export when no export is named "".
	Name string
	// Description is sent as NBD_INFO_DESCRIPTION and in NBD_OPT_LIST.
	Description string
	// Backend serves the data.
	Backend export.Backend
	// ReadOnly exports advertise NBD_FLAG_READ_ONLY and fail writes,
	// trims and zeroing with EPERM.
	ReadOnly bool
}

// Config configures a Server. Zero values select the defaults.
type Config struct {
	// Exports is the list of exports; at least one.
	Exports []Export

	// TLS enables NBD_OPT_STARTTLS. With TLS set, TLS is required (the
	// spec's FORCEDTLS mode: every option but STARTTLS and ABORT is refused
	// with NBD_REP_ERR_TLS_REQD) unless TLSOptional is set. Without TLS,
	// STARTTLS is refused with NBD_REP_ERR_POLICY.
	TLS         *tls.Config
	TLSOptional bool

	// Workers is the number of goroutines per connection calling the
	// Backend (default 32).
	Workers int
	// InlineMax is the longest READ or WRITE payload the connection's
	// reader executes itself, without a worker, while such requests take
	// the Backend only microseconds (default 64 KiB; negative: never).
	InlineMax int
	// MaxInFlight bounds the requests per connection that are queued,
	// executing or waiting for their reply (default 128).
	MaxInFlight int
	// MaxInFlightBytes bounds the payload bytes per connection held by such
	// requests (default: half the shared budget, so that a single
	// connection whose client does not take its replies cannot hold all
	// of it).
	MaxInFlightBytes int64

	// Limits are shared by every connection of the Server (and of the
	// other Servers given the same Limits): the payload bytes in flight
	// and the number of connections. Nil: NewLimits(MaxConns, MaxBytes).
	Limits *Limits
	// MaxConns bounds the connections served at once when Limits is nil
	// (default 64); further connections are closed at once.
	MaxConns int
	// MaxBytes bounds the payload bytes in flight (read replies and write
	// payloads, counted by their buffer size) over all connections when
	// Limits is nil (default 256 MiB).
	MaxBytes int64
	// IdleTimeout drops a connection that for this long neither sends a
	// request nor takes its replies: no request was read, no reply written
	// (or one write blocked all along), and no request of it is in the
	// Backend (default 5 minutes; negative: never).
	IdleTimeout time.Duration
	// MaxPayload caps the maximum payload advertised in
	// NBD_INFO_BLOCK_SIZE (default and upper limit 32 MiB); the advertised
	// value is the smaller of this and the Backend's maximum.
	MaxPayload uint32
	// HandshakeTimeout bounds the whole negotiation phase (default 30 s).
	HandshakeTimeout time.Duration

	// Logger receives connection events and request errors (default:
	// discard).
	Logger *slog.Logger
}

// Defaults of Config and NewLimits.
const (
	DefaultMaxConns    = 64
	DefaultMaxBytes    = 256 << 20
	DefaultIdleTimeout = 5 * time.Minute
)

// Limits are resources shared by the connections of one or more Servers.
type Limits struct {
	mem      *budget
	maxConns int64
	conns    atomic.Int64

	refused   atomic.Int64 // connections refused since the last log line
	refusedAt atomic.Int64 // time of that line (UnixNano)
}

// NewLimits returns Limits of maxConns connections (<= 0: DefaultMaxConns)
// and maxBytes payload bytes in flight (<= 0: DefaultMaxBytes).
func NewLimits(maxConns int, maxBytes int64) *Limits {
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Limits{mem: newBudget(maxBytes), maxConns: int64(maxConns)}
}

// Conns is the number of connections served.
func (l *Limits) Conns() int { return int(l.conns.Load()) }

// InFlightBytes is the payload memory held by requests in flight.
func (l *Limits) InFlightBytes() int64 { return l.mem.inUse() }

// admit counts a new connection; false when the limit is reached.
func (l *Limits) admit() bool {
	if l.conns.Add(1) > l.maxConns {
		l.conns.Add(-1)
		return false
	}
	return true
}

// refuse counts a refused connection and says whether to log it (at most
// once a second) and how many were refused since the last line.
func (l *Limits) refuse() (n int64, logIt bool) {
	l.refused.Add(1)
	now := time.Now().UnixNano()
	last := l.refusedAt.Load()
	if now-last < int64(time.Second) || !l.refusedAt.CompareAndSwap(last, now) {
		return 0, false
	}
	return l.refused.Swap(0), true
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("nbd: server closed")

// ErrTooManyConns is returned by ServeConn when the connection limit is
// reached.
var ErrTooManyConns = errors.New("nbd: connection limit reached")

// exp is an Export with its advertised constraints.
type exp struct {
	Export
	min, pref, max uint32 // advertised block sizes
	tflags         uint16 // transmission flags before per-connection additions
}

// Server serves NBD connections. Create it with NewServer.
type Server struct {
	cfg     Config
	exports []*exp
	log     *slog.Logger

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
	sweeping  bool          // the idle sweeper runs
	stopSweep chan struct{} // closed by Close
}

// NewServer checks cfg and returns a Server.
func NewServer(cfg Config) (*Server, error) {
	if len(cfg.Exports) == 0 {
		return nil, errors.New("nbd: no exports")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 32
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 128
	}
	switch {
	case cfg.InlineMax == 0:
		cfg.InlineMax = 64 << 10
	case cfg.InlineMax < 0:
		cfg.InlineMax = 0
	}
	if cfg.Workers > cfg.MaxInFlight {
		cfg.Workers = cfg.MaxInFlight
	}
	if cfg.Limits == nil {
		cfg.Limits = NewLimits(cfg.MaxConns, cfg.MaxBytes)
	}
	if cfg.MaxInFlightBytes <= 0 {
		cfg.MaxInFlightBytes = max(cfg.Limits.mem.max/2, 1)
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxPayload == 0 || cfg.MaxPayload > defaultMaxLength {
		cfg.MaxPayload = defaultMaxLength
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 30 * time.Second
	}
	s := &Server{cfg: cfg, log: cfg.Logger, listeners: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{},
		stopSweep: make(chan struct{})}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	seen := map[string]bool{}
	for _, e := range cfg.Exports {
		if e.Backend == nil {
			return nil, fmt.Errorf("nbd: export %q has no backend", e.Name)
		}
		if seen[e.Name] {
			return nil, fmt.Errorf("nbd: duplicate export name %q", e.Name)
		}
		seen[e.Name] = true
		if len(e.Name) > maxStringLen || len(e.Description) > maxStringLen {
			return nil, fmt.Errorf("nbd: export %q: name or description longer than %d bytes", e.Name, maxStringLen)
		}
		x, err := advertise(e, cfg.MaxPayload)
		if err != nil {
			return nil, err
		}
		s.exports = append(s.exports, x)
	}
	return s, nil
}

// advertise derives the NBD block size constraints from the Backend's. The
// spec wants a power-of-two preferred size; a full stripe that is not one
// (e.g. three data disks) is rounded up to the next power of two, so that
// aligned preferred-size requests still cover whole stripes at least once.
func advertise(e Export, capMax uint32) (*exp, error) {
	mn, pref, mx := e.Backend.BlockSizes()
	if err := export.CheckBlockSizes(mn, pref, mx); err != nil {
		return nil, fmt.Errorf("nbd: export %q: %w", e.Name, err)
	}
	if bits.OnesCount32(pref) != 1 {
		pref = 1 << bits.Len32(pref)
	}
	mx = min(mx, capMax)
	if mx < pref {
		mx = pref
	}
	x := &exp{Export: e, min: mn, pref: pref, max: mx}
	x.tflags = tflagHasFlags | tflagSendFlush | tflagSendFUA | tflagCanMultiConn
	if e.ReadOnly {
		x.tflags |= tflagReadOnly
	} else {
		x.tflags |= tflagSendTrim | tflagSendWriteZeroes
	}
	return x, nil
}

// lookup finds an export by name; "" selects the export named "" or else
// the first one.
func (s *Server) lookup(name string) *exp {
	for _, x := range s.exports {
		if x.Name == name {
			return x
		}
	}
	if name == "" {
		return s.exports[0]
	}
	return nil
}

// track registers a connection or listener goroutine; false once closed.
func (s *Server) track(c *conn, l net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	if c != nil {
		s.conns[c] = struct{}{}
		if !s.sweeping && s.cfg.IdleTimeout > 0 {
			s.sweeping = true
			go s.sweep()
		}
	}
	if l != nil {
		s.listeners[l] = struct{}{}
	}
	return true
}

func (s *Server) untrack(c *conn, l net.Listener) {
	s.mu.Lock()
	if c != nil {
		delete(s.conns, c)
	}
	if l != nil {
		delete(s.listeners, l)
	}
	s.mu.Unlock()
	s.wg.Done()
}

// Serve accepts connections on l and serves each in its own goroutine until
// l fails or the Server is closed; then it closes l and returns
// (ErrServerClosed after Close).
func (s *Server) Serve(l net.Listener) error {
	if !s.track(nil, l) {
		l.Close()
		return ErrServerClosed
	}
	defer s.untrack(nil, l)
	defer l.Close()
	var delay time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) ||
				isTemporaryAcceptError(err) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("nbd: accept", "err", err, "retry", delay)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		lim := s.cfg.Limits
		if !lim.admit() {
			s.refuse(nc)
			continue
		}
		c := newConn(s, nc)
		if !s.track(c, nil) {
			lim.conns.Add(-1)
			nc.Close()
			return ErrServerClosed
		}
		go func() {
			defer lim.conns.Add(-1)
			defer s.untrack(c, nil)
			c.serve()
		}()
	}
}

// refuse closes a connection over the limit and logs it (at most one line
// a second, with the number refused since the previous line).
func (s *Server) refuse(nc net.Conn) {
	nc.Close()
	if n, ok := s.cfg.Limits.refuse(); ok {
		s.log.Warn("nbd: connection limit reached: connection refused", "remote", remoteName(nc),
			"limit", s.cfg.Limits.maxConns, "refused", n)
	}
}

// idleTicks is the number of sweeps per IdleTimeout: a connection is
// dropped after being idle for between IdleTimeout and 1.25 times it.
const idleTicks = 4

// sweep drops idle connections until Close.
func (s *Server) sweep() {
	tk := time.NewTicker(max(s.cfg.IdleTimeout/idleTicks, time.Millisecond))
	defer tk.Stop()
	for {
		select {
		case <-s.stopSweep:
			return
		case <-tk.C:
		}
		s.mu.Lock()
		for c := range s.conns {
			c.sweep()
		}
		s.mu.Unlock()
	}
}

// ServeConn serves one connection and returns when it ends; it closes nc.
func (s *Server) ServeConn(nc net.Conn) error {
	lim := s.cfg.Limits
	if !lim.admit() {
		s.refuse(nc)
		return ErrTooManyConns
	}
	defer lim.conns.Add(-1)
	c := newConn(s, nc)
	if !s.track(c, nil) {
		nc.Close()
		return ErrServerClosed
	}
	defer s.untrack(c, nil)
	return c.serve()
}

// ListenUnix listens on the unix socket path and serves it in the
// background until Close. A stale socket file (one nobody accepts on) is
// replaced; a live one is an error.
func (s *Server) ListenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("nbd: %s: socket in use", path)
		}
		os.Remove(path)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	return s.serveBackground(l)
}

// ListenTCP listens on the TCP address (e.g. "localhost:10809", ":0") and
// serves it in the background until Close.
func (s *Server) ListenTCP(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return s.serveBackground(l)
}

func (s *Server) serveBackground(l net.Listener) (net.Listener, error) {
	if s.isClosed() {
		l.Close()
		return nil, ErrServerClosed
	}
	go func() {
		if err := s.Serve(l); err != nil && !errors.Is(err, ErrServerClosed) {
			s.log.Error("nbd: serve", "addr", l.Addr().String(), "err", err)
		}
	}()
	return l, nil
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops the listeners, ends negotiations in progress, stops reading
// new requests (a WRITE whose payload has not fully arrived is dropped
// unanswered), waits until every request already received has been
// executed and replied to (giving each client 30 s to take its replies),
// closes the connections, and flushes every Backend. It returns the flush
// errors. A Backend call that never returns blocks Close.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.stopSweep)
		for l := range s.listeners {
			l.Close()
		}
		for c := range s.conns {
			c.shutdown()
		}
		s.mu.Unlock()
		s.wg.Wait()
		var errs []error
		done := map[export.Backend]bool{}
		for _, x := range s.exports {
			if done[x.Backend] {
				continue
			}
			done[x.Backend] = true
			if err := x.Backend.Flush(); err != nil {
				errs = append(errs, fmt.Errorf("nbd: flush export %q: %w", x.Name, err))
			}
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
