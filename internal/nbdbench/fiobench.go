// Package nbdbench drives fio (ioengine=nbd, through libnbd) against an NBD
// server: the NBD tests use it for verify runs, and Compare measures an
// export.Backend served by package nbd against `nbdkit memory`, the
// transport baseline, in the same run.
package nbdbench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"mdtool/internal/serve/export"
	"mdtool/internal/serve/nbd"
)

// Job is one fio job section run with ioengine=nbd and group reporting.
type Job struct {
	Name    string
	RW      string // fio rw=: read, write, randread, randwrite, randrw
	BS      string // block size, e.g. "4k", "1m"
	IODepth int
	NumJobs int           // fio processes, each with its own NBD connection (default 1)
	Size    int64         // bytes per job; job i covers [i*Size, (i+1)*Size)
	Runtime time.Duration // time_based run length; 0 runs Size once
	Extra   []string      // more fio options, "--key=value"
}

// Result is what fio reported for a job, summed over its processes.
type Result struct {
	ReadIOPS, WriteIOPS   float64
	ReadMBps, WriteMBps   float64 // 10^6 bytes per second
	ReadBytes, WriteBytes int64
	IOs                   int64 // completed requests, read + write

	// ServerCPU is the CPU time (user + system) the NBD server process
	// spent during the run, when Compare measured it: unlike throughput it
	// hardly depends on what else runs on the machine.
	ServerCPU time.Duration
	Errors    int // sum of the jobs' error fields
	// MaxLatency is the longest completion latency of any request (clat).
	MaxLatency time.Duration
}

// IOPS is read + write IOPS.
func (r Result) IOPS() float64 { return r.ReadIOPS + r.WriteIOPS }

// CPUPerIO is ServerCPU per completed request.
func (r Result) CPUPerIO() time.Duration {
	if r.IOs == 0 {
		return 0
	}
	return r.ServerCPU / time.Duration(r.IOs)
}

// MBps is read + write MB/s.
func (r Result) MBps() float64 { return r.ReadMBps + r.WriteMBps }

// Args returns fio's command line for job j against uri.
func Args(uri string, j Job) []string {
	n := max(j.NumJobs, 1)
	a := []string{
		"--output-format=json", "--group_reporting",
		"--name=" + j.Name, "--ioengine=nbd", "--uri=" + uri,
		"--rw=" + j.RW, "--bs=" + j.BS,
		"--iodepth=" + strconv.Itoa(max(j.IODepth, 1)),
		"--numjobs=" + strconv.Itoa(n),
		"--size=" + strconv.FormatInt(j.Size, 10),
		"--offset_increment=" + strconv.FormatInt(j.Size, 10),
	}
	if j.Runtime > 0 {
		a = append(a, "--time_based", "--runtime="+strconv.FormatFloat(j.Runtime.Seconds(), 'f', 3, 64)+"s")
	}
	return append(a, j.Extra...)
}

// Run runs fio for job j against uri. It returns fio's result and its
// combined output; err is set when fio fails (non-zero exit status, e.g.
// on a verify error) or its output cannot be parsed.
func Run(ctx context.Context, uri string, j Job) (Result, string, error) {
	// fio leaves files (verify state) in its working directory.
	dir, err := os.MkdirTemp("", "fio")
	if err != nil {
		return Result{}, "", err
	}
	defer os.RemoveAll(dir)
	cmd := exec.CommandContext(ctx, "fio", Args(uri, j)...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	out := stdout.String() + stderr.String()
	res, perr := parse(stdout.Bytes())
	if runErr != nil {
		return res, out, fmt.Errorf("fio %s: %w", j.Name, runErr)
	}
	if perr != nil {
		return res, out, fmt.Errorf("fio %s: %w", j.Name, perr)
	}
	if res.Errors != 0 {
		return res, out, fmt.Errorf("fio %s: %d job errors", j.Name, res.Errors)
	}
	return res, out, nil
}

type fioJSON struct {
	Jobs []struct {
		Error int    `json:"error"`
		Read  fioDir `json:"read"`
		Write fioDir `json:"write"`
	} `json:"jobs"`
}

type fioDir struct {
	IOBytes  int64   `json:"io_bytes"`
	TotalIOs int64   `json:"total_ios"`
	IOPS     float64 `json:"iops"`
	BWBytes  float64 `json:"bw_bytes"`
	Clat     struct {
		Max float64 `json:"max"`
	} `json:"clat_ns"`
}

// parse reads fio's JSON output, which may be preceded by plain text lines
// (e.g. the nbd engine's "connected" message or verify complaints).
func parse(b []byte) (Result, error) {
	i := bytes.IndexByte(b, '{')
	if i < 0 {
		return Result{}, errors.New("no JSON in fio output")
	}
	var v fioJSON
	if err := json.Unmarshal(b[i:], &v); err != nil {
		return Result{}, err
	}
	if len(v.Jobs) == 0 {
		return Result{}, errors.New("fio reported no jobs")
	}
	var r Result
	for _, j := range v.Jobs {
		r.Errors += j.Error
		r.ReadIOPS += j.Read.IOPS
		r.WriteIOPS += j.Write.IOPS
		r.ReadMBps += j.Read.BWBytes / 1e6
		r.WriteMBps += j.Write.BWBytes / 1e6
		r.ReadBytes += j.Read.IOBytes
		r.WriteBytes += j.Write.IOBytes
		r.IOs += j.Read.TotalIOs + j.Write.TotalIOs
		r.MaxLatency = max(r.MaxLatency, time.Duration(j.Read.Clat.Max), time.Duration(j.Write.Clat.Max))
	}
	return r, nil
}

// Comparison is one job's result through package nbd and through nbdkit.
type Comparison struct {
	Job    Job
	Ours   Result
	Nbdkit Result
}

// Ratio is Ours over Nbdkit in IOPS.
func (c Comparison) Ratio() float64 {
	if c.Nbdkit.IOPS() == 0 {
		return 0
	}
	return c.Ours.IOPS() / c.Nbdkit.IOPS()
}

// DefaultJobs are the transport benchmarks: 4 KiB random read and write at
// iodepth 32, 1 MiB sequential write and read at iodepth 8, each over size
// bytes for runtime. Writes come first so that reads find data.
func DefaultJobs(size int64, runtime time.Duration) []Job {
	return []Job{
		{Name: "seqwrite-1m", RW: "write", BS: "1m", IODepth: 8, Size: size, Runtime: runtime},
		{Name: "randwrite-4k", RW: "randwrite", BS: "4k", IODepth: 32, Size: size, Runtime: runtime},
		{Name: "randread-4k", RW: "randread", BS: "4k", IODepth: 32, Size: size, Runtime: runtime},
		{Name: "seqread-1m", RW: "read", BS: "1m", IODepth: 8, Size: size, Runtime: runtime},
	}
}

// Compare serves be with package nbd (configured by cfg; its Exports are
// replaced) on a unix socket in this process and compares it with
// `nbdkit memory` as CompareTarget does.
func Compare(ctx context.Context, be export.Backend, cfg nbd.Config, jobs []Job, rounds int) ([]Comparison, error) {
	dir, err := os.MkdirTemp("", "fiobench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfg.Exports = []nbd.Export{{Backend: be}}
	srv, err := nbd.NewServer(cfg)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	ours := filepath.Join(dir, "ours.sock")
	if _, err := srv.ListenUnix(ours); err != nil {
		return nil, err
	}
	return CompareTarget(ctx, Target{URI: "nbd+unix:///?socket=" + ours, PID: os.Getpid()}, be.Size(), jobs, rounds)
}

// Target is an NBD server under test: its URI and the process that serves
// it (0 if unknown: no CPU accounting).
type Target struct {
	URI string
	PID int
}

// CompareTarget starts `nbdkit memory` of size bytes on a unix socket and
// runs every job against ours and against nbdkit, alternating, rounds
// times (at least once); each side's result is its median round by IOPS,
// which damps the noise of a shared machine. fio, nbdkit and its memory
// plugin must be installed.
func CompareTarget(ctx context.Context, ours Target, size int64, jobs []Job, rounds int) ([]Comparison, error) {
	dir, err := os.MkdirTemp("", "fiobench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	theirs := filepath.Join(dir, "nbdkit.sock")
	kit := exec.CommandContext(ctx, "nbdkit", "-f", "--exit-with-parent", "-U", theirs,
		"memory", "size="+strconv.FormatInt(size, 10))
	var kitErr bytes.Buffer
	kit.Stderr = &kitErr
	if err := kit.Start(); err != nil {
		return nil, fmt.Errorf("nbdkit: %w", err)
	}
	defer func() {
		kit.Process.Kill()
		kit.Wait()
	}()
	if err := waitSocket(ctx, theirs, 10*time.Second); err != nil {
		return nil, fmt.Errorf("nbdkit did not start: %w: %s", err, kitErr.String())
	}
	rounds = max(rounds, 1)
	oursRes := make([][]Result, len(jobs))
	kitRes := make([][]Result, len(jobs))
	for r := 0; r < rounds; r++ {
		for i, j := range jobs {
			cpu0 := processCPU(ours.PID)
			o, out, err := Run(ctx, ours.URI, j)
			if err != nil {
				return nil, fmt.Errorf("%w\n%s", err, out)
			}
			o.ServerCPU = processCPU(ours.PID) - cpu0
			cpu0 = processCPU(kit.Process.Pid)
			k, out, err := Run(ctx, "nbd+unix:///?socket="+theirs, j)
			if err != nil {
				return nil, fmt.Errorf("nbdkit: %w\n%s", err, out)
			}
			k.ServerCPU = processCPU(kit.Process.Pid) - cpu0
			oursRes[i] = append(oursRes[i], o)
			kitRes[i] = append(kitRes[i], k)
		}
	}
	res := make([]Comparison, len(jobs))
	for i, j := range jobs {
		res[i] = Comparison{Job: j, Ours: median(oursRes[i]), Nbdkit: median(kitRes[i])}
	}
	return res, nil
}

// WriteTable writes one line per comparison: IOPS and MB/s of both sides,
// the ratio, CPU time per request of both servers, and PASS when the
// ratio reaches target (0: no verdict column).
func WriteTable(w io.Writer, res []Comparison, target float64) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%-14s %11s %11s %9s %11s %6s %11s %13s", "job", "ours IOPS", "nbdkit IOPS",
		"ours MB/s", "nbdkit MB/s", "ratio", "ours CPU/IO", "nbdkit CPU/IO")
	if target > 0 {
		fmt.Fprintf(&b, "  target %.2fx", target)
	}
	b.WriteByte('\n')
	for _, c := range res {
		fmt.Fprintf(&b, "%-14s %11.0f %11.0f %9.1f %11.1f %6.2f %11v %13v", c.Job.Name, c.Ours.IOPS(), c.Nbdkit.IOPS(),
			c.Ours.MBps(), c.Nbdkit.MBps(), c.Ratio(), c.Ours.CPUPerIO(), c.Nbdkit.CPUPerIO())
		if target > 0 {
			v := "PASS"
			if c.Ratio() < target {
				v = "FAIL"
			}
			fmt.Fprintf(&b, "  %s", v)
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// median returns the result with the median IOPS.
func median(rs []Result) Result {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b Result) int { return cmp.Compare(a.IOPS(), b.IOPS()) })
	return rs[len(rs)/2]
}

// processCPU returns the user + system CPU time of process pid from
// /proc/pid/stat (0 if unreadable). The kernel counts in clock ticks of
// 10 ms (USER_HZ 100 on Linux).
func processCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may
	// contain spaces: state is field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func waitSocket(ctx context.Context, path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
