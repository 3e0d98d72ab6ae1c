package nbd_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"mdtool/engine/export"
	"mdtool/engine/nbd"
	"mdtool/engine/nbd/fiobench"
)

// BenchmarkFioVsNbdkit serves an in-memory Backend and runs fio 4 KiB random
// and 1 MiB sequential jobs through it and through `nbdkit memory` in the
// same run, reporting IOPS and MB/s of both and their ratio. Each iteration
// is one full comparison; FIOBENCH_RUNTIME sets the fio runtime per job
// (default 5s).
func BenchmarkFioVsNbdkit(b *testing.B) {
	for _, bin := range []string{"fio", "nbdkit"} {
		nbd.RequireBin(b, bin)
	}
	runtime := 5 * time.Second
	if v := os.Getenv("FIOBENCH_RUNTIME"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		runtime = d
	}
	mem, err := export.NewMem(1<<30, 512, 4096, 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	var res []fiobench.Comparison
	for i := 0; i < b.N; i++ {
		res, err = fiobench.Compare(context.Background(), mem, nbd.Config{}, fiobench.DefaultJobs(1<<30, runtime))
		if err != nil {
			b.Fatal(err)
		}
	}
	var tab strings.Builder
	fmt.Fprintf(&tab, "%-14s %12s %12s %10s %10s %6s\n", "job", "ours IOPS", "nbdkit IOPS", "ours MB/s", "nbdkit MB/s", "ratio")
	for _, c := range res {
		n := c.Job.Name
		b.ReportMetric(c.Ours.IOPS(), n+"-IOPS")
		b.ReportMetric(c.Nbdkit.IOPS(), n+"-nbdkit-IOPS")
		b.ReportMetric(c.Ours.MBps(), n+"-MB/s")
		b.ReportMetric(c.Nbdkit.MBps(), n+"-nbdkit-MB/s")
		b.ReportMetric(c.Ratio(), n+"-ratio")
		fmt.Fprintf(&tab, "%-14s %12.0f %12.0f %10.1f %10.1f %6.2f\n", n, c.Ours.IOPS(), c.Nbdkit.IOPS(), c.Ours.MBps(), c.Nbdkit.MBps(), c.Ratio())
	}
	b.Log("\n" + tab.String())
}
