package nbd_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	fiobench "mdtool/internal/nbdbench"
	"mdtool/internal/serve/export"
	"mdtool/internal/serve/nbd"
)

// BenchmarkFioVsNbdkit serves an in-memory Backend and runs fio 4 KiB random
// and 1 MiB sequential jobs through it and through `nbdkit memory` in the
// same run, reporting IOPS and MB/s of both and their ratio (medians of
// FIOBENCH_ROUNDS alternating rounds, default 3). Each iteration is one
// full comparison; FIOBENCH_RUNTIME sets the fio runtime per job (default
// 3s).
func BenchmarkFioVsNbdkit(b *testing.B) {
	for _, bin := range []string{"fio", "nbdkit"} {
		nbd.RequireBin(b, bin)
	}
	runtime := 3 * time.Second
	if v := os.Getenv("FIOBENCH_RUNTIME"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		runtime = d
	}
	rounds := 3
	if v := os.Getenv("FIOBENCH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		rounds = n
	}
	mem, err := export.NewMem(1<<30, 512, 4096, 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	var res []fiobench.Comparison
	for i := 0; i < b.N; i++ {
		res, err = fiobench.Compare(context.Background(), mem, nbd.Config{}, fiobench.DefaultJobs(1<<30, runtime), rounds)
		if err != nil {
			b.Fatal(err)
		}
	}
	var tab strings.Builder
	for _, c := range res {
		n := c.Job.Name
		b.ReportMetric(c.Ours.IOPS(), n+"-IOPS")
		b.ReportMetric(c.Nbdkit.IOPS(), n+"-nbdkit-IOPS")
		b.ReportMetric(c.Ours.MBps(), n+"-MB/s")
		b.ReportMetric(c.Nbdkit.MBps(), n+"-nbdkit-MB/s")
		b.ReportMetric(c.Ratio(), n+"-ratio")
		b.ReportMetric(float64(c.Ours.CPUPerIO().Nanoseconds())/1e3, n+"-cpu-us/io")
		b.ReportMetric(float64(c.Nbdkit.CPUPerIO().Nanoseconds())/1e3, n+"-nbdkit-cpu-us/io")
	}
	fiobench.WriteTable(&tab, res, 0)
	b.Log("\n" + tab.String())
}
