//go:build linux

package ublkexport_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

// doors are the columns, in the order they run. The NBD column needs a
// program that attaches a Backend to /dev/nbdN through NBD netlink (the
// nbd door of issue 12): add it here as
//
//	{name: "nbd-engine", base: "kernel-md", setup: "<attach the members through nbd> & ...", dev: "/dev/nbd0", stop: "..."},
//
// with "nbd" in the run's Modules.
var doors = []door{
	{name: "kernel-md", setup: "mdadm --assemble /dev/md0 /dev/vda /dev/vdb /dev/vdc /dev/vdd >/dev/null 2>&1", dev: "/dev/md0",
		stop: "mdadm --stop /dev/md0 >/dev/null 2>&1"},
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
// mdadm) and through the engine serving that array as /dev/ublkb0, and
// through a raw disk and the same disk served by export.File (O_DIRECT)
// over ublk.
// TCG makes the absolute figures meaningless; the ratios (ublk-engine /
// kernel-md, ublk-file / raw-disk) show the cost of the door.
// MDTOOL_BENCH_RUNTIME sets each job's seconds (default 8).
func BenchmarkDoors(b *testing.B) {
	mdvm.RequireKernel(b, "6.12")
	bins := []string{buildUblktest(b)}
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
		Modules: []string{"ublk_drv"},
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
	var tab strings.Builder
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
					b.ReportMetric(ratio, d.name+"/"+d.base+"-"+j.name)
				}
			}
			fmt.Fprintf(&tab, " %22s", cell)
		}
		tab.WriteString("\n")
	}
	b.Logf("fio through each door (TCG; ratios against the base column of the row):\n%s", tab.String())
	fmt.Print(tab.String())
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
