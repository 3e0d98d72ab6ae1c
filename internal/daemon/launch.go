package daemon

import (
	"crypto/tls"
	"fmt"
	"time"

	"mdtool/engine"
	"mdtool/internal/serve/metrics"
)

// LaunchMember is one member Launch opens, in the engine's order.
type LaunchMember struct {
	Path      string // as the user named it (opened, and shown in errors)
	Block     bool   // a block device (Major/Minor are its numbers)
	Major     uint32
	Minor     uint32
	SBOffset  int64 // byte offset of its v1.x superblock
	DevNumber int   // superblock dev_number
	FailFast  bool  // superblock devflags
}

// LaunchConfig is everything Launch needs to open an array's members,
// start the engine on them and serve it.
type LaunchConfig struct {
	Name       string // run-directory name (ArrayName)
	Device     string // md device as the user named it
	RunDir     string
	Lock       *Lock // the array's lock, already held; released on stop
	Members    []LaunchMember
	SuperMinor int
	// Build, if set, starts an array without superblocks (mdadm --build)
	// with these parameters instead of reading superblocks (build.go).
	Build *engine.BuildParams

	ReadOnly      bool
	Force         bool
	SafeModeDelay time.Duration
	// EngineName is the md name in the engine's kernel-style lines.
	EngineName string
	// SyncMinKBps and SyncMaxKBps, if not zero, are sync_speed_min/max.
	SyncMinKBps, SyncMaxKBps uint64

	NBDSocket      string // as Config.NBDSocket
	NBDListen      string
	NBDMaxConns    int
	NBDMaxBytes    int64
	NBDIdleTimeout time.Duration
	FUSEDir        string
	BlockDevice    string // as Config.BlockDevice
	// TLSCert, TLSKey and TLSCA, if a certificate or key is given, are
	// loaded with LoadTLS.
	TLSCert, TLSKey, TLSCA string

	// Metrics, if not nil, receives the array's metrics; MetricsAddr is
	// shown in the status.
	Metrics     *metrics.Registry
	MetricsAddr string

	// WrapDevice, if set, wraps each member Launch opens and each device
	// manage adds (e.g. fault injection in tests).
	WrapDevice func(path string, d engine.Device) (engine.Device, error)
	// RemoteTimeout: how long a member on an NBD server may leave a
	// request unanswered before it is failed (0: the client's default).
	RemoteTimeout time.Duration
	// BackupFile: the backup file of an in-place reshape (mdadm's
	// --assemble --backup-file): the engine restores its critical section
	// when needed, and the daemon removes the file when the reshape ends.
	BackupFile string
	// BitmapFile: an external write-intent bitmap file (mdadm's
	// --assemble --bitmap=FILE), opened read-write for the engine.
	BitmapFile string
	// RemoteReAdd: see Config.
	RemoteReAdd time.Duration
	// Added, if set, is called after member i is opened.
	Added func(i int)
	// Logf receives the service's log lines, EngineLogf the engine's.
	Logf, EngineLogf func(format string, a ...any)
}

// MemberOpenError: a member could not be opened (exclusively).
type MemberOpenError struct {
	Path string
	Err  error
}

func (e *MemberOpenError) Error() string { return fmt.Sprintf("open %s: %v", e.Path, e.Err) }
func (e *MemberOpenError) Unwrap() error { return e.Err }

// MemberWrapError: WrapDevice refused a member.
type MemberWrapError struct {
	Path string
	Err  error
}

func (e *MemberWrapError) Error() string { return e.Err.Error() }
func (e *MemberWrapError) Unwrap() error { return e.Err }

// RunError: the engine did not start on the members (engine.ErrZeroSize
// among others).
type RunError struct{ Err error }

func (e *RunError) Error() string { return e.Err.Error() }
func (e *RunError) Unwrap() error { return e.Err }

// TLSError: the TLS certificate, key or CA could not be loaded.
type TLSError struct{ Err error }

func (e *TLSError) Error() string { return e.Err.Error() }
func (e *TLSError) Unwrap() error { return e.Err }

// ServeError: the service (exports, control socket) did not start.
type ServeError struct{ Err error }

func (e *ServeError) Error() string { return e.Err.Error() }
func (e *ServeError) Unwrap() error { return e.Err }

// Launch opens the members exclusively, starts the engine on them and
// serves the array. On failure it closes what it opened and returns one
// of MemberOpenError, MemberWrapError, RunError, TLSError or ServeError.
func Launch(lc LaunchConfig) (*Service, error) {
	edevs, specs, err := openLaunchMembers(&lc)
	if err != nil {
		return nil, err
	}
	arr, err := openLaunched(&lc, edevs)
	if err != nil {
		for _, d := range edevs {
			d.Close()
		}
		return nil, &RunError{Err: err}
	}
	cfg := launchServiceConfig(&lc, arr, specs)
	if lc.TLSCert != "" || lc.TLSKey != "" {
		var tc *tls.Config
		tc, err = LoadTLS(lc.TLSCert, lc.TLSKey, lc.TLSCA)
		if err != nil {
			arr.Close()
			return nil, &TLSError{Err: err}
		}
		cfg.TLS = tc
	}
	svc, err := Start(cfg)
	if err != nil {
		arr.Close()
		return nil, &ServeError{Err: err}
	}
	for _, m := range specs {
		svc.launched = append(svc.launched, m.Path)
	}
	if active, _ := arr.Reshaping(); active && lc.BackupFile != "" {
		go svc.removeBackupAfterReshape(lc.BackupFile, nil)
	}
	return svc, nil
}

// openLaunchMembers opens the members in order for the engine (wrapped by
// WrapDevice) and the service; on failure it closes what it opened.
func openLaunchMembers(lc *LaunchConfig) ([]engine.Device, []MemberSpec, error) {
	var edevs []engine.Device
	var specs []MemberSpec
	fail := func(err error) ([]engine.Device, []MemberSpec, error) {
		for _, d := range edevs {
			d.Close()
		}
		return nil, nil, err
	}
	for i, m := range lc.Members {
		fd, err := engine.OpenMember(m.Path, engine.FileOptions{ReadOnly: lc.ReadOnly, Exclusive: true, RemoteTimeout: lc.RemoteTimeout})
		if err != nil {
			return fail(&MemberOpenError{Path: m.Path, Err: err})
		}
		var ed engine.Device = fd
		if lc.WrapDevice != nil {
			if ed, err = lc.WrapDevice(m.Path, fd); err != nil {
				fd.Close()
				return fail(&MemberWrapError{Path: m.Path, Err: err})
			}
		}
		edevs = append(edevs, ed)
		abs := MemberPath(m.Path)
		spec := MemberSpec{Path: abs, Dev: fd, Block: m.Block, SBOffset: m.SBOffset,
			DevNumber: m.DevNumber, FailFast: m.FailFast}
		if m.Block {
			spec.Major, spec.Minor = m.Major, m.Minor
		}
		specs = append(specs, spec)
		if lc.Added != nil {
			lc.Added(i)
		}
	}
	return edevs, specs, nil
}

// launchOptions are the engine's options for lc. The engine finds the
// same superblock the selection did: it tries 1.0, 1.1 and 1.2 and keeps
// the latest ctime, as mdadm does.
func launchOptions(lc *LaunchConfig) engine.Options {
	opts := engine.DefaultOptions()
	opts.ReadOnly = lc.ReadOnly
	opts.Force = lc.Force
	opts.SafeModeDelay = lc.SafeModeDelay
	if lc.EngineLogf != nil {
		opts.Logf = lc.EngineLogf
	}
	opts.Name = lc.EngineName
	return opts
}

// launchServiceConfig is the service's Config for lc.
func launchServiceConfig(lc *LaunchConfig, arr *engine.Array, specs []MemberSpec) Config {
	var ma *metrics.Array
	if lc.Metrics != nil {
		ma = metrics.NewArray(lc.Metrics, lc.Name)
	}
	return Config{Name: lc.Name, Device: lc.Device, RunDir: lc.RunDir, Lock: lc.Lock, Array: arr,
		Members: specs, SuperMinor: lc.SuperMinor, ReadOnly: lc.ReadOnly,
		NBDSocket: lc.NBDSocket, NBDListen: lc.NBDListen, FUSEDir: lc.FUSEDir, BlockDevice: lc.BlockDevice,
		NBDMaxConns: lc.NBDMaxConns, NBDMaxBytes: lc.NBDMaxBytes, NBDIdleTimeout: lc.NBDIdleTimeout,
		Metrics: ma, MetricsAddr: lc.MetricsAddr,
		SyncLimits: engine.SyncLimits{MinKBps: lc.SyncMinKBps, MaxKBps: lc.SyncMaxKBps},
		WrapDevice: lc.WrapDevice, RemoteTimeout: lc.RemoteTimeout, RemoteReAdd: lc.RemoteReAdd, Logf: lc.Logf}
}
