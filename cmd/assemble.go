package cmd

import (
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"mdtool/bitmap"
	"mdtool/engine"
	"mdtool/internal/daemon"
	"mdtool/internal/mdadm/member"
	"mdtool/internal/mdadm/plan"
	"mdtool/internal/nbdclient"
	"mdtool/internal/serve/metrics"
	"mdtool/ioctl"
	"mdtool/superblock"
)

const assembleLong = `Assemble an existing md array from its member devices and serve it, as
"mdadm --assemble" (-A) assembles an array into the kernel.

The members are the DEVICEs given after the md device, or with --scan the
devices of mdadm.conf's DEVICE lines (default: every partition), picked by
the array's ARRAY line (uuid=, name=, devices=, level=, num-devices=) or by
--uuid / --name. Without a configuration line for them, --scan assembles
every array it finds ("auto-assembly"), named after the array name stored in
the superblocks.

Members are chosen exactly as mdadm 4.2 chooses them: the freshest active
member (highest event count) is the reference; members at most one event
behind it are used; older ("non-fresh") members and members that record the
reference as failed are left out (with --verbose mdtool says which and why). Devices of
another array, or without a superblock, abort the assembly. Nothing is
written to any member unless the array starts (or --force is given, which
updates stale event counts as mdadm does).

The array starts when all the members its superblock counts as working are
there. An array with fewer members (degraded) starts only with --run, or,
as with mdadm, with --scan or --force when it is still usable; --no-degraded
refuses that for --scan. An array that cannot serve its data (too many
members missing) never starts.

Once started the array is served by a daemon (this process, or with the
default background mode a child process that outlives the command) until
"mdtool stop MD" or SIGTERM:

  NBD    on a unix socket, by default RUN-DIR/NAME.nbd (--nbd-socket), and
         on TCP with --nbd-listen HOST:PORT (TLS with --tls-cert/--tls-key,
         client certificates with --tls-ca; plaintext on an address that
         is not loopback gets a warning)
  FUSE   with --fuse DIR: DIR becomes a mount holding one file, NAME, the
         array's contents (attach it with losetup); a dead mount left
         there by a daemon killed with SIGKILL is detached first
  HTTP   Prometheus metrics at http://ADDR/metrics with --metrics ADDR

and, as md's arrays are, as a kernel block device (--device, default
auto: ublk when /dev/ublk-control exists, else the kernel NBD client,
loading the nbd module if needed, else none, saying once why):

  nbd    /dev/nbdN, connected over generic netlink with several
         in-process connections; NBD carries no io_min/io_opt hints
  ublk   /dev/ublkbN
  none   no block device

The md device name becomes a link to it (/dev/md/data -> ../nbd0, as udev
makes for md; a /dev/mdN the user named too, unless a real md node holds
it), removed at stop. A daemon killed with SIGKILL leaves the device
configured: the next assemble of the array gives the same /dev/nbdN new
connections within two minutes and the requests waiting on it continue.

NBD clients share bounded resources: at most --nbd-max-clients connections
(default 64; more are closed at once), at most --nbd-max-memory of request
data in flight over all of them (default 256M; requests wait for it), and a
connection that neither sends requests nor takes its replies for
--nbd-idle-timeout (default 5m) is dropped (as is one whose reply write
stays blocked that long). Beyond --nbd-max-memory each connection may keep
1 MiB of small requests in flight, so that clients are served while others
hold the budget. Whatever the clients do, the daemon's RSS stays below about
twice (--nbd-max-memory + 1 MiB x --nbd-max-clients) plus 100 MiB: 740 MiB
with the defaults.

NAME is the md device without /dev/md/ (or /dev/): /dev/md/data is "data",
/dev/md0 is "md0". The run directory (--run-dir, MDTOOL_RUN_DIR, default
/run/mdtool) holds per array a lock file, the control socket NAME.sock
(mode 0600) used by detail, stop and manage, the NBD socket and, for a
background daemon, its log NAME.log. A daemon that died leaves nothing that
blocks the next assemble.

Without --foreground the command returns once the array is ready to serve;
with it the process serves until stopped (use it under systemd, see
mdtool@.service; readiness is reported with sd_notify).

EXIT STATUS
  0  every array started (or, with --no-degraded, was left unstarted)
  1  an array could not be assembled or started
  2  bad arguments, or no devices were found`

type assembleOptions struct {
	scan, run, force, foreground, readonly, noDegraded bool
	// incrStart: -I or -R starts the members -I collected (md's
	// array_state, no assembly rules): without its journal the array
	// runs read-only, as md runs it.
	incrStart bool
	// created: create starts the array it wrote (startCreated): the
	// members were given in md's ADD_NEW_DISK order of the create,
	// which numbers multipath's paths (engineOrder).
	created                                      bool
	uuid, name, config, update, auto, superMinor string
	backupFile                                   string // --backup-file: an in-place reshape's (assemble_backup.go)
	bitmapFile                                   string // --bitmap: a bitmap file (assemble_bitmapfile.go)
	srv                                          serveOptions
}

// serveOptions are the daemon and export flags.
type serveOptions struct {
	runDir                 string
	nbdSocket, nbdListen   string
	tlsCert, tlsKey, tlsCA string
	nbdMaxClients          int
	nbdMaxMemory           string
	nbdIdleTimeout         time.Duration
	remoteTimeout          time.Duration // members on NBD servers
	remoteReAdd            time.Duration // automatic re-add of those (0: off)
	fuse, metrics          string
	device                 string // --device: the kernel block device door
	safeModeDelay          time.Duration
	syncMin, syncMax       uint64
	verbose                int
	// noSignals leaves signal handling to the caller (in-process tests).
	noSignals bool
}

// addRunDirFlag adds --run-dir (configurable: MDTOOL_RUN_DIR).
func addRunDirFlag(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "run-dir", daemon.DefaultRunDir, "directory of the daemons' locks and control sockets")
	markConfigurable(fs, "run-dir")
}

func newAssembleCmd(env *Env) *cobra.Command {
	o := &assembleOptions{}
	c := &cobra.Command{
		Use:   "assemble [flags] [MD-DEVICE [DEVICE...]]",
		Short: "Assemble an existing array and serve it (mdadm --assemble)",
		Long:  assembleLong,
		Example: `  mdtool --assemble /dev/md/data /dev/sdb1 /dev/sdc1 /dev/sdd1
  mdtool -A --scan
  mdtool assemble --foreground --scan /dev/md/data
  mdtool assemble /dev/md0 --run --nbd-listen 0.0.0.0:10809 --tls-cert server.pem --tls-key server.key \
         --tls-ca clients-ca.pem disk0.img disk1.img
  mdtool assemble /dev/md0 --run --nbd-listen 127.0.0.1:10809 disk0.img disk1.img
  mdtool assemble /dev/md0 --fuse /mnt/md0 d0.img d1.img d2.img && losetup -f --show /mnt/md0/md0`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			o.srv.verbose = verbosityOf(c)
			hh, _ := c.Flags().GetString("homehost")
			if err := checkAssembleBitmap(env, o, c.Flags().Changed("bitmap")); err != nil {
				return err
			}
			return runAssemble(env, o, args, hh, flagChanged(c.Flags(), "homehost"))
		},
	}
	f := c.Flags()
	f.BoolVarP(&o.scan, "scan", "s", false, "take members and identities from mdadm.conf")
	f.BoolVarP(&o.run, "run", "R", false, "start the array even if members are missing (degraded)")
	f.BoolVarP(&o.force, "force", "f", false, "assemble even if some superblocks are out of date (updates them)")
	f.BoolVar(&o.noDegraded, "no-degraded", false, "with --scan: do not start arrays that would be degraded")
	f.BoolVarP(&o.readonly, "readonly", "o", false, "start the array read-only")
	f.StringVarP(&o.uuid, "uuid", "u", "", "only use members of the array with this UUID")
	f.StringVarP(&o.name, "name", "N", "", "only use members of the array with this name")
	f.StringVarP(&o.config, "config", "c", "", "mdadm.conf to read (default /etc/mdadm/mdadm.conf, then /etc/mdadm.conf)")
	f.StringVarP(&o.update, "update", "U", "", "rewrite the members' superblocks before the start: uuid, name, homehost, resync, devicesize, bbl, no-bbl, ... ('?' lists them)")
	f.StringVarP(&o.auto, "auto", "a", "", "accepted for mdadm compatibility; no device nodes are created")
	f.StringVarP(&o.superMinor, "super-minor", "m", "", "only members whose 0.90 superblock has this preferred minor (\"dev\": the md device's)")
	f.StringVar(&o.backupFile, "backup-file", "", "the backup file of an in-place reshape: its critical section is restored if needed")
	f.StringVarP(&o.bitmapFile, "bitmap", "b", "", "the array's write-intent bitmap file (a bitmap made with --create --bitmap=FILE)")
	f.BoolVar(&o.foreground, "foreground", false, "serve in this process until stopped, instead of a background daemon")
	addServeFlags(f, &o.srv)
	f.BoolVar(&o.incrStart, "incremental-start", false, "start the members incremental collected")
	f.BoolVar(&o.created, "created", false, "start the array create wrote, its members in create's order")
	for _, n := range []string{"auto", "incremental-start", "created"} {
		_ = f.MarkHidden(n)
	}
	return c
}

// addServeFlags adds the daemon and export flags.
func addServeFlags(f *pflag.FlagSet, s *serveOptions) {
	addRunDirFlag(f, &s.runDir)
	f.StringVar(&s.nbdSocket, "nbd-socket", "", `NBD unix socket (default RUN-DIR/NAME.nbd; "none": no unix socket)`)
	f.StringVar(&s.nbdListen, "nbd-listen", "", "also serve NBD on this TCP address (HOST:PORT)")
	f.StringVar(&s.tlsCert, "tls-cert", "", "PEM certificate for NBD over TCP (requires TLS from clients)")
	f.StringVar(&s.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	f.StringVar(&s.tlsCA, "tls-ca", "", "PEM CA certificates: require client certificates signed by them (needs --tls-cert and --tls-key)")
	addNBDLimitFlags(f, s)
	addDeviceFlag(f, &s.device)
	f.StringVar(&s.fuse, "fuse", "", "mount a FUSE file system on DIR holding the array as one file")
	f.StringVar(&s.metrics, "metrics", "", "serve Prometheus metrics on ADDR (HOST:PORT) at /metrics")
	f.DurationVar(&s.safeModeDelay, "safe-mode-delay", 200*time.Millisecond, "idle time after the last write before the array is marked clean (md safe_mode_delay)")
	f.Uint64Var(&s.syncMin, "sync-speed-min", 0, "md sync_speed_min in KiB/s (0: 1000); see also: mdtool action")
	f.Uint64Var(&s.syncMax, "sync-speed-max", 0, "md sync_speed_max in KiB/s (0: 200000); see also: mdtool action")
	markConfigurable(f, "nbd-listen", "tls-cert", "tls-key", "tls-ca", "metrics", "safe-mode-delay", "sync-speed-min", "sync-speed-max")
}

// assembleIdent is mdadm's struct mddev_ident: what an array must match.
type assembleIdent struct {
	uuid      [16]byte
	uuidSet   bool
	name      string
	nameAlt   string // name= as mdadm 4.2 reads it, when that differs from name
	level     int    // LevelUnset if not given
	raidDisks int    // -1 if not given
	devices   string
	// superMinor is --super-minor or super-minor=: the preferred minor
	// of a 0.90 superblock (-1 if not given).
	superMinor int
	bitmapFile string // bitmap= of an ARRAY line
}

func newIdent() assembleIdent { return assembleIdent{level: LevelUnset, raidDisks: -1, superMinor: -1} }

func identFromConf(a *ConfArray) assembleIdent {
	id := newIdent()
	id.uuid, id.uuidSet = a.UUID, a.UUIDSet
	id.name = a.Name
	if a.NameAsWritten != a.Name {
		id.nameAlt = a.NameAsWritten
	}
	id.level = a.Level
	id.raidDisks = a.RaidDisks
	id.devices = a.Devices
	id.superMinor = a.SuperMinor
	id.bitmapFile = a.Bitmap
	return id
}

func (id assembleIdent) any() bool {
	return id.uuidSet || id.name != "" || id.devices != "" || id.superMinor >= 0
}

// assembleJob is one call of mdadm's Assemble(): an md device (or "" for
// auto-assembly), what its members must match, and the members (nil: the
// devices of mdadm.conf).
type assembleJob struct {
	mddev  string
	ident  assembleIdent
	devs   []string
	inargv bool
	auto   bool
}

// assembler holds what every job shares.
type assembler struct {
	env      *Env
	o        *assembleOptions
	conf     *MdadmConf
	homehost string
	verbose  int
	// used marks devices taken by an array assembled earlier in this run
	// (auto-assembly loops over the remaining ones).
	used map[string]bool
	// open daemons started by this process, for the "already active"
	// check of later jobs.
	started     []*startedArray
	reg         *metrics.Registry
	metricsAddr string // the address metrics are served on
	doorNoted   bool   // the "no block device" line was said
}

type startedArray struct {
	name string
	dev  string
	uuid [16]byte
	svc  *daemon.Service
}

func (as *assembler) errf(format string, a ...any) {
	fmt.Fprintf(as.env.Stderr, "mdtool: "+format, a...)
}

func runAssemble(env *Env, o *assembleOptions, args []string, homehostFlag string, homehostGiven bool) error {
	absBackupFile(o)
	if done, err := checkUpdateWord(env, o.update); done {
		return err
	}
	uuid, err := checkAssembleFlags(o, args)
	if err != nil {
		return err
	}
	daemonChild := os.Getenv(daemon.ReadyFDEnv) != ""
	if !o.foreground && !daemonChild {
		return spawnAssemble(env)
	}
	if w := o.srv.plaintextWarning(); w != "" {
		fmt.Fprintf(env.Stderr, "mdtool: %s\n", w)
	}
	if daemonChild {
		// decided once: the notifier clears the variable before the
		// output moves to the log file
		engineLog.hold()
	}
	conf, err := LoadMdadmConf(o.config)
	if err != nil {
		return exitf(ExitFailure, "%v", err)
	}
	as := &assembler{env: env, o: o, conf: conf, verbose: o.srv.verbose, used: map[string]bool{}}
	as.homehost = ResolveHomeHost(homehostFlag, homehostGiven, conf, env.Hostname)
	for _, w := range conf.Warnings {
		as.errf("%s\n", confWarningText(w))
	}
	cmdIdent := newIdent()
	cmdIdent.uuid, cmdIdent.uuidSet = uuid, o.uuid != ""
	cmdIdent.name = o.name
	if cmdIdent.superMinor, err = superMinorFlag(o.superMinor, args); err != nil {
		return err
	}

	jobs, rv, err := as.jobsFor(args, cmdIdent)
	if err != nil {
		return err
	}
	if len(jobs) > 1 && (o.srv.nbdSocket != "" && o.srv.nbdSocket != "none" || o.srv.nbdListen != "" || o.srv.fuse != "") {
		return usagef("--nbd-socket, --nbd-listen and --fuse need a single array")
	}
	if o.srv.metrics != "" {
		metricsSrv, err := as.serveMetrics()
		if err != nil {
			return err
		}
		defer metricsSrv.Close()
	}
	rv = as.runJobs(jobs, len(args), rv)
	if len(as.started) == 0 {
		if rv == ExitOK {
			return nil
		}
		return &ExitError{Code: rv}
	}
	return as.serve(rv)
}

// checkAssembleFlags refuses the flag combinations assemble does not take
// and returns --uuid's value.
func checkAssembleFlags(o *assembleOptions, args []string) ([16]byte, error) {
	var uuid [16]byte
	if !o.scan && o.noDegraded {
		return uuid, exitf(ExitFailure, "--no-degraded not meaningful without a --scan assembly.")
	}
	if len(args) == 0 && !o.scan {
		return uuid, usagef("an md device must be given in --assemble mode (or --scan)")
	}
	if err := o.srv.checkTLSFlags(); err != nil {
		return uuid, err
	}
	if err := checkDeviceFlag(o.srv.device); err != nil {
		return uuid, err
	}
	if _, _, _, err := o.srv.nbdLimits(); err != nil {
		return uuid, err
	}
	if o.uuid != "" {
		u, ok := parseUUIDText(o.uuid)
		if !ok {
			return uuid, usagef("bad uuid: %s", o.uuid)
		}
		uuid = u
	}
	return uuid, nil
}

// jobsFor turns the command line into assemble jobs: one md device with
// its members, md devices identified by mdadm.conf, every ARRAY line of
// mdadm.conf, or auto-assembly. rv is 1 when an md device given with
// --scan is not in mdadm.conf.
func (as *assembler) jobsFor(args []string, cmdIdent assembleIdent) (jobs []assembleJob, rv ExitCode, err error) {
	o, conf := as.o, as.conf
	switch {
	case !o.scan && len(args) == 1 && !cmdIdent.uuidSet && cmdIdent.name == "" && cmdIdent.superMinor < 0:
		// Only an md device: its identity comes from mdadm.conf.
		a := confArrayFor(conf, args[0])
		if a == nil {
			as.errf("%s not identified in config file.\n", args[0])
			return nil, 0, &ExitError{Code: ExitFailure}
		}
		jobs = append(jobs, assembleJob{mddev: args[0], ident: identFromConf(a)})
	case !o.scan:
		jobs = append(jobs, assembleJob{mddev: args[0], ident: cmdIdent, devs: args[1:], inargv: len(args) > 1})
	case len(args) > 0:
		for _, d := range args {
			a := confArrayFor(conf, d)
			if a == nil {
				as.errf("%s not identified in config file.\n", d)
				rv |= ExitFailure
				continue
			}
			jobs = append(jobs, assembleJob{mddev: d, ident: identFromConf(a)})
		}
	default:
		if len(conf.DeviceList()) == 0 {
			as.errf("No devices listed in conf file were found.\n")
			return nil, 0, &ExitError{Code: ExitFailure}
		}
		for i := range conf.Arrays {
			a := &conf.Arrays[i]
			if strings.EqualFold(a.Device, "<ignore>") {
				continue
			}
			jobs = append(jobs, assembleJob{mddev: a.Device, ident: identFromConf(a)})
		}
		if len(jobs) == 0 {
			jobs = append(jobs, assembleJob{auto: true, ident: cmdIdent})
		}
	}
	return jobs, rv, nil
}

// serveMetrics starts the --metrics server all arrays of this run share.
func (as *assembler) serveMetrics() (*daemon.MetricsServer, error) {
	as.reg = metrics.NewRegistry()
	srv, err := daemon.ServeMetrics(as.o.srv.metrics, as.reg)
	if err != nil {
		return nil, exitf(ExitFailure, "cannot serve metrics on %s: %v", as.o.srv.metrics, err)
	}
	as.metricsAddr = srv.Addr()
	return srv, nil
}

// runJobs assembles every job and returns the exit status, starting from
// rv (nargs: the md devices given on the command line).
func (as *assembler) runJobs(jobs []assembleJob, nargs int, rv ExitCode) ExitCode {
	// cnt is mdadm's: ARRAY lines tried, plus arrays auto-assembly
	// found (whose failures alone do not change the exit status).
	cnt := 0
	for _, j := range jobs {
		if j.auto {
			cnt += as.autoAssemble(j)
			continue
		}
		r := as.assemble(j)
		if r == ExitUsage && len(jobs) > 1 {
			r = ExitFailure
		}
		rv |= r
		cnt++
	}
	if as.o.scan && nargs == 0 && cnt == 0 && rv == ExitOK {
		as.errf("No arrays found in config file or automatically\n")
		rv = ExitFailure
	}
	return rv
}

// confArrayFor is conf_get_ident: the ARRAY line for md device dev.
func confArrayFor(conf *MdadmConf, dev string) *ConfArray {
	for i := range conf.Arrays {
		a := &conf.Arrays[i]
		if a.Device != "" && devnameMatches(dev, a.Device) {
			return a
		}
	}
	return nil
}

// devnameMatches is mdadm's devname_matches: /dev/md/X, /dev/X, mdN and N
// compare equal.
func devnameMatches(name, match string) bool {
	strip := func(s string) string {
		switch {
		case strings.HasPrefix(s, "/dev/md/"):
			s = s[8:]
		case strings.HasPrefix(s, "/dev/"):
			s = s[5:]
		}
		if len(s) > 2 && strings.HasPrefix(s, "md") && s[2] >= '0' && s[2] <= '9' {
			s = s[2:]
		}
		return s
	}
	return strip(name) == strip(match)
}

// spawnAssemble starts this command again as a background daemon and
// waits until it is ready.
func spawnAssemble(env *Env) error {
	args := append([]string{}, os.Args[1:]...)
	// --foreground goes before a "--" so that it stays a flag.
	i := len(args)
	for k, a := range args {
		if a == "--" {
			i = k
			break
		}
	}
	args = append(args[:i], append([]string{"--foreground"}, args[i:]...)...)
	code, err := spawnSelf(env, args)
	var ce *daemon.ChildExitError
	if errors.As(err, &ce) {
		return &ExitError{Code: ExitCode(ce.Code)}
	}
	if err != nil {
		return exitf(ExitFailure, "cannot start the daemon: %v", err)
	}
	if code != 0 {
		return &ExitError{Code: ExitCode(code)}
	}
	return nil
}

// spawnSelf runs this executable with args as a background daemon (see
// daemon.Spawn), sharing env's stdout and stderr until it is ready, and
// returns the status it reported.
func spawnSelf(env *Env, args []string) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return int(ExitFailure), fmt.Errorf("cannot find my own executable: %v", err)
	}
	stdout, _ := env.Stdout.(*os.File)
	stderr, _ := env.Stderr.(*os.File)
	if stdout == nil {
		stdout = os.Stdout
	}
	if stderr == nil {
		stderr = os.Stderr
	}
	return daemon.Spawn(exe, args, os.Environ(), stdout, stderr)
}

// serve reports readiness and serves the started arrays until every one
// has stopped (mdtool stop, or SIGTERM/SIGINT for all).
func (as *assembler) serve(rv ExitCode) error {
	logPath := ""
	if len(as.started) == 1 {
		logPath = daemon.PathsFor(as.o.srv.runDir, as.started[0].name).Log()
	} else {
		logPath = filepath.Join(as.o.srv.runDir, "mdtool.log")
	}
	n := daemon.NewNotifier(logPath)
	if n.Background() {
		// A daemon keeps no directory busy; member paths are absolute.
		os.Chdir("/")
	}
	sigs := make(chan os.Signal, 2)
	if !as.o.srv.noSignals {
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		defer signal.Stop(sigs)
	}
	if err := n.Ready(int(rv)); err != nil {
		log.Printf("readiness notification: %v", err)
	}
	engineLog.flush()
	var wg sync.WaitGroup
	all := make(chan struct{})
	for _, s := range as.started {
		wg.Add(1)
		go func(s *startedArray) {
			defer wg.Done()
			<-s.svc.Done()
			log.Printf("%s: stopped", escName(s.dev))
		}(s)
	}
	go func() { wg.Wait(); close(all) }()
	for {
		select {
		case <-all:
			n.Stopping()
			return nil
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				continue
			}
			log.Printf("%v: stopping every array", sig)
			n.Stopping()
			for _, s := range as.started {
				if err := s.svc.Shutdown(); err != nil {
					log.Printf("%s: stop: %v", escName(s.dev), err)
				}
			}
		}
	}
}

// ---- device selection (mdadm's select_devices / load_devices) ----

// asmDev is one candidate member with its superblock.
type asmDev struct {
	path     string
	sb       *superblock.Superblock
	minor    int
	sbOff    int64 // bytes
	block    bool
	rdev     uint64
	events   uint64
	raidDisk int // -1 for spare/faulty
	state    int
	recovery uint64 // recovery_start, MaxSector when in sync
	clean    bool
	devmap   []bool // roles this superblock counts as working
	uptodate bool
	used     int // mdadm's tmpdev->used: 0 unused, 1 chosen, 2 rejected
	// refused is what superblock.Validate objected to: mdadm selects the
	// device, the kernel refuses it in ADD_NEW_DISK (super_1_load), so
	// it is left out and never written.
	refused error
}

// probeCandidate loads the v1 superblock of path as select_devices does.
// reason is the mdadm message for a device without a usable superblock.
func probeCandidate(path string) (*asmDev, string) {
	p, err := probeDevice(path)
	if err != nil {
		var oe *openError
		if errors.As(err, &oe) {
			if errors.Is(oe.err, ioctl.ErrNotMember) {
				return nil, oe.Error()
			}
			return nil, fmt.Sprintf("cannot open device %s: %s", path, strerror(oe.err))
		}
		return nil, fmt.Sprintf("cannot open device %s: %v", path, err)
	}
	defer p.close()
	if p.m == nil {
		return nil, fmt.Sprintf("no recogniseable superblock on %s", path)
	}
	switch p.kind {
	case kindV1:
	case kindV090:
		return probeCandidate090(p), ""
	default:
		return nil, fmt.Sprintf("no recogniseable superblock on %s", path)
	}
	v := p.v1
	sb, err := superblock.Parse(v.loaded.Raw)
	if sb == nil {
		return nil, fmt.Sprintf("no RAID superblock on %s", path)
	}
	_ = err // mdadm loads superblocks with a bad checksum too
	d := &asmDev{path: path, sb: sb, minor: v.minor, sbOff: int64(v.loaded.Offset) * 512,
		block: p.m.Geom.IsBlockDevice, rdev: p.m.Geom.Dev, events: sb.Events, refused: v.loaded.Err}
	d.fillInfo()
	return d, ""
}

// fillInfo is getinfo_super1's disk part.
func (d *asmDev) fillInfo() {
	sb := d.sb
	role := uint16(superblock.RoleFaulty)
	if sb.DevNumber < sb.MaxDev && int(sb.DevNumber) < len(sb.DevRoles) {
		role = sb.DevRoles[sb.DevNumber]
	}
	d.raidDisk = -1
	switch role {
	case superblock.RoleSpare:
		d.state = 0
	case superblock.RoleFaulty:
		d.state = mdDiskFaulty
	case superblock.RoleJournal:
		d.state = mdDiskJournal
		d.raidDisk = int(role)
	default:
		d.state = mdDiskActive | mdDiskSync
		d.raidDisk = int(role)
	}
	if sb.DevFlags&superblock.DevFlagWriteMostly != 0 {
		d.state |= mdDiskWriteMostly
	}
	if sb.DevFlags&superblock.DevFlagFailFast != 0 {
		d.state |= mdDiskFailFast
	}
	if sb.FeatureMap&superblock.FeatureReplacement != 0 {
		d.state &^= mdDiskSync
		d.state |= mdDiskReplacement
	}
	d.recovery = superblock.MaxSector
	if sb.FeatureMap&superblock.FeatureRecoveryOffset != 0 {
		d.recovery = sb.RecoveryOffset
	}
	d.clean = sb.ResyncOffset == superblock.MaxSector
	n := int(sb.RaidDisks)
	if n > superblock.RoleMax {
		n = superblock.RoleMax // roles are below RoleMax; a damaged raid_disks allocates no more
	}
	d.devmap = make([]bool, n)
	for i := 0; i < int(sb.MaxDev) && i < len(sb.DevRoles); i++ {
		if r := int(sb.DevRoles[i]); r < n {
			d.devmap[r] = true
		}
	}
}

// workingDisks is getinfo_super1's working_disks.
func workingDisks(sb *superblock.Superblock) int {
	w := 0
	for i := 0; i < int(sb.MaxDev) && i < len(sb.DevRoles); i++ {
		if uint32(sb.DevRoles[i]) < sb.RaidDisks {
			w++
		}
	}
	return w
}

// matchHome is match_home_super1: 1 when the array name starts with
// "homehost:", 0 when not, -1 without a homehost.
func matchHome(sb *superblock.Superblock, homehost string) int {
	if homehost == "" {
		return -1
	}
	l := len(homehost)
	if l < 32 && sb.SetName[l] == ':' && string(sb.SetName[:l]) == homehost {
		return 1
	}
	return 0
}

// nameMatches is Assemble.c's name_matches.
func nameMatches(found, required, homehost string) bool {
	if found == required {
		return true
	}
	host, rest, ok := strings.Cut(found, ":")
	if !ok {
		return false
	}
	if host == "any" || homehost == "any" || host == homehost {
		return rest == required
	}
	return false
}

// identMatches is ident_matches; it prints why a device does not match
// when report is set.
func (as *assembler) identMatches(id assembleIdent, d *asmDev, report bool) bool {
	sb := d.sb
	say := func(format string) bool {
		if report {
			as.errf(format, d.path)
		}
		return false
	}
	if id.uuidSet && as.o.update != "uuid" && sb.SetUUID != id.uuid && sb.SetUUID != [16]byte{} {
		return say("%s has wrong uuid.\n")
	}
	if id.name != "" && as.o.update != "name" && !nameMatches(sb.Name(), id.name, as.homehost) &&
		(id.nameAlt == "" || !nameMatches(sb.Name(), id.nameAlt, as.homehost)) {
		return say("%s has wrong name.\n")
	}
	if id.superMinor >= 0 && id.superMinor != preferredMinor(d) {
		return say("%s has wrong super-minor.\n")
	}
	if id.level != LevelUnset && id.level != int(sb.Level) {
		return say("%s has wrong raid level.\n")
	}
	if id.raidDisks >= 0 && sb.RaidDisks != 0 && id.raidDisks != int(sb.RaidDisks) {
		return say("%s requires wrong number of drives.\n")
	}
	return true
}

// matchOneOf is mdadm's match_oneof: dev matches one of the comma
// separated glob patterns.
func matchOneOf(patterns, dev string) bool {
	for _, p := range strings.Split(patterns, ",") {
		if ok, _ := filepath.Match(p, dev); ok {
			return true
		}
	}
	return false
}

// isBusy reports whether a device is in use: a block device that cannot
// be opened O_EXCL, or an image file another mdtool command or daemon has
// locked (ioctl.OpenMember's exclusive mode, released at once). Like
// mdadm 4.2's select_devices, which says "is busy - skipping" whenever its
// O_RDONLY|O_EXCL dev_open fails, any failure of that open counts (the
// probe before it has already opened the device, so what is left is in
// practice EBUSY or the image file's lock).
func isBusy(d *asmDev) bool {
	if nbdclient.IsURI(d.path) {
		return false // nothing locks a remote export
	}
	f, err := ioctl.OpenMember(d.path, ioctl.OpenOptions{Exclusive: true})
	if err != nil {
		return true
	}
	f.Close()
	return false
}

// leftOutDuplicate says why d is not used: kept, with the same event
// count, already fills d's slot. It is the same file or device given
// twice (a symlink, a hard link), or a copy of kept's superblock (a byte
// copy of a member, overlapping partitions). mdadm 4.2 keeps the first
// silently for v1.x.
func (as *assembler) leftOutDuplicate(d, kept *asmDev, slot int) {
	if as.verbose < 0 {
		return
	}
	a, err1 := os.Stat(d.path)
	b, err2 := os.Stat(kept.path)
	if err1 == nil && err2 == nil && os.SameFile(a, b) {
		as.errf("%s is the same device as %s - skipping\n", d.path, kept.path)
		return
	}
	as.errf("%s has the same superblock as %s (slot %d, same events) - skipping; if they are really different, zero the superblock on one\n", d.path, kept.path, slot)
}

// selectDevices is select_devices: it returns the devices that form one
// array (used == 1), or rc != 0: 1 when the assembly must abort, 2 when
// nothing usable was found.
func (as *assembler) selectDevices(j assembleJob, list []string) ([]*asmDev, ExitCode) {
	report := (j.inargv && as.verbose >= 0) || as.verbose > 0
	var chosen []*asmDev
	var first *asmDev
	for _, path := range list {
		if as.used[path] {
			continue
		}
		if j.ident.devices != "" && !matchOneOf(j.ident.devices, path) {
			if report {
				as.errf("%s is not one of %s\n", path, j.ident.devices)
			}
			continue
		}
		d, why := as.probeCandidateFor(path) // assemble_byteorder.go
		if d == nil {
			if report {
				for _, w := range missingSuperWords(first, path, why) {
					as.errf("%s\n", w)
				}
			}
			if j.auto || !j.inargv || j.ident.name != "" || j.ident.uuidSet || j.ident.superMinor >= 0 {
				continue
			}
			as.errf("%s has no superblock - assembly aborted\n", path)
			return nil, ExitFailure
		}
		if !as.identMatches(j.ident, d, report) {
			continue
		}
		if isBusy(d) || as.incrementalWaiting(path) {
			if report {
				as.errf("%s is busy - skipping\n", path)
			}
			continue
		}
		if first == nil {
			first = d
		}
		if first.minor != d.minor || !sameArraySB(first.sb, d.sb) {
			if j.auto {
				continue
			}
			if as.homehost != "" {
				f, l := matchHome(first.sb, as.homehost), matchHome(d.sb, as.homehost)
				if f != l && (f == 1 || l == 1) {
					if f == 1 {
						if report {
							as.errf("%s misses out due to wrong homehost\n", path)
						}
						continue
					}
					if report {
						as.errf("%s overrides previous devices due to good homehost\n", path)
					}
					chosen = chosen[:0]
					first = d
					chosen = append(chosen, d)
					continue
				}
			}
			as.errf("superblock on %s doesn't match others - assembly aborted\n", path)
			return nil, ExitFailure
		}
		chosen = append(chosen, d)
	}
	if len(chosen) == 0 {
		return nil, ExitUsage
	}
	return chosen, ExitOK
}

// sameArraySB is compare_super1 == 0: same set_uuid, ctime, level,
// layout, size, chunksize and raid_disks.
func sameArraySB(a, b *superblock.Superblock) bool {
	return a.SetUUID == b.SetUUID && a.CTime == b.CTime && a.Level == b.Level && a.Layout == b.Layout &&
		a.Size == b.Size && a.ChunkSize == b.ChunkSize && a.RaidDisks == b.RaidDisks
}

// refuseInvalid leaves out the devices whose superblock the kernel's
// super_1_load refuses, with mdadm's line for a failed ADD_NEW_DISK plus
// the field at fault, one line per device.
func (as *assembler) refuseInvalid(mddev string, devs []*asmDev) []*asmDev {
	var ok []*asmDev
	for _, d := range devs {
		if d.refused == nil {
			ok = append(ok, d)
			continue
		}
		as.errf("failed to add %s to %s: Invalid argument (%s)\n", d.path, mddev, superProblem(d.refused))
	}
	return ok
}

// superProblem words a superblock validation error in one short phrase
// naming the field: "bad superblock: sb_csum 1b22e475 - expected ...".
func superProblem(err error) string {
	if fe := superblock.FirstProblem(err); fe != nil {
		return fmt.Sprintf("invalid superblock: %s %s", fe.Field, fe.Msg)
	}
	return fmt.Sprintf("invalid superblock: %v", err)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// autoAssemble assembles every array found on the mdadm.conf devices
// (mdadm's auto-assembly with --scan and no ARRAY lines) and returns how
// many it assembled.
func (as *assembler) autoAssemble(j assembleJob) int {
	n := 0
	for {
		r := as.assemble(j)
		if r == ExitUsage {
			return n
		}
		if r == ExitOK {
			n++
		}
	}
}

// assemble is mdadm's Assemble() for one array: 0 started (or left
// unstarted with --no-degraded), 1 failed, 2 no devices.
func (as *assembler) assemble(j assembleJob) ExitCode {
	list := j.devs
	if !j.inargv {
		list = as.conf.DeviceList()
	}
	if !j.inargv && !j.auto && !j.ident.any() {
		as.errf("No identity information available for %s - cannot assemble.\n", j.mddev)
		return ExitFailure
	}
	devs, rc := as.selectDevices(j, list)
	if rc != ExitOK {
		if j.auto && rc == ExitFailure {
			return ExitUsage
		}
		return rc
	}
	ref := devs[0]
	for _, d := range devs {
		as.used[d.path] = true
	}
	mddev := j.mddev
	if mddev == "" {
		mddev = as.autoName(ref.sb)
	}
	devs, mddev, waiting := as.mergeIncremental(j, mddev, devs)
	// An array with this UUID already served by a daemon?
	if dev := as.activeWithUUID(ref.sb.SetUUID); dev != "" && as.o.update != "uuid" {
		as.errf("Found some drive for an array that is already active: %s\n", dev)
		as.errf("giving up.\n")
		return ExitFailure
	}
	name, err := daemon.ArrayName(mddev)
	if err != nil {
		as.errf("%s is not a usable md device name\n", mddev)
		return ExitFailure
	}
	lock, err := daemon.AcquireLock(daemon.PathsFor(as.o.srv.runDir, name))
	if errors.Is(err, daemon.ErrRunning) {
		as.errf("%s already active, cannot restart it!\n", mddev)
		return ExitFailure
	}
	if err != nil {
		as.errf("cannot lock %s: %v\n", mddev, err)
		return ExitFailure
	}
	started := len(as.started)
	r := as.loadAndStart(j, mddev, name, devs, lock)
	if r != ExitOK || len(as.started) == started {
		// Not started (refused, or left unstarted by --no-degraded).
		lock.Release()
	} else if waiting != "" {
		dropMapEntry(as.o.srv.runDir, waiting)
	}
	return r
}

// autoName picks the md device for an auto-assembled array from its name
// (create_mddev): the part after "host:" for a local array or a free name.
func (as *assembler) autoName(sb *superblock.Superblock) string {
	n := sb.Name()
	if _, rest, ok := strings.Cut(n, ":"); ok {
		n = rest
	}
	if n == "" {
		n = "md_" + uuidText(sb.SetUUID, '_')[:8]
	}
	// The name is data: as in -Es's ARRAY lines, no '/', space, quote or
	// control byte reaches the device (and run-directory) name.
	n = printEscape(n)
	if matchHome(sb, as.homehost) != 1 && !strings.HasPrefix(sb.Name(), "any:") {
		if daemon.Held(daemon.PathsFor(as.o.srv.runDir, n)) {
			n += "_0"
		}
	}
	return "/dev/md/" + n
}

// activeWithUUID returns the md device of a running daemon serving the
// array with this UUID, or "".
func (as *assembler) activeWithUUID(uuid [16]byte) string {
	for _, s := range as.started {
		if s.uuid == uuid {
			return s.dev
		}
	}
	names, _ := daemon.Names(as.o.srv.runDir)
	for _, n := range names {
		st, err := queryStatus(as.o.srv.runDir, n)
		if err != nil || st == nil {
			continue
		}
		if sb, _ := superblock.Parse(padSuper(st.Superblock)); sb != nil && sb.SetUUID == uuid {
			return st.Device
		}
	}
	return ""
}

// padSuper extends a status superblock to the size superblock.Parse reads.
func padSuper(b []byte) []byte {
	if len(b) >= superblock.AreaSize {
		return b
	}
	out := make([]byte, superblock.AreaSize)
	copy(out, b)
	return out
}

// asmArray is one array between the phases of loadAndStart: its
// members, mdadm's best[] table and what the start decision counts.
type asmArray struct {
	j     assembleJob
	mddev string
	devs  []*asmDev
	rd    int // raid_disks of the first member
	// best maps a slot (2*role, +1 for a replacement; spares from 2*rd
	// on) to the index in devs of the freshest member for it; bestcnt
	// is one past the highest slot.
	best       map[int]int
	bestcnt    int
	mostRecent int
	mr         *asmDev // devs[mostRecent], the reference
	level      int
	layout     uint32
	clean      bool
	avail      []bool // roles with an up-to-date member
	okcnt      int
	sparecnt   int
	rebuilding int
	replcnt    int
	chosen     int                    // chosen_drive: index in devs
	csb        *superblock.Superblock // its superblock
	// journalcnt counts the journal devices of an array with a write
	// journal (journal_device_required); journalClean: one of them is
	// fresh. readonly: started read-only for want of it (--force).
	journalcnt   int
	journalClean bool
	readonly     bool
}

// journalRequired is getinfo_super1's journal_device_required.
func (st *asmArray) journalRequired() bool {
	return st.mr.sb.FeatureMap&superblock.FeatureJournal != 0
}

// get is best[i], or -1 when the slot is empty.
func (st *asmArray) get(i int) int {
	if b, ok := st.best[i]; ok {
		return b
	}
	return -1
}

// loadAndStart is the rest of Assemble(): load_devices, the freshness
// rules, --force, the start decision, and starting the engine and the
// daemon.
func (as *assembler) loadAndStart(j assembleJob, mddev, name string, devs []*asmDev, lock *daemon.Lock) ExitCode {
	if devs = as.refuseInvalid(mddev, devs); len(devs) == 0 {
		as.errf("%s assembled from 0 drives - not enough to start the array.\n", mddev)
		return ExitFailure
	}
	if as.o.update != "" && !as.updateSupers(j, mddev, devs) {
		return ExitFailure
	}
	if !as.runnableFeatures(mddev, devs[0].sb) {
		return ExitFailure
	}
	st := &asmArray{j: j, mddev: mddev, devs: devs, rd: int(devs[0].sb.RaidDisks)}
	as.loadSlots(st)
	as.countFresh(st)
	if as.o.force {
		st.okcnt += as.forceArray(st)
	}
	if !as.chooseDrive(st) {
		return ExitFailure
	}
	change := as.checkRoles(st)
	change = as.forceClean(st) || change
	if change && !as.rewriteChosen(st) {
		return ExitFailure
	}
	as.reportNonFresh(st)
	if rc, run := as.decideStart(st); !run {
		return rc
	}
	return as.start(j, mddev, name, devs, st.engineOrder(as.o.created), lock, st.clean, st.readonly)
}

// runnableFeatures refuses the features the engine cannot run. A
// reshape is served (engine/reshape.go) on raid4/5/6 without a bitmap.
func (as *assembler) runnableFeatures(mddev string, sb *superblock.Superblock) bool {
	unsupported := uint32(superblock.FeaturePPL | superblock.FeatureMultiplePPLs | superblock.FeatureClustered)
	if sb.FeatureMap&superblock.FeatureJournal != 0 && sb.FeatureMap&superblock.FeatureReshapeActive != 0 {
		unsupported |= superblock.FeatureReshapeActive // no reshape with a journal
	}
	if !servableReshape(sb) {
		unsupported |= superblock.FeatureReshapeActive
	}
	if f := sb.FeatureMap; f&unsupported != 0 {
		as.errf("%s uses features mdtool cannot run (reshape, journal, PPL or cluster: feature map 0x%x) - not assembled\n", mddev, f)
		return false
	}
	return true
}

// loadSlots is load_devices: it puts every member in its slot of best[]
// (the freshest one wins a slot), finds most_recent, the freshest active
// member, and takes level, layout and clean from it.
func (as *assembler) loadSlots(st *asmArray) {
	devs, rd := st.devs, st.rd
	st.mostRecent = -1
	st.best = map[int]int{}
	nextSpare := 0
	for k, d := range devs {
		if as.verbose > 0 {
			repl := ""
			if d.state&mdDiskReplacement != 0 {
				repl = " replacement"
			}
			as.errf("%s is identified as a member of %s, slot %d%s.\n", d.path, st.mddev, d.raidDisk, repl)
		}
		if d.state&^(mdDiskFailFast|mdDiskWriteMostly) == mdDiskActive|mdDiskSync {
			if st.mostRecent < 0 || d.events > devs[st.mostRecent].events {
				st.mostRecent = k
			}
		}
		raidDisk := d.raidDisk
		if d.sb.Level == superblock.LevelMultipath {
			raidDisk = k // "with multipath, the raid_disk from the superblock is meaningless"
		}
		var i int
		if raidDisk < 0 || raidDisk == int(superblock.RoleJournal) {
			if nextSpare < rd*2 {
				nextSpare = rd * 2
			}
			i = nextSpare
			nextSpare++
		} else {
			i = raidDisk * 2
			if d.state&mdDiskReplacement != 0 {
				i++
			}
			if i >= rd*2 && i >= nextSpare {
				nextSpare = i + 1
			}
		}
		if i >= 10000 {
			continue
		}
		if i >= st.bestcnt {
			st.bestcnt = i + 1
		}
		if b, ok := st.best[i]; !ok || devs[b].events < d.events {
			st.best[i] = k
		} else if devs[b].events == d.events {
			as.leftOutDuplicate(d, devs[b], i/2)
		}
	}
	if st.mostRecent < 0 {
		// No active member at all: mdadm keeps most_recent = 0.
		st.mostRecent = 0
	}
	st.mr = devs[st.mostRecent]
	st.level = int(st.mr.sb.Level)
	st.layout = st.mr.sb.Layout
	st.clean = st.mr.clean
	st.avail = make([]bool, rd)
}

// countFresh marks the members at most one event behind the reference
// up to date and counts them (okcnt, rebuilding, spares, replacements);
// a member that records the reference as failed leaves best[] (unless
// --force).
func (as *assembler) countFresh(st *asmArray) {
	mr, rd := st.mr, st.rd
	for i := 0; i < st.bestcnt; i++ {
		k := st.get(i)
		if k < 0 {
			continue
		}
		d := st.devs[k]
		switch {
		case st.level == superblock.LevelMultipath:
			// "we ignore error flags in multipath arrays as they don't
			// make sense"
		case d.state&mdDiskJournal != 0:
			if !st.journalRequired() {
				continue // an unexpected journal: faulty
			}
			st.journalcnt++
		case d.state&mdDiskActive == 0:
			if d.state&mdDiskFaulty == 0 {
				d.uptodate = true
				st.sparecnt++
			}
			continue
		}
		if k != st.mostRecent && !as.o.force && rd > 0 && mr.raidDisk >= 0 && mr.raidDisk < len(d.devmap) && !d.devmap[mr.raidDisk] {
			if as.verbose > -1 {
				as.errf("ignoring %s as it reports %s as failed\n", d.path, mr.path)
			}
			delete(st.best, i)
			continue
		}
		// A journal one event ahead of members that never ran: an array
		// create wrote and did not start (init_super1's event 1 stays on
		// the journal, the members get 0; mdadm starts what it creates
		// without these rules, and so does the kernel).
		newJournal := d.state&mdDiskJournal != 0 && mr.events == 0 && d.events == 1
		if d.events+1 >= mr.events && (d.events <= mr.events || newJournal) {
			d.uptodate = true
			if d.state&mdDiskJournal != 0 {
				st.journalClean = true
			}
			if i >= rd*2 {
				if d.raidDisk != int(superblock.RoleJournal) {
					st.sparecnt++
				}
				continue
			}
			switch {
			case d.recovery != superblock.MaxSector && !reshapeRecovered(mr.sb, i):
				st.rebuilding++
			case !st.avail[i/2]:
				st.okcnt++
				st.avail[i/2] = true
			default:
				st.replcnt++
			}
		}
	}
}

// chooseDrive finds chosen_drive: the superblock the kernel (and the
// engine) bases the array on.
func (as *assembler) chooseDrive(st *asmArray) bool {
	st.chosen = -1
	for i := 0; st.chosen < 0 && i < st.bestcnt; i += 2 {
		k := st.get(i)
		if k < 0 || !st.devs[k].uptodate || st.devs[k].events < st.mr.events {
			continue
		}
		st.chosen = k
	}
	if st.chosen < 0 {
		as.errf("No suitable drives found for %s\n", st.mddev)
		return false
	}
	st.csb = st.devs[st.chosen].sb
	return true
}

// checkRoles compares each up-to-date member's role with the chosen
// superblock's record of it: with --force the record is corrected
// (change), without it mdadm's warning is given. A member that is not
// clean makes the array not clean.
func (as *assembler) checkRoles(st *asmArray) (change bool) {
	for i := 0; i < st.bestcnt; i++ {
		k := st.get(i)
		if k < 0 || !st.devs[k].uptodate {
			continue
		}
		d := st.devs[k]
		want := uint16(superblock.RoleSpare)
		switch {
		case d.raidDisk == int(superblock.RoleJournal):
			want = superblock.RoleJournal
		case i < st.rd*2 && d.state&mdDiskActive != 0:
			want = uint16(d.raidDisk)
		}
		if !d.clean {
			st.clean = false
		}
		num := int(d.sb.DevNumber)
		if num < len(st.csb.DevRoles) && st.csb.DevRoles[num] != want {
			if as.o.force {
				if as.verbose >= 0 {
					as.errf("clearing FAULTY flag for device %d in %s for %s\n", k, st.mddev, d.path)
				}
				st.csb.DevRoles[num] = want
				change = true
			} else if as.verbose >= -1 {
				as.errf("device %d in %s has wrong state in superblock, but %s seems ok\n", i, st.mddev, d.path)
			}
		}
	}
	return change
}

// forceClean is --force on an array that is not clean and could not
// start dirty: it is marked clean (a parity array's resync offset is
// cleared in the chosen superblock; change when that differs).
func (as *assembler) forceClean(st *asmArray) (change bool) {
	if !as.o.force || st.clean || plan.Enough(st.level, st.rd, st.layout, false, st.avail) {
		return false
	}
	switch st.level {
	case 4, 5, 6:
		if st.csb.ResyncOffset != superblock.MaxSector {
			change = true
		}
		st.csb.ResyncOffset = superblock.MaxSector
	}
	st.clean = true
	return change
}

// rewriteChosen writes the chosen superblock back after --force changed it.
func (as *assembler) rewriteChosen(st *asmArray) bool {
	if err := writeSuper(st.devs[st.chosen], st.csb); err != nil {
		as.errf("Could not re-write superblock on %s\n", st.devs[st.chosen].path)
		return false
	}
	if as.verbose >= 0 {
		as.errf("Marking array %s as 'clean'\n", st.mddev)
	}
	return true
}

// reportNonFresh says, with --verbose, which members are left out for
// being older than the reference (the kernel kicks them: "kicking
// non-fresh ... from array" in its log; mdadm 4.2 says nothing).
func (as *assembler) reportNonFresh(st *asmArray) {
	inBest := map[int]bool{}
	for _, k := range st.best {
		inBest[k] = true
	}
	mr := st.mr
	for k, d := range st.devs {
		if d.state&mdDiskActive == 0 || d.uptodate {
			continue
		}
		if !inBest[k] && d.events >= mr.events {
			continue // left out for reporting the reference as failed
		}
		if as.verbose <= 0 {
			continue
		}
		if d.events > mr.events {
			as.errf("%s is not used: its event count %d is ahead of the array's %d\n", d.path, d.events, mr.events)
			continue
		}
		as.errf("%s is not fresh (events %d, the array is at %d) - not added to %s\n", d.path, d.events, mr.events, st.mddev)
	}
}

// decideStart is start_array's decision: run when the array starts,
// otherwise rc is the assembly's result (0 for one --no-degraded leaves
// unstarted).
func (as *assembler) decideStart(st *asmArray) (rc ExitCode, run bool) {
	if st.journalRequired() && !st.journalClean {
		switch {
		case as.o.incrStart:
			st.readonly = true
		case !as.o.force:
			as.errf("Not safe to assemble with missing or stale journal device, consider --force.\n")
			return ExitFailure, false
		default:
			as.errf("Journal is missing or stale, starting array read only.\n")
			st.readonly = true
		}
	}
	runstop := 0
	if as.o.run {
		runstop = 1
	} else if as.o.noDegraded {
		runstop = -1
	}
	startPartialOK := runstop >= 0 && (as.o.force || !st.j.inargv || st.j.auto)
	reqCnt := workingDisks(st.csb)
	if !(runstop == 1 || (runstop <= 0 && plan.Enough(st.level, st.rd, st.layout, st.clean, st.avail) &&
		(st.okcnt+st.rebuilding >= reqCnt || startPartialOK))) {
		if runstop == -1 {
			as.errf("%s", st.assembledFrom(false)+", but not started.\n")
			return ExitOK, false
		}
		if as.verbose >= -1 {
			as.errf("%s", st.assembledFrom(true)+st.whyNotStarted(reqCnt))
		}
		return ExitFailure, false
	}
	if !plan.Enough(st.level, st.rd, st.layout, true, st.avail) || !plan.Enough(st.level, st.rd, st.layout, st.clean, st.avail) {
		// RUN_ARRAY would fail in the kernel.
		as.errf("failed to RUN_ARRAY %s: Input/output error\n", st.mddev)
		if !plan.Enough(st.level, st.rd, st.layout, true, st.avail) {
			as.errf("Not enough devices to start the array.\n")
		} else {
			as.errf("Not enough devices to start the array while not clean - consider --force.\n")
		}
		return ExitFailure, false
	}
	return ExitOK, true
}

// assembledFrom is "MD assembled from N drives", followed by the rebuilding
// and spare counts (counts) or by the raid disks when some are missing
// (the --no-degraded line).
func (st *asmArray) assembledFrom(counts bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s assembled from %d drive%s", st.mddev, st.okcnt, plural(st.okcnt))
	if !counts {
		if st.okcnt != st.rd {
			fmt.Fprintf(&b, " (out of %d)", st.rd)
		}
		return b.String()
	}
	if st.rebuilding > 0 {
		sep := " and"
		if st.sparecnt > 0 {
			sep = ","
		}
		fmt.Fprintf(&b, "%s %d rebuilding", sep, st.rebuilding)
	}
	if st.sparecnt > 0 {
		fmt.Fprintf(&b, " and %d spare%s", st.sparecnt, plural(st.sparecnt))
	}
	return b.String()
}

// whyNotStarted ends the "assembled from" line of an array that does
// not start.
func (st *asmArray) whyNotStarted(reqCnt int) string {
	switch {
	case !plan.Enough(st.level, st.rd, st.layout, true, st.avail):
		return " - not enough to start the array.\n"
	case !plan.Enough(st.level, st.rd, st.layout, st.clean, st.avail):
		return " - not enough to start the array while not clean - consider --force.\n"
	case reqCnt == st.rd:
		return fmt.Sprintf(" - need all %d to start it (use --run to insist).\n", reqCnt)
	default:
		return fmt.Sprintf(" - need %d to start (use --run to insist).\n", reqCnt)
	}
}

// engineOrder lists the members for the engine: the chosen drive first
// (the kernel takes the first superblock among the freshest as its
// reference), then the others in slot order; devices that are not up to
// date are left out, as the kernel kicks them.
//
// A multipath array's members go in the order mdadm adds them to md
// (engine.assembleMultipath numbers the paths by md's list, that order
// reversed): the others in slot order and the chosen drive last, or, for
// the array create just wrote (created), in the order create gave them.
func (st *asmArray) engineOrder(created bool) []int {
	if st.level == superblock.LevelMultipath {
		var order []int
		for i := 0; i < st.bestcnt; i++ {
			if k := st.get(i); k >= 0 && st.devs[k].uptodate && (created || k != st.chosen) {
				order = append(order, k)
			}
		}
		if !created {
			order = append(order, st.chosen)
		}
		return order
	}
	order := []int{st.chosen}
	for i := 0; i < st.bestcnt; i++ {
		k := st.get(i)
		if k < 0 || k == st.chosen || !st.devs[k].uptodate {
			continue
		}
		order = append(order, k)
	}
	return order
}

// writeSuper rewrites a member's superblock (with --force only).
func writeSuper(d *asmDev, sb *superblock.Superblock) error {
	m, err := member.Open(d.path, member.Exclusive)
	if err != nil {
		return err
	}
	defer m.Close()
	return m.WriteAll([]member.Write{{Offset: d.sbOff, Data: sb.MarshalWithChecksum()}})
}

// forceArray is mdadm's force_array: while the array is not usable, bring
// the freshest non-fresh active member up to date (rewriting its event
// count), with the members of the same vintage. It returns how many
// members it brought up to date.
func (as *assembler) forceArray(st *asmArray) int {
	okcnt := 0
	devs, best, bestcnt, rd, mr, avail := st.devs, st.best, st.bestcnt, st.rd, st.mr, st.avail
	for !plan.Enough(st.level, rd, st.layout, true, avail) {
		chosen := -1
		for i := 0; i < rd*2 && i < bestcnt; i += 2 {
			k, ok := best[i]
			if !ok || devs[k].uptodate || devs[k].recovery != superblock.MaxSector {
				continue
			}
			if chosen < 0 || devs[k].events > devs[chosen].events {
				chosen = k
			}
		}
		if chosen < 0 {
			break
		}
		current := devs[chosen].events
		for chosen >= 0 {
			d := devs[chosen]
			if as.verbose >= 0 {
				as.errf("forcing event count in %s(%d) from %d up to %d\n", d.path, d.raidDisk, int(d.events), int(mr.events))
			}
			d.sb.Events = mr.events
			if err := writeSuper(d, d.sb); err != nil {
				as.errf("Could not re-write superblock on %s\n", d.path)
				d.events = 0
				break
			}
			d.events = mr.events
			d.uptodate = true
			if d.raidDisk >= 0 && d.raidDisk < rd {
				avail[d.raidDisk] = true
			}
			okcnt++
			chosen = -1
			for i := 0; i < rd*2 && i < bestcnt; i += 2 {
				k, ok := best[i]
				if ok && !devs[k].uptodate && devs[k].recovery == superblock.MaxSector && devs[k].events == current {
					chosen = k
					break
				}
			}
		}
	}
	return okcnt
}

// start hands the members to the daemon, which opens them, starts the
// engine and serves the array, and says so.
func (as *assembler) start(j assembleJob, mddev, name string, devs []*asmDev, order []int, lock *daemon.Lock, clean, readonly bool) ExitCode {
	lc := as.launchConfig(mddev, name, devs, order, lock)
	lc.ReadOnly = lc.ReadOnly || readonly
	if !as.bitmapFileFor(j, &lc) {
		return ExitFailure
	}
	svc, err := daemon.Launch(lc)
	if err != nil {
		as.launchFailed(mddev, err)
		return ExitFailure
	}
	as.reportStarted(mddev, svc.Array(), svc.LaunchedPaths())
	if as.verbose > 0 {
		as.reportServing(mddev, svc)
	}
	as.reportDoor(mddev, svc)
	as.started = append(as.started, &startedArray{name: name, dev: mddev, uuid: svc.Array().UUID(), svc: svc})
	return ExitOK
}

// launchConfig is what the daemon needs to open the members (in order),
// start the engine and serve it.
func (as *assembler) launchConfig(mddev, name string, devs []*asmDev, order []int, lock *daemon.Lock) daemon.LaunchConfig {
	lc := daemon.LaunchConfig{Name: name, Device: mddev, RunDir: as.o.srv.runDir, Lock: lock,
		SuperMinor: devs[order[0]].minor, ReadOnly: as.o.readonly, Force: as.o.force,
		SafeModeDelay: as.o.srv.safeModeDelay, SyncMinKBps: as.o.srv.syncMin, SyncMaxKBps: as.o.srv.syncMax,
		NBDSocket: as.o.srv.nbdSocket, NBDListen: as.o.srv.nbdListen, FUSEDir: as.o.srv.fuse, BlockDevice: as.o.srv.device,
		TLSCert: as.o.srv.tlsCert, TLSKey: as.o.srv.tlsKey, TLSCA: as.o.srv.tlsCA,
		Metrics: as.reg, MetricsAddr: as.metricsAddr, WrapDevice: wrapMember, RemoteTimeout: as.o.srv.remoteTimeout, RemoteReAdd: as.o.srv.remoteReAdd,
		// The device name is an argument, never part of the format, and
		// shown escaped (escName) like every name in a log line.
		Logf: func(format string, a ...any) { log.Printf("%s: "+format, append([]any{escName(mddev)}, a...)...) },
		EngineLogf: func(format string, a ...any) {
			engineLog.printf("%s: "+format, append([]any{escName(mddev)}, a...)...)
		},
		EngineName: escName(filepath.Base(mddev)), // mdname in the kernel-style lines
	}
	lc.NBDMaxConns, lc.NBDMaxBytes, lc.NBDIdleTimeout, _ = as.o.srv.nbdLimits() // checked in runAssemble
	lc.BackupFile = as.o.backupFile
	for _, k := range order {
		d := devs[k]
		m := daemon.LaunchMember{Path: d.path, Block: d.block, SBOffset: d.sbOff,
			DevNumber: int(d.sb.DevNumber), FailFast: d.sb.DevFlags&superblock.DevFlagFailFast != 0}
		if d.block {
			m.Major, m.Minor = ioctl.Major(d.rdev), ioctl.Minor(d.rdev)
		}
		lc.Members = append(lc.Members, m)
	}
	lc.Added = func(i int) {
		if as.verbose > 0 {
			d := devs[order[i]]
			as.errf("added %s to %s as %d\n", d.path, mddev, d.raidDisk)
		}
	}
	return lc
}

// launchFailed says, in mdadm's words, why daemon.Launch failed.
func (as *assembler) launchFailed(mddev string, err error) {
	var (
		oe *daemon.MemberOpenError
		we *daemon.MemberWrapError
		re *daemon.RunError
		te *daemon.TLSError
	)
	switch {
	case errors.As(err, &oe):
		as.errf("failed to add %s to %s: %s\n", oe.Path, mddev, openReason(oe.Err))
	case errors.As(err, &we):
		as.errf("%v\n", we.Err)
	case errors.As(err, &re) && errors.Is(re.Err, engine.ErrBackupNeeded):
		as.backupNeeded()
	case errors.As(err, &re):
		err = re.Err
		if errors.Is(err, engine.ErrZeroSize) {
			// md would run it, serving nothing: say why it does not start.
			err = errors.New(strings.TrimPrefix(err.Error(), "engine: "))
		}
		if errors.Is(err, bitmap.ErrUUIDMismatch) {
			// md_bitmap_read_sb's "bitmap superblock UUID mismatch"
			// goes to the kernel log; RUN_ARRAY fails with EINVAL.
			err = errors.New("Invalid argument")
		}
		as.errf("failed to RUN_ARRAY %s: %v\n", mddev, err)
	case errors.As(err, &te):
		as.errf("TLS for %s: %v\n", mddev, te.Err)
	default:
		var se *daemon.ServeError
		if errors.As(err, &se) {
			err = se.Err
		}
		as.errf("cannot serve %s: %v\n", mddev, err)
	}
}

// reportStarted says what the engine made of the members: members it
// left out, then mdadm's "has been started with" line.
func (as *assembler) reportStarted(mddev string, arr *engine.Array, paths []string) {
	inSync, rebuilding, spares, journals := 0, 0, 0, 0
	present := map[int]bool{}
	for _, mi := range arr.Members() {
		if mi.Device >= 0 {
			present[mi.Device] = true
		}
		switch mi.State {
		case engine.InSync:
			inSync++
		case engine.Recovering:
			rebuilding++
		case engine.Spare:
			spares++
		case engine.Journal:
			journals++
		}
	}
	for i, p := range paths {
		if !present[i] {
			as.errf("%s was left out by the engine (not fresh or not a member) - not part of %s\n", p, mddev)
		}
	}
	if as.verbose < 0 {
		return
	}
	rd := arr.Geometry().RaidDisks()
	var b strings.Builder
	fmt.Fprintf(&b, "%s has been started with %d drive%s", mddev, inSync, plural(inSync))
	if inSync < rd {
		fmt.Fprintf(&b, " (out of %d)", rd)
	}
	if rebuilding > 0 {
		sep := " and"
		if spares > 0 {
			sep = ","
		}
		fmt.Fprintf(&b, "%s %d rebuilding", sep, rebuilding)
	}
	if spares > 0 {
		fmt.Fprintf(&b, " and %d spare%s", spares, plural(spares))
	}
	if journals > 0 {
		fmt.Fprintf(&b, " and %d journal", journals)
	}
	b.WriteString(".\n")
	as.errf("%s", b.String())
}

// reportServing (--verbose) says where the array is served, and whether
// ublk is there.
func (as *assembler) reportServing(mddev string, svc *daemon.Service) {
	if p := svc.NBDSocket(); p != "" {
		as.errf("%s: NBD on unix socket %s\n", mddev, p)
	}
	if a := svc.NBDAddr(); a != "" {
		as.errf("%s: NBD on TCP %s\n", mddev, a)
	}
	if f := svc.FUSEFile(); f != "" {
		as.errf("%s: FUSE file %s\n", mddev, f)
	}
	present, why := daemon.UblkStatus()
	state := "absent"
	if present {
		state = "present (not used)"
	}
	as.errf("ublk: %s: %s\n", state, why)
}

// engineLog holds the engine's kernel-log-like lines (recovery started,
// member failed, ...) that a background child logs before it is ready:
// they belong in its log file, not among the command's mdadm-style
// messages on the terminal. A foreground run logs them at once.
var engineLog earlyLog

type earlyLog struct {
	mu      sync.Mutex
	lines   []string
	holding bool
	done    bool
}

// hold makes printf keep the lines until flush (a background child).
func (l *earlyLog) hold() {
	l.mu.Lock()
	l.holding = true
	l.mu.Unlock()
}

func (l *earlyLog) printf(format string, a ...any) {
	l.mu.Lock()
	if l.holding && !l.done {
		l.lines = append(l.lines, fmt.Sprintf(format, a...))
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	log.Printf(format, a...)
}

// flush logs the held lines (after the output moved to the log file).
func (l *earlyLog) flush() {
	l.mu.Lock()
	lines := l.lines
	l.lines, l.done = nil, true
	l.mu.Unlock()
	for _, s := range lines {
		log.Print(s)
	}
}
