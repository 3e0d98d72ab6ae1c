//go:build linux

package ublkexport_test

import (
	"fmt"
	"strings"
	"testing"
)

// The door benchmark reads fio's JSON between its markers: IOPS for the
// 4 KiB jobs, MB/s for the 1 MiB ones, and refuses missing runs, fio
// errors and runs without I/O.
func TestParseDoorRuns(t *testing.T) {
	var b strings.Builder
	for i, d := range doors {
		for k, j := range doorJobs {
			fmt.Fprintf(&b, "__BEGIN %s %s\nnote: noise\n{\"jobs\":[{\"error\":0,\"read\":{\"iops\":%d,\"bw_bytes\":%d},\"write\":{\"iops\":0,\"bw_bytes\":0}}]}\n__END\n",
				d.name, j.name, 100*(i+1)+k, 2000000*(i+1))
		}
	}
	res, err := parseDoorRuns(b.String())
	if err != nil {
		t.Fatal(err)
	}
	if v := res["kernel-md"]["randread-4k"]; v != 100 {
		t.Errorf("kernel-md randread-4k = %v, want 100 IOPS", v)
	}
	for i, d := range doors {
		if v, want := res[d.name]["write-1m"], float64(2*(i+1)); v != want {
			t.Errorf("%s write-1m = %v, want %v MB/s", d.name, v, want)
		}
	}
	bad := strings.Replace(b.String(), `"error":0`, `"error":5`, 1)
	if _, err := parseDoorRuns(bad); err == nil {
		t.Errorf("a fio error was accepted")
	}
	short := b.String()[:strings.LastIndex(b.String(), "__BEGIN")]
	if _, err := parseDoorRuns(short); err == nil {
		t.Errorf("a missing run was accepted")
	}
	zero := strings.Replace(b.String(), `"iops":100,`, `"iops":0,`, 1)
	if _, err := parseDoorRuns(zero); err == nil {
		t.Errorf("a run without I/O was accepted")
	}
}

// The door table has a row for mdtool's ublk and NBD devices and the
// kernel md array, and the mdtool rows carry their ratio to kernel md.
func TestDoorTable(t *testing.T) {
	res := map[string]map[string]float64{}
	for i, d := range doors {
		res[d.name] = map[string]float64{}
		for _, j := range doorJobs {
			res[d.name][j.name] = float64(1000 * (i + 1))
		}
	}
	res["kernel-md"]["randread-4k"] = 4000
	res["ublk"]["randread-4k"] = 1000
	res["nbd"]["randread-4k"] = 500
	tab, ratios := doorTable(res)
	lines := strings.Split(strings.TrimSuffix(tab, "\n"), "\n")
	if len(lines) != 1+len(doors) {
		t.Fatalf("table has %d lines, want %d:\n%s", len(lines), 1+len(doors), tab)
	}
	for _, w := range []string{"door", "randread-4k", "randwrite-4k", "read-1m", "write-1m"} {
		if !strings.Contains(lines[0], w) {
			t.Errorf("header %q lacks %q", lines[0], w)
		}
	}
	row := map[string]string{}
	for _, l := range lines[1:] {
		row[strings.Fields(l)[0]] = l
	}
	for _, w := range []struct{ door, cell string }{
		{"kernel-md", "4000 IOPS"}, {"ublk", "1000 IOPS (0.25x)"}, {"nbd", "500 IOPS (0.12x)"},
	} {
		if !strings.Contains(row[w.door], w.cell) {
			t.Errorf("row %q lacks %q", row[w.door], w.cell)
		}
	}
	if strings.Contains(row["kernel-md"], "x)") || strings.Contains(row["raw-disk"], "x)") {
		t.Errorf("a base row has a ratio:\n%s", tab)
	}
	got := map[string]float64{}
	for _, r := range ratios {
		got[r.name] = r.v
	}
	if got["ublk/kernel-md-randread-4k"] != 0.25 || got["nbd/kernel-md-randread-4k"] != 0.125 {
		t.Errorf("ratios %v", got)
	}
	if _, ok := got["ublk-file/raw-disk-write-1m"]; !ok {
		t.Errorf("no ublk-file/raw-disk ratio in %v", got)
	}
}
