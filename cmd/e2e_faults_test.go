package cmd

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"mdtool/engine"
)

// TestParseFaults: the test-only MDTOOL_TEST_FAULTS syntax, and clear
// errors for what it does not accept.
func TestParseFaults(t *testing.T) {
	good := []struct {
		in   string
		want []faultSpec
	}{
		{"", nil},
		{"/a/d1.img:read=0.01,write=0.002,seed=7;/b/d2.img:dead-after=5000", []faultSpec{
			{Path: "/a/d1.img", Read: 0.01, Write: 0.002, Seed: 7, DeadAfter: -1, hasRead: true, hasWrite: true},
			{Path: "/b/d2.img", Seed: 1, DeadAfter: 5000, hasDead: true},
		}},
		{" x.img:flush=1, skip=10 ,count=3,after=250ms ; ", []faultSpec{
			{Path: "x.img", Flush: 1, Seed: 1, Skip: 10, Count: 3, After: 250 * time.Millisecond, DeadAfter: -1, hasFlush: true},
		}},
		{"C:/odd:name:read=1,off=4096,len=8192", []faultSpec{
			{Path: "C:/odd:name", Read: 1, Seed: 1, Off: 4096, Len: 8192, DeadAfter: -1, hasRead: true, hasOffLen: true},
		}},
		{"d:dead-after=0", []faultSpec{{Path: "d", Seed: 1, DeadAfter: 0, hasDead: true}}},
	}
	for _, c := range good {
		got, err := parseFaults(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("parseFaults(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	bad := []struct{ in, msg string }{
		{"d1.img", `entry 1 "d1.img": want PATH:FAULT,... (no ':')`},
		{":read=0.1", "empty member path"},
		{"d1.img:", "no faults given for d1.img"},
		{"d1.img:read", `"read": want NAME=VALUE`},
		{"d1.img:read=", `"read=": want NAME=VALUE`},
		{"d1.img:read=2", "entry 1 (d1.img): read=2: want a rate in (0, 1]"},
		{"d1.img:write=0", "write=0: want a rate in (0, 1]"},
		{"d1.img:flush=x", "flush=x: want a rate in (0, 1]"},
		{"d1.img:read=0.1,read=0.2", "read given twice"},
		{"d1.img:read=0.1;d1.img:write=0.1", "entry 2: member d1.img given twice"},
		{"d1.img:read=0.1,seed=-1", "seed=-1: want an unsigned integer"},
		{"d1.img:read=0.1,skip=-5", "skip=-5: want a count"},
		{"d1.img:read=0.1,count=0", "count=0: want at least 1"},
		{"d1.img:read=0.1,after=soon", "after=soon: want a duration"},
		{"d1.img:dead-after=1.5", "dead-after=1.5: want a count"},
		{"d1.img:seed=3", "no fault to inject"},
		{"d1.img:dead-after=3,off=0", "off= and len= need a rate"},
		{"d1.img:reed=0.1", `unknown fault "reed"`},
		{"ok.img:read=0.5;d2.img:bogus=1", `entry 2 (d2.img): unknown fault "bogus"`},
	}
	for _, c := range bad {
		got, err := parseFaults(c.in)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("parseFaults(%q) = %+v, %v; want an error containing %q", c.in, got, err, c.msg)
		}
	}
}

// TestWrapFaults wraps only the member named, with the rules asked for:
// a dead-after member fails every operation after N, a rate of 1 fails
// every read in its range, and a bad value stops the assembly with the
// reason.
func TestWrapFaults(t *testing.T) {
	dir := t.TempDir()
	a := sparse(t, dir, "a.img", 1<<20)
	b := sparse(t, dir, "b.img", 1<<20)
	open := func(p string) engine.Device {
		d, err := engine.OpenFile(p, engine.FileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	t.Setenv(faultEnv, a+":dead-after=2;"+dir+"/./b.img:read=1,off=8192,len=4096")
	da := open(a)
	wa, err := wrapFaults(a, da)
	if err != nil {
		t.Fatal(err)
	}
	if wa == da || faultDeviceFor(a) == nil {
		t.Fatalf("%s not wrapped", a)
	}
	buf := make([]byte, 4096)
	for i := 0; i < 4; i++ {
		_, err := wa.ReadAt(buf, 0)
		if (i < 2) != (err == nil) || err != nil && !errors.Is(err, engine.ErrInjected) {
			t.Errorf("dead-after=2: read %d: %v", i, err)
		}
	}
	if err := wa.Flush(); !errors.Is(err, engine.ErrInjected) {
		t.Errorf("dead-after=2: flush after death: %v", err)
	}
	wb, err := wrapFaults(b, open(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		off  int64
		fail bool
	}{{0, false}, {4096, false}, {8192, true}, {8192 + 2048, true}, {12288, false}} {
		if _, err := wb.ReadAt(buf[:2048], c.off); (err != nil) != c.fail {
			t.Errorf("read=1 on [8192,12288): read at %d: %v", c.off, err)
		}
	}
	if _, err := wb.WriteAt(buf, 8192); err != nil {
		t.Errorf("read faults fail writes: %v", err)
	}
	if n := faultDeviceFor(b).Injected.Load(); n != 2 {
		t.Errorf("%d faults injected on b, want 2", n)
	}
	c := sparse(t, dir, "c.img", 1<<20)
	dc := open(c)
	if wc, err := wrapFaults(c, dc); err != nil || wc != dc {
		t.Errorf("member without faults: %v, wrapped %v", err, wc != dc)
	}
	t.Setenv(faultEnv, c+":read=7")
	if _, err := wrapFaults(c, dc); err == nil || !strings.Contains(err.Error(), "read=7: want a rate in (0, 1]") {
		t.Errorf("bad value: %v", err)
	}
	// assemble says why and starts nothing.
	devs := mkArray(t, dir, "/dev/md/flt", 2, 8<<20, "-l1", "-n2", "--assume-clean")
	t.Setenv(faultEnv, devs[1]+":write=0.5,bogus=1")
	code, _, errs := mdtool(t, "assemble", "--foreground", "--run-dir", dir, "/dev/md/flt", devs[0], devs[1])
	if code != 1 || !strings.Contains(errs, "mdtool: MDTOOL_TEST_FAULTS: entry 1 ("+devs[1]+`): unknown fault "bogus"`) {
		t.Errorf("assemble with a bad fault spec: exit %d: %s", code, errs)
	}
}
