package nbdbench

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	out := []byte(`nbd: connected
{"jobs":[{"error":0,"read":{"io_bytes":4096,"total_ios":1,"iops":10.5,"bw_bytes":2000000},
 "write":{"io_bytes":8192,"total_ios":2,"iops":20,"bw_bytes":4000000}},
 {"error":1,"read":{"io_bytes":0,"total_ios":0,"iops":0,"bw_bytes":0},
 "write":{"io_bytes":4096,"total_ios":1,"iops":5,"bw_bytes":1000000}}]}`)
	r, err := parse(out)
	if err != nil {
		t.Fatal(err)
	}
	want := Result{ReadIOPS: 10.5, WriteIOPS: 25, ReadMBps: 2, WriteMBps: 5, ReadBytes: 4096, WriteBytes: 12288, IOs: 4, Errors: 1}
	if r != want {
		t.Errorf("parse = %+v, want %+v", r, want)
	}
	for _, bad := range []string{"", "no json", `{"jobs":[]}`, `{"jobs":`} {
		if _, err := parse([]byte(bad)); err == nil {
			t.Errorf("parse(%q) succeeded", bad)
		}
	}
}

func TestWriteTable(t *testing.T) {
	res := []Comparison{
		{Job: Job{Name: "fast"}, Ours: Result{ReadIOPS: 90, ReadMBps: 9, IOs: 10, ServerCPU: time.Millisecond},
			Nbdkit: Result{ReadIOPS: 100, ReadMBps: 10}},
		{Job: Job{Name: "slow"}, Ours: Result{WriteIOPS: 79}, Nbdkit: Result{WriteIOPS: 100}},
		{Job: Job{Name: "none"}, Ours: Result{WriteIOPS: 79}},
	}
	var b strings.Builder
	if err := WriteTable(&b, res, 0.8); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "target 0.80x") {
		t.Fatalf("table:\n%s", b.String())
	}
	for i, want := range []string{"0.90", "0.79", "0.00"} {
		f := strings.Fields(lines[i+1])
		if f[5] != want {
			t.Errorf("line %q: ratio %s, want %s", lines[i+1], f[5], want)
		}
	}
	if !strings.HasSuffix(lines[1], "PASS") || !strings.HasSuffix(lines[2], "FAIL") || !strings.HasSuffix(lines[3], "FAIL") {
		t.Errorf("verdicts:\n%s", b.String())
	}
	if !strings.Contains(lines[1], "100µs") {
		t.Errorf("CPU per IO missing:\n%s", b.String())
	}
}
