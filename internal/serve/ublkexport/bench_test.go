//go:build linux

package ublkexport_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
)

// door is one column of the door benchmark: a block device in the guest,
// with the commands that make it and take it away.
type door struct {
	name  string // column name
	base  string // the column its ratio is against ("" for a baseline)
	setup string // shell: make the device
	dev   string // the device fio runs on
	stop  string // shell: take it away
}

// doors are the rows, in the order they run. "ublk" and "nbd" are mdtool
// itself assembling the kernel's array with --device=ublk or --device=nbd
// (the daemon, /dev/md/bench linked to /dev/ublkbN or /dev/nbdN, the kernel
// nbd client over socketpairs); "ublk-engine" is the engine's array behind
// ublktest (no daemon); "ublk-file" a raw disk through export.File.
var doors = []door{
	{name: "kernel-md", setup: "mdadm --assemble /dev/md0 /dev/vda /dev/vdb /dev/vdc /dev/vdd >/dev/null 2>&1", dev: "/dev/md0",
		stop: "mdadm --stop /dev/md0 >/dev/null 2>&1"},
	{name: "ublk", base: "kernel-md", setup: "$M --assemble /dev/md/bench --device=ublk /dev/vda /dev/vdb /dev/vdc /dev/vdd || exit 4",
		dev: "/dev/md/bench", stop: "$M --stop /dev/md/bench || exit 5"},
	{name: "nbd", base: "kernel-md", setup: "$M --assemble /dev/md/bench --device=nbd /dev/vda /dev/vdb /dev/vdc /dev/vdd || exit 6",
		dev: "/dev/md/bench", stop: "$M --stop /dev/md/bench || exit 7"},
	{name: "ublk-engine", base: "kernel-md", setup: "$U attach -members /dev/vda,/dev/vdb,/dev/vdc,/dev/vdd -queues 2 > /tmp/u.log 2>&1 & spid=$!; waitdev /tmp/u.log $spid >/dev/null",
		dev: "/dev/ublkb0", stop: "kill $spid; wait $spid"},
	{name: "raw-disk", dev: "/dev/vde"},
	{name: "ublk-file", base: "raw-disk", setup: "$U attach -file /dev/vde -direct -queues 2 -id 1 > /tmp/f.log 2>&1 & spid=$!; waitdev /tmp/f.log $spid >/dev/null",
		dev: "/dev/ublkb1", stop: "kill $spid; wait $spid"},
}

// doorJobs are the fio workloads (libaio, direct, over the first 192 MiB).
var doorJobs = []struct{ name, args string }{
	{"randread-4k", "--rw=randread --bs=4k --iodepth=32"},
	{"randwrite-4k", "--rw=randwrite --bs=4k --iodepth=32"},
	{"read-1m", "--rw=read --bs=1m --iodepth=8"},
	{"write-1m", "--rw=write --bs=1m --iodepth=8"},
}

// BenchmarkDoors (make bench-doors) measures, in one Linux 6.12 VM run on
// the same virtio disks, fio 4 KiB random IOPS and 1 MiB sequential
// throughput through the kernel md driver (raid10 on 4 disks, made by
// mdadm), through mdtool serving that array as a ublk device and as a
// kernel NBD device, through the engine alone behind ublktest, and through
// a raw disk and the same disk served by export.File (O_DIRECT) over ublk.
// It prints one table; a row's ratios are against its base row (kernel-md
// for the arrays, raw-disk for ublk-file) and are also reported as
// metrics (DOOR/BASE-JOB). TCG makes the absolute figures meaningless; the
// ratios show the cost of each door. No thresholds: this is not a test.
// MDTOOL_BENCH_RUNTIME sets each job's seconds (default 8).
func BenchmarkDoors(b *testing.B) {
	mdvm.RequireKernel(b, "6.12")
	bins := []string{buildUblktest(b), buildMdtool(b)}
	p, err := lookTool("fio")
	if err != nil {
		b.Fatal(err)
	}
	bins = append(bins, p)
	runtimeSec := 8
	if v, err := strconv.Atoi(os.Getenv("MDTOOL_BENCH_RUNTIME")); err == nil && v > 0 {
		runtimeSec = v
	}
	dir := b.TempDir()
	var disks []mdvm.Disk
	for i := 0; i < 5; i++ {
		p := filepath.Join(dir, fmt.Sprintf("d%d.img", i))
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Truncate(p, 256<<20); err != nil {
			b.Fatal(err)
		}
		disks = append(disks, mdvm.Disk{Path: p})
	}
	var sc strings.Builder
	sc.WriteString(guestHelpers)
	sc.WriteString("M=/usr/bin/mdtool\n")
	sc.WriteString("mdadm --create /dev/md0 --run --level=10 --raid-devices=4 --assume-clean /dev/vda /dev/vdb /dev/vdc /dev/vdd >/dev/null 2>&1 || exit 3\n")
	sc.WriteString("mdadm --stop /dev/md0 >/dev/null 2>&1\n")
	for _, d := range doors {
		if d.setup != "" {
			fmt.Fprintf(&sc, "%s\n", d.setup)
		}
		for _, j := range doorJobs {
			fmt.Fprintf(&sc, "echo '__BEGIN %s %s'\n", d.name, j.name)
			fmt.Fprintf(&sc, "fio --name=%s --filename=%s --ioengine=libaio --direct=1 %s --size=192M --runtime=%d --time_based --ramp_time=1 --output-format=json\n",
				j.name, d.dev, j.args, runtimeSec)
			fmt.Fprintf(&sc, "echo '__END'\n")
		}
		if d.stop != "" {
			fmt.Fprintf(&sc, "%s\n", d.stop)
		}
	}
	b.ResetTimer()
	out := string(mdvm.MustExec(b, mdvm.Run{
		Kernel:  "6.12",
		Modules: []string{"ublk_drv", "nbd"},
		Disks:   disks,
		Bins:    bins,
		Script:  sc.String(),
		Timeout: time.Duration(600+40*runtimeSec) * time.Second,
	}))
	b.StopTimer()
	res, err := parseDoorRuns(out)
	if err != nil {
		b.Fatalf("%v\nguest output:\n%s", err, out)
	}
	tab, ratios := doorTable(res)
	for _, r := range ratios {
		b.ReportMetric(r.v, r.name)
	}
	b.Logf("fio through each door (TCG; ratios against the row's base: kernel-md, or raw-disk for ublk-file):\n%s", tab)
	fmt.Print(tab)
}

type doorRatio struct {
	name string // DOOR/BASE-JOB
	v    float64
}

// doorTable prints the results as one table, a row per door and a column
// per job; a row with a base has each figure's ratio to the base row's.
func doorTable(res map[string]map[string]float64) (string, []doorRatio) {
	var tab strings.Builder
	var ratios []doorRatio
	fmt.Fprintf(&tab, "%-12s", "door")
	for _, j := range doorJobs {
		fmt.Fprintf(&tab, " %22s", j.name)
	}
	tab.WriteString("\n")
	for _, d := range doors {
		fmt.Fprintf(&tab, "%-12s", d.name)
		for _, j := range doorJobs {
			v := res[d.name][j.name]
			cell := fmt.Sprintf("%.0f %s", v, unit(j.name))
			if d.base != "" {
				if bv := res[d.base][j.name]; bv > 0 {
					ratio := v / bv
					cell += fmt.Sprintf(" (%.2fx)", ratio)
					ratios = append(ratios, doorRatio{d.name + "/" + d.base + "-" + j.name, ratio})
				}
			}
			fmt.Fprintf(&tab, " %22s", cell)
		}
		tab.WriteString("\n")
	}
	return tab.String(), ratios
}

func unit(job string) string {
	if strings.HasSuffix(job, "-1m") {
		return "MB/s"
	}
	return "IOPS"
}

// parseDoorRuns reads the fio JSON between the markers: door -> job ->
// IOPS (4k jobs) or MB/s (1m jobs).
func parseDoorRuns(out string) (map[string]map[string]float64, error) {
	res := map[string]map[string]float64{}
	for _, part := range strings.Split(out, "__BEGIN ")[1:] {
		head, body, ok := strings.Cut(part, "\n")
		if !ok {
			return nil, fmt.Errorf("truncated run %q", part)
		}
		body, _, ok = strings.Cut(body, "__END")
		if !ok {
			return nil, fmt.Errorf("run %s has no end", head)
		}
		f := strings.Fields(head)
		if len(f) != 2 {
			return nil, fmt.Errorf("bad run header %q", head)
		}
		if i := strings.Index(body, "{"); i >= 0 {
			body = body[i:]
		}
		var fr struct {
			Jobs []struct {
				Error int `json:"error"`
				Read  struct {
					IOPS float64 `json:"iops"`
					BW   float64 `json:"bw_bytes"`
				} `json:"read"`
				Write struct {
					IOPS float64 `json:"iops"`
					BW   float64 `json:"bw_bytes"`
				} `json:"write"`
			} `json:"jobs"`
		}
		if err := json.Unmarshal([]byte(body), &fr); err != nil || len(fr.Jobs) == 0 {
			return nil, fmt.Errorf("run %s: fio output not JSON (%v): %.300s", head, err, body)
		}
		j := fr.Jobs[0]
		if j.Error != 0 {
			return nil, fmt.Errorf("run %s: fio error %d", head, j.Error)
		}
		v := j.Read.IOPS + j.Write.IOPS
		if unit(f[1]) == "MB/s" {
			v = (j.Read.BW + j.Write.BW) / 1e6
		}
		if v <= 0 {
			return nil, fmt.Errorf("run %s: no I/O done", head)
		}
		if res[f[0]] == nil {
			res[f[0]] = map[string]float64{}
		}
		res[f[0]][f[1]] = v
	}
	for _, d := range doors {
		for _, j := range doorJobs {
			if _, ok := res[d.name][j.name]; !ok {
				return nil, fmt.Errorf("no result for %s %s", d.name, j.name)
			}
		}
	}
	return res, nil
}

// buildMdtool builds the mdtool binary (the production build), static,
// for the guest.
func buildMdtool(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mdtool")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "mdtool")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building mdtool: %v\n%s", err, out)
	}
	return bin
}
