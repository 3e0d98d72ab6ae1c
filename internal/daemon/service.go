package daemon

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"mdtool/engine"
	"mdtool/engine/layout"
	"mdtool/internal/nbdclient"
	"mdtool/internal/serve/dmshim"
	"mdtool/internal/serve/fuseexport"
	"mdtool/internal/serve/metrics"
	"mdtool/internal/serve/nbd"
	"mdtool/superblock"
)

// MemberSpec is one device given to engine.Open, in the same order.
type MemberSpec struct {
	Path      string
	Dev       engine.Device
	Block     bool   // a block device (Major/Minor are its numbers)
	Major     uint32 // device numbers of a block device, else 0
	Minor     uint32
	SBOffset  int64 // byte offset of its v1.x superblock
	DevNumber int   // superblock dev_number
	FailFast  bool  // superblock devflags
}

// Config describes a service.
type Config struct {
	Name   string // run-directory name (ArrayName)
	Device string // md device as the user named it
	RunDir string
	Lock   *Lock // the array's lock, already held; released on stop

	Array      *engine.Array
	Members    []MemberSpec
	SuperMinor int
	ReadOnly   bool

	// NBDSocket is the unix socket for NBD; "" means Paths.NBD(), "none"
	// disables it.
	NBDSocket string
	// NBDListen is a TCP address for NBD ("" = none); TLS, if set, is
	// required on it (NBD STARTTLS).
	NBDListen string
	TLS       *tls.Config
	// NBDMaxConns, NBDMaxBytes and NBDIdleTimeout are the NBD limits
	// (nbd.Config.MaxConns, MaxBytes, IdleTimeout), shared by the unix
	// socket and the TCP listener; zero selects nbd's defaults.
	NBDMaxConns    int
	NBDMaxBytes    int64
	NBDIdleTimeout time.Duration
	// FUSEDir, if set, is mounted with one file named Name.
	FUSEDir string
	// BlockDevice is the kernel block device door: DoorAuto, DoorUblk,
	// DoorNBD or DoorNone ("" is DoorNone).
	BlockDevice string
	// Metrics receives the array's metrics (nil: none); MetricsAddr is
	// shown in the status.
	Metrics     *metrics.Array
	MetricsAddr string

	// WrapDevice, if set, wraps a device that manage adds (as assemble
	// wraps the members it opens), e.g. for fault injection in tests.
	WrapDevice func(path string, d engine.Device) (engine.Device, error)
	// RemoteTimeout: as LaunchConfig's, for members added later.
	RemoteTimeout time.Duration
	// RemoteReAdd > 0 re-adds faulty members on NBD servers automatically
	// once their server answers again, trying every RemoteReAdd.
	RemoteReAdd time.Duration
	// SyncLimits, if not zero, are set on the array at Start
	// (sync_speed_min/max).
	SyncLimits engine.SyncLimits

	// Logf receives log lines (timestamps are added by the caller's
	// logger).
	Logf func(format string, a ...any)
}

// Service is a running array: the engine array, its exports and its
// control socket.
type Service struct {
	cfg     Config
	started time.Time
	backend *Backend

	ctl      *Server
	nbdUnix  *nbd.Server
	nbdTCP   *nbd.Server
	nbdConns atomic.Int64
	nbdPath  string
	nbdAddr  string
	fuse     *fuseexport.Server

	door           Door     // the kernel block device, if any (blockdev.go)
	doorLinks      []string // md names linked to it
	doorReattached bool
	doorNote       string // why "auto" found no door
	answerStop     bool   // a forced stop asked on the control socket (StopForce)

	launched []string // Launch's members (LaunchedPaths)

	shimGeo *dmshim.Geometry // the door serves the permutation under the geometry shim (blockdev_shim.go)

	memMu   sync.RWMutex // guards cfg.Members and removed
	removed map[int]bool // device indexes removed from the array

	mu       sync.Mutex // serialises Stop and Manage
	stopping bool
	done     chan struct{}
	stopErr  error
	tick     chan struct{}

	bmFlushes, bmBytes uint64 // bitmap counters at the last metrics update

	// takenRaid0: this process took the array over into raid0 (md's
	// layout is then 0, not the -1 it reads at assembly; grow_level.go).
	takenRaid0 atomic.Bool
}

// Start starts the exports and the control socket of an opened array. On
// error everything started is stopped again, but the array is left open
// (the caller closes it).
func Start(cfg Config) (*Service, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	s := &Service{cfg: cfg, started: time.Now(), done: make(chan struct{}), tick: make(chan struct{}),
		removed: map[int]bool{}}
	cfg.Members = append([]MemberSpec(nil), cfg.Members...)
	s.cfg.Members = cfg.Members
	if cfg.SyncLimits != (engine.SyncLimits{}) {
		cfg.Array.SetSyncLimits(cfg.SyncLimits)
	}
	s.backend = NewBackend(cfg.Array, cfg.Metrics)
	p := PathsFor(cfg.RunDir, cfg.Name)
	var err error
	defer func() {
		if err != nil {
			s.closeExports(true)
		}
	}()
	logger := slog.New(slog.NewTextHandler(logWriter{cfg.Logf}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	export := nbd.Export{Name: "", Description: cfg.Device, Backend: s.backend, ReadOnly: cfg.ReadOnly}
	limits := nbd.NewLimits(cfg.NBDMaxConns, cfg.NBDMaxBytes)
	nbdCfg := func(t *tls.Config) nbd.Config {
		return nbd.Config{Exports: []nbd.Export{export}, TLS: t, Logger: logger, Limits: limits, IdleTimeout: cfg.NBDIdleTimeout}
	}
	if cfg.NBDSocket != "none" {
		path := cfg.NBDSocket
		if path == "" {
			path = p.NBD()
		}
		if s.nbdUnix, err = nbd.NewServer(nbdCfg(nil)); err != nil {
			return nil, err
		}
		var l net.Listener
		if l, err = ListenUnix(path); err != nil {
			return nil, fmt.Errorf("NBD socket %s: %w", path, err)
		}
		s.nbdPath = path
		go s.nbdUnix.Serve(countingListener{l, &s.nbdConns})
	}
	if cfg.NBDListen != "" {
		if s.nbdTCP, err = nbd.NewServer(nbdCfg(cfg.TLS)); err != nil {
			return nil, err
		}
		var l net.Listener
		if l, err = net.Listen("tcp", cfg.NBDListen); err != nil {
			return nil, fmt.Errorf("NBD listen %s: %w", cfg.NBDListen, err)
		}
		s.nbdAddr = l.Addr().String()
		go s.nbdTCP.Serve(countingListener{l, &s.nbdConns})
	}
	if cfg.FUSEDir != "" {
		opts := fuseexport.Options{ReadOnly: cfg.ReadOnly, Metrics: cfg.Metrics, FsName: "mdtool:" + cfg.Name}
		if s.fuse, err = fuseexport.Mount(cfg.FUSEDir, cfg.Name, s.backend.WithoutMetrics(), opts); err != nil {
			return nil, fmt.Errorf("FUSE %s: %w", cfg.FUSEDir, err)
		}
	}
	if err = s.attachDoor(); err != nil {
		return nil, fmt.Errorf("block device: %w", err)
	}
	if s.ctl, err = NewServer(p.Control(), s); err != nil {
		return nil, fmt.Errorf("control socket %s: %w", p.Control(), err)
	}
	go s.metricsLoop()
	go s.sizeLoop()
	if cfg.RemoteReAdd > 0 {
		go s.remoteReAddLoop(cfg.RemoteReAdd)
	}
	return s, nil
}

type logWriter struct{ logf func(string, ...any) }

func (w logWriter) Write(p []byte) (int, error) {
	w.logf("%s", string(p))
	return len(p), nil
}

// Done is closed once the service has stopped.
func (s *Service) Done() <-chan struct{} { return s.done }

// Err is the outcome of the stop (valid after Done).
func (s *Service) Err() error { return s.stopErr }

// NBDSocket is the NBD unix socket path ("" if none).
func (s *Service) NBDSocket() string { return s.nbdPath }

// NBDAddr is the NBD TCP address ("" if none).
func (s *Service) NBDAddr() string { return s.nbdAddr }

// FUSEFile is the exported file path ("" if none).
func (s *Service) FUSEFile() string {
	if s.fuse == nil {
		return ""
	}
	return s.fuse.Path()
}

// Backend is the export backend of the array.
func (s *Service) Backend() *Backend { return s.backend }

// Array is the engine array the service serves.
func (s *Service) Array() *engine.Array { return s.cfg.Array }

// LaunchedPaths are the absolute paths of the members Launch opened, in
// the engine's order (nil for a service not started by Launch).
func (s *Service) LaunchedPaths() []string { return s.launched }

// Stop stops the array as `mdtool stop` does: it refuses (CodeBusy) while
// an NBD client is connected or the FUSE file is open.
func (s *Service) Stop() error { return s.stop(false) }

// Shutdown stops the array whatever uses it (SIGTERM): NBD connections
// are closed after their requests completed, a busy FUSE mount is
// detached lazily.
func (s *Service) Shutdown() error { return s.stop(true) }

func (s *Service) stop(force bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil
	}
	if !force {
		if err := s.doorBusy(); err != nil {
			return err
		}
		// Like mdadm's STOP_ARRAY retries: a client that is just going
		// away gets up to five seconds.
		for i := 0; i < 100 && s.nbdConns.Load() > 0; i++ {
			time.Sleep(50 * time.Millisecond)
		}
		if n := s.nbdConns.Load(); n > 0 {
			return Errorf(CodeBusy, "%d NBD client(s) connected", n)
		}
		if s.fuse != nil {
			if err := s.fuse.Unmount(); err != nil {
				return Errorf(CodeBusy, "FUSE file %s is in use: %v", s.fuse.Path(), err)
			}
		}
	}
	s.stopping = true
	close(s.tick)
	err := s.closeExports(force)
	if cerr := s.cfg.Array.Close(); cerr != nil && !errors.Is(cerr, engine.ErrClosed) {
		err = errors.Join(err, fmt.Errorf("closing the array: %w", cerr))
	}
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.SetState(metrics.StateInactive)
		s.cfg.Metrics.Close()
	}
	if err != nil {
		s.cfg.Logf("while stopping: %v", err)
	}
	s.stopErr = err
	// The control socket goes last: the stop request is answered on it.
	go func() {
		if !force || s.answerStop {
			// Let the server send the answer before closing it.
			select {
			case <-s.ctl.Stopped():
			case <-time.After(2 * time.Second):
			}
		}
		if s.ctl != nil {
			s.ctl.Close()
		}
		s.cfg.Lock.Release()
		close(s.done)
	}()
	// Errors while stopping (a failed array cannot flush) do not keep the
	// array running: it is stopped either way, as md stops a failed array.
	return nil
}

// closeExports stops every export; with force a busy FUSE mount is
// detached lazily.
func (s *Service) closeExports(force bool) error {
	var errs []error
	if err := s.detachDoor(); err != nil {
		errs = append(errs, fmt.Errorf("block device: %w", err))
	}
	if s.fuse != nil {
		if err := s.fuse.Unmount(); err != nil {
			if force {
				if derr := syscall.Unmount(s.fuse.Dir(), syscall.MNT_DETACH); derr != nil {
					errs = append(errs, fmt.Errorf("FUSE unmount: %w", err))
				}
			} else {
				errs = append(errs, fmt.Errorf("FUSE unmount: %w", err))
			}
		}
	}
	for _, n := range []*nbd.Server{s.nbdUnix, s.nbdTCP} {
		if n != nil {
			if err := n.Close(); err != nil {
				errs = append(errs, fmt.Errorf("NBD: %w", err))
			}
		}
	}
	if s.nbdPath != "" {
		os.Remove(s.nbdPath)
	}
	return errors.Join(errs...)
}

// metricsLoop updates the array gauges once a second.
func (s *Service) metricsLoop() {
	m := s.cfg.Metrics
	if m == nil {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		s.updateMetrics()
		select {
		case <-s.tick:
			return
		case <-t.C:
		}
	}
}

func (s *Service) updateMetrics() {
	m, a := s.cfg.Metrics, s.cfg.Array
	switch {
	case s.cfg.ReadOnly:
		m.SetState(metrics.StateReadonly)
	case a.Clean():
		m.SetState(metrics.StateClean)
	default:
		m.SetState(metrics.StateActive)
	}
	m.SetMembers(a.Geometry().RaidDisks(), a.Degraded())
	m.SetRemote(s.remoteMetrics())
	ss := a.SyncStatus()
	act := metrics.SyncAction(ss.Action)
	if act == "" {
		act = metrics.SyncIdle
	}
	m.SetSync(act, ss.Done, ss.Total)
	m.SetMismatches(ss.Mismatches)
	if st, ok := a.BitmapStats(); ok {
		// The engine exposes flush counters only: spread the bytes of the
		// flushes since the last update evenly over them.
		if n := st.Flushes - s.bmFlushes; n > 0 && n < 1<<20 {
			per := int64((st.Bytes - s.bmBytes) / n)
			for i := uint64(0); i < n; i++ {
				m.BitmapFlush(per)
			}
		}
		s.bmFlushes, s.bmBytes = st.Flushes, st.Bytes
	}
}

// md's defaults for sync_speed_min and sync_speed_max (KiB/s).
const (
	DefaultSyncSpeedMin = 1000
	DefaultSyncSpeedMax = 200000
)

// Status reports the array state (control request "status").
func (s *Service) Status() (*Status, error) {
	a := s.cfg.Array
	g := a.Geometry()
	st := &Status{
		Name:             s.cfg.Name,
		Device:           s.cfg.Device,
		PID:              os.Getpid(),
		Started:          s.started,
		SuperMinor:       s.cfg.SuperMinor,
		Level:            int(g.Level()),
		RaidDisks:        g.RaidDisks(),
		ChunkBytes:       int64(g.ChunkSectors()) * 512,
		Size:             a.Size(),
		BlockSize:        a.BlockSize(),
		Events:           a.Events(),
		Clean:            a.Clean(),
		Degraded:         a.Degraded(),
		ReadOnly:         s.cfg.ReadOnly || s.backend.ro.Load(),
		SyncAction:       engine.ActionIdle,
		FailedReason:     a.FailedReason(),
		NBDSocket:        s.nbdPath,
		NBDListen:        s.nbdAddr,
		NBDTLS:           s.nbdAddr != "" && s.cfg.TLS != nil,
		FUSEFile:         s.FUSEFile(),
		Metrics:          s.cfg.MetricsAddr,
		ComponentSectors: g.DevSectors(0),
		KernelDeviceNote: s.doorNote,
	}
	if s.door != nil {
		st.KernelDevice, st.KernelDeviceKind = s.door.Path(), s.door.Kind()
	}
	ss := a.SyncStatus()
	if ss.Action != "" {
		st.SyncAction = ss.Action
	}
	if st.SyncAction != engine.ActionIdle {
		st.SyncDone, st.SyncTotal, st.SyncSpeed, st.SyncStarted = ss.Done, ss.Total, ss.SpeedKBps, ss.Started
	}
	st.LastSyncAction, st.Mismatches, st.SyncWritten, st.SyncCheckpoint = ss.LastAction, ss.Mismatches, ss.Written, ss.Checkpoint
	lim := a.SyncLimitsOf()
	st.SyncSpeedMin, st.SyncSpeedMax = lim.MinKBps, lim.MaxKBps
	if st.SyncSpeedMin == 0 {
		st.SyncSpeedMin = DefaultSyncSpeedMin
	}
	if st.SyncSpeedMax == 0 {
		st.SyncSpeedMax = DefaultSyncSpeedMax
	}
	members := a.Members()
	st.JournalMode = journalModeOf(a)
	desc := a.DescNumbers() // md's desc_nr where it is not dev_number (0.90, multipath)
	s.memMu.RLock()
	defer s.memMu.RUnlock()
	var ref *MemberSpec
	var refs []*MemberSpec // in-sync members, to fall back on
	for _, mi := range members {
		ms := MemberStatus{Role: mi.Role, DevNumber: -1, State: mi.State.String(), Events: mi.Events,
			WriteMostly: mi.WriteMostly, RecoveryOffset: mi.RecoveryOffset}
		if mi.State == engine.Recovering {
			ms.RecoveryOffset = mi.RecoveryOffset
		}
		if mi.Device >= 0 && mi.Device < len(s.cfg.Members) && s.cfg.Members[mi.Device].Path != "" {
			spec := &s.cfg.Members[mi.Device]
			ms.Path, ms.Block, ms.Major, ms.Minor, ms.DevNumber = spec.Path, spec.Block, spec.Major, spec.Minor, spec.DevNumber
			if n, ok := desc[mi.Device]; ok {
				ms.DevNumber = n
			}
			ms.FailFast = spec.FailFast
			ms.Remote = remoteStatus(spec.Dev)
			if mi.State == engine.InSync {
				if ref == nil {
					ref = spec
				}
				refs = append(refs, spec)
			}
		}
		st.Members = append(st.Members, ms)
	}
	if ref == nil {
		for i := range s.cfg.Members {
			if !s.removed[i] && s.cfg.Members[i].Path != "" {
				ref = &s.cfg.Members[i]
				break
			}
		}
	}
	if !a.Persistent() {
		buildStatus(st, a)
		return st, nil
	}
	if ref != nil {
		sb, raw, err := readSuper(ref)
		// Whatever one member's superblock says on disk (damaged by
		// someone else since), detail goes on with another's.
		for _, o := range refs {
			if err == nil {
				break
			}
			if o != ref {
				sb, raw, err = readSuper(o)
			}
		}
		if err != nil {
			return nil, Errorf(CodeFailed, "reading the superblock of %s: %v", ref.Path, err)
		}
		st.Superblock = raw
		st.Superblock090 = read090(ref)
		st.Layout = int(sb.Layout)
		if sb.Level == 0 && sb.FeatureMap&superblock.FeatureRAID0Layout == 0 && !s.takenRaid0.Load() {
			st.Layout = -1
		}
		if l, ok := s.cfg.Array.LiveLayout(); ok {
			st.Layout = l
		}
		st.Bitmap = sb.FeatureMap&superblock.FeatureBitmapOffset != 0 && g.Level() != layout.RAID0 && g.Level() != layout.Linear
		if p := s.cfg.Array.BitmapFile(); p != "" {
			st.Bitmap, st.BitmapFile = true, p
		}
	}
	return st, nil
}

// readSuper reads the current superblock of a member. The engine may be
// rewriting it at the same moment: a torn read fails its checksum and is
// retried.
func readSuper(m *MemberSpec) (*superblock.Superblock, []byte, error) {
	buf := make([]byte, superblock.AreaSize)
	var lastErr error
	for try := 0; try < 5; try++ {
		if _, err := m.Dev.ReadAt(buf, m.SBOffset); err != nil {
			return nil, nil, err
		}
		if sb, raw, ok := view090(buf, m.SBOffset); ok {
			return sb, raw, nil
		}
		sb, err := superblock.Parse(buf)
		if sb != nil && err == nil {
			n := superblock.HeaderSize + 2*int(sb.MaxDev)
			if n > len(buf) {
				n = len(buf)
			}
			return sb, append([]byte(nil), buf[:n]...), nil
		}
		lastErr = err
		if lastErr == nil {
			lastErr = superblock.ErrBadMagic
		}
		time.Sleep(time.Duration(try+1) * 5 * time.Millisecond)
	}
	return nil, nil, lastErr
}

// findMember returns the index of the member that device names (same
// path, same file, or same block device), or -1.
func (s *Service) findMember(device string) int {
	s.memMu.RLock()
	defer s.memMu.RUnlock()
	fi, err := os.Stat(device)
	for i, m := range s.cfg.Members {
		if s.removed[i] || m.Path == "" {
			continue
		}
		if m.Path == device {
			return i
		}
		if err != nil {
			continue
		}
		if nbdclient.IsURI(m.Path) {
			continue
		}
		mf, err := os.Stat(m.Path)
		if err == nil && os.SameFile(fi, mf) {
			return i
		}
		if m.Block && fi.Mode()&os.ModeDevice != 0 {
			if rdev, ok := rdevOf(fi); ok && rdev == [2]uint32{m.Major, m.Minor} {
				return i
			}
		}
	}
	return -1
}

// remoteStatus describes dev's connection when it is on an NBD server.
func remoteStatus(dev engine.Device) *RemoteStatus {
	nd, ok := dev.(*engine.NBDDevice)
	if !ok {
		return nil
	}
	c := nd.Client()
	rs := &RemoteStatus{State: "connected", Conns: c.Conns(), LatencyUS: c.Latency().Microseconds()}
	if err := c.Err(); err != nil {
		rs.State, rs.Error = "lost", err.Error()
	}
	return rs
}

// remoteMetrics lists the members on NBD servers that are still in the
// array, for the metrics.
func (s *Service) remoteMetrics() []metrics.RemoteMember {
	s.memMu.RLock()
	defer s.memMu.RUnlock()
	var out []metrics.RemoteMember
	for i, m := range s.cfg.Members {
		if s.removed[i] {
			continue
		}
		if rs := remoteStatus(m.Dev); rs != nil {
			out = append(out, metrics.RemoteMember{URI: m.Path, Connected: rs.State == "connected",
				Latency: time.Duration(rs.LatencyUS) * time.Microsecond})
		}
	}
	return out
}
