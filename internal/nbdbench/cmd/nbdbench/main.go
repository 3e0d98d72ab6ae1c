// Command nbdbench is the issue-4 NBD benchmark: fio (ioengine=nbd) 4 KiB
// random read and write at iodepth 32 and 1 MiB sequential write and read
// through NBD on a unix socket, against a real `mdtool assemble` daemon
// serving an array whose member image files are on tmpfs, and, in the same
// run, against `nbdkit memory` (the transport baseline). It prints one
// table line per job with both sides' IOPS and MB/s, their ratio (the same
// for IOPS and bandwidth: both sides run the same block size) and PASS or
// FAIL against the target ratio.
//
//	go run ./internal/nbdbench/cmd/nbdbench -mdtool ./mdtool
//
// With -inprocess the array is opened and served in this process, with
// the same engine, Backend and NBD server code as the daemon, so that
// -cpuprofile can profile the serving path.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"mdtool/engine"
	"mdtool/internal/daemon"
	fiobench "mdtool/internal/nbdbench"
	"mdtool/internal/serve/nbd"
)

type options struct {
	mdtool     string
	dir        string
	level      string
	members    int
	memberSize int64
	chunk      string
	runtime    time.Duration
	rounds     int
	target     float64
	inprocess  bool
	cpuprofile string
	jobs       string
	inlineMax  int
}

func main() {
	var o options
	flag.StringVar(&o.mdtool, "mdtool", "./mdtool", "the mdtool binary that creates and serves the array")
	flag.StringVar(&o.dir, "dir", "/dev/shm", "tmpfs directory for the member image files")
	flag.StringVar(&o.level, "level", "0", "RAID level of the array")
	flag.IntVar(&o.members, "members", 2, "number of members")
	var size string
	flag.StringVar(&size, "member-size", "256M", "size of each member image (K, M, G suffixes)")
	flag.StringVar(&o.chunk, "chunk", "512K", "chunk size (mdtool create --chunk)")
	flag.DurationVar(&o.runtime, "runtime", 3*time.Second, "fio runtime per job and round")
	flag.IntVar(&o.rounds, "rounds", 3, "alternating rounds; each side's median round is reported")
	flag.Float64Var(&o.target, "target", 0.8, "ratio to reach (ours / nbdkit memory)")
	flag.BoolVar(&o.inprocess, "inprocess", false, "serve the array in this process instead of an mdtool daemon")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the in-process server here (with -inprocess)")
	flag.StringVar(&o.jobs, "jobs", "", "comma-separated subset of the jobs to run (default: all)")
	flag.IntVar(&o.inlineMax, "inline-max", 0, "nbd.Config.InlineMax of the in-process server (0: default, -1: workers only)")
	flag.Parse()
	var err error
	if o.memberSize, err = parseSize(size); err != nil {
		fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "nbdbench:", err)
	os.Exit(1)
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

func uptime() string {
	b, err := exec.Command("uptime").Output()
	if err != nil {
		return "uptime: " + err.Error()
	}
	return strings.TrimSpace(string(b))
}

func run(ctx context.Context, o options, w io.Writer) error {
	for _, bin := range []string{"fio", "nbdkit"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s is not installed", bin)
		}
	}
	mdtool, err := filepath.Abs(o.mdtool)
	if err != nil {
		return err
	}
	if _, err := os.Stat(o.dir); err != nil {
		fmt.Fprintf(w, "%s: %v; using %s\n", o.dir, err, os.TempDir())
		o.dir = os.TempDir()
	}
	dir, err := os.MkdirTemp(o.dir, "nbdbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var fs unixStatfs
	if isTmpfs(dir, &fs) {
		fmt.Fprintf(w, "members: %d x %d MiB image files on tmpfs (%s)\n", o.members, o.memberSize>>20, o.dir)
	} else {
		fmt.Fprintf(w, "members: %d x %d MiB image files in %s (NOT tmpfs)\n", o.members, o.memberSize>>20, o.dir)
	}
	var paths []string
	for i := 0; i < o.members; i++ {
		p := filepath.Join(dir, fmt.Sprintf("m%d.img", i))
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			return err
		}
		if err := os.Truncate(p, o.memberSize); err != nil {
			return err
		}
		paths = append(paths, p)
	}
	md := "/dev/md/nbdbench"
	args := append([]string{"create", md, "--run", "--start=false", "--assume-clean", "--homehost=nbdbench",
		"-l" + o.level, "-n" + strconv.Itoa(o.members), "--chunk=" + o.chunk}, paths...)
	if out, err := exec.CommandContext(ctx, mdtool, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("mdtool create: %v\n%s", err, out)
	}

	var target fiobench.Target
	var size int64
	if o.inprocess {
		srv, arr, err := serveInProcess(paths, filepath.Join(dir, "nbd.sock"), o.inlineMax)
		if err != nil {
			return err
		}
		defer arr.Close()
		defer srv.Close()
		target = fiobench.Target{URI: "nbd+unix:///?socket=" + filepath.Join(dir, "nbd.sock"), PID: os.Getpid()}
		size = arr.Size()
		fmt.Fprintf(w, "server: in-process engine + NBD server (same code as the daemon), InlineMax %d\n", o.inlineMax)
	} else {
		d, err := startDaemon(ctx, mdtool, md, filepath.Join(dir, "run"), paths)
		if err != nil {
			return err
		}
		defer d.stop()
		target = fiobench.Target{URI: "nbd+unix:///?socket=" + d.sock, PID: d.cmd.Process.Pid}
		size = d.size
		fmt.Fprintf(w, "server: mdtool assemble --foreground daemon, pid %d, %s\n", target.PID, d.sock)
	}
	fmt.Fprintf(w, "array: raid%s, %d members, chunk %s, %d MiB; fio runtime %v, median of %d rounds\n",
		o.level, o.members, o.chunk, size>>20, o.runtime, o.rounds)
	jobs := fiobench.DefaultJobs(size, o.runtime)
	if o.jobs != "" {
		var sel []fiobench.Job
		for _, j := range jobs {
			for _, n := range strings.Split(o.jobs, ",") {
				if n == j.Name {
					sel = append(sel, j)
				}
			}
		}
		if len(sel) == 0 {
			return fmt.Errorf("no job named in %q", o.jobs)
		}
		jobs = sel
	}
	for _, j := range jobs {
		fmt.Fprintf(w, "job %s: %s\n", j.Name, strings.Join(fiobench.Args("URI", j), " "))
	}
	if b, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		fmt.Fprintf(w, "commit: %s\n", strings.TrimSpace(string(b)))
	}
	fmt.Fprintf(w, "before: %s\n", uptime())
	if o.cpuprofile != "" {
		if !o.inprocess {
			return errors.New("-cpuprofile needs -inprocess")
		}
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	res, err := fiobench.CompareTarget(ctx, target, size, jobs, o.rounds)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "after:  %s\n", uptime())
	return fiobench.WriteTable(w, res, o.target)
}

// serveInProcess opens the members as the daemon does and serves the array
// with package nbd's defaults on sock.
func serveInProcess(paths []string, sock string, inlineMax int) (*nbd.Server, *engine.Array, error) {
	var devs []engine.Device
	for _, p := range paths {
		d, err := engine.OpenFile(p, engine.FileOptions{Exclusive: true})
		if err != nil {
			return nil, nil, err
		}
		devs = append(devs, d)
	}
	arr, err := engine.Open(devs, engine.DefaultOptions())
	if err != nil {
		return nil, nil, err
	}
	srv, err := nbd.NewServer(nbd.Config{Exports: []nbd.Export{{Backend: daemon.NewBackend(arr, nil)}}, InlineMax: inlineMax})
	if err != nil {
		arr.Close()
		return nil, nil, err
	}
	if _, err := srv.ListenUnix(sock); err != nil {
		arr.Close()
		return nil, nil, err
	}
	return srv, arr, nil
}

type mdDaemon struct {
	cmd    *exec.Cmd
	mdtool string
	md     string
	runDir string
	sock   string
	size   int64
	stderr *strings.Builder
	done   chan error
}

// startDaemon runs `mdtool assemble --foreground` and waits until its NBD
// socket answers.
func startDaemon(ctx context.Context, mdtool, md, runDir string, paths []string) (*mdDaemon, error) {
	d := &mdDaemon{mdtool: mdtool, md: md, runDir: runDir, stderr: &strings.Builder{}, done: make(chan error, 1)}
	d.cmd = exec.Command(mdtool, append([]string{"assemble", "--foreground", "--run-dir", runDir, md}, paths...)...)
	d.cmd.Stderr = d.stderr
	d.cmd.Stdout = d.stderr
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { d.done <- d.cmd.Wait() }()
	name, err := daemon.ArrayName(md)
	if err != nil {
		d.stop()
		return nil, err
	}
	d.sock = daemon.PathsFor(runDir, name).NBD()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if st, err := os.Stat(d.sock); err == nil && st.Mode()&os.ModeSocket != 0 {
			break
		}
		select {
		case err := <-d.done:
			return nil, fmt.Errorf("mdtool assemble exited: %v\n%s", err, d.stderr.String())
		case <-ctx.Done():
			d.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("no NBD socket after 30 s\n%s", d.stderr.String())
		}
	}
	// The size the NBD server reports.
	out, err := exec.CommandContext(ctx, "nbdinfo", "--size", "nbd+unix:///?socket="+d.sock).Output()
	if err != nil {
		d.stop()
		return nil, fmt.Errorf("nbdinfo --size: %v", err)
	}
	d.size, _ = strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if d.size == 0 {
		d.stop()
		return nil, fmt.Errorf("cannot find the array size:\n%s", out)
	}
	return d, nil
}

// stop asks the daemon to stop as a user would, and kills it if it does
// not.
func (d *mdDaemon) stop() {
	exec.Command(d.mdtool, "stop", "--run-dir", d.runDir, d.md).Run()
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
	}
}

type unixStatfs = unix.Statfs_t

// isTmpfs says whether dir is on tmpfs.
func isTmpfs(dir string, st *unixStatfs) bool {
	return unix.Statfs(dir, st) == nil && st.Type == unix.TMPFS_MAGIC
}
