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
	if v := res["ublk-engine"]["write-1m"]; v != 4 {
		t.Errorf("ublk-engine write-1m = %v, want 4 MB/s", v)
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
