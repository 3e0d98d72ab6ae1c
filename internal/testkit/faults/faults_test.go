package faults

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"mdtool/engine"
)

// sparse makes a sparse file of size bytes in dir.
func sparse(t *testing.T, dir, name string, size int64) string {
	t.Helper()
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestParseFaults: the fault specification syntax, and clear
// errors for what it does not accept.
func TestParseFaults(t *testing.T) {
	good := []struct {
		in   string
		want []Spec
	}{
		{"", nil},
		{"/a/d1.img:read=0.01,write=0.002,seed=7;/b/d2.img:dead-after=5000", []Spec{
			{Path: "/a/d1.img", Read: 0.01, Write: 0.002, Seed: 7, DeadAfter: -1, hasRead: true, hasWrite: true},
			{Path: "/b/d2.img", Seed: 1, DeadAfter: 5000, hasDead: true},
		}},
		{" x.img:flush=1, skip=10 ,count=3,after=250ms ; ", []Spec{
			{Path: "x.img", Flush: 1, Seed: 1, Skip: 10, Count: 3, After: 250 * time.Millisecond, DeadAfter: -1, hasFlush: true},
		}},
		{"C:/odd:name:read=1,off=4096,len=8192", []Spec{
			{Path: "C:/odd:name", Read: 1, Seed: 1, Off: 4096, Len: 8192, DeadAfter: -1, hasRead: true, hasOffLen: true},
		}},
		{"d:dead-after=0", []Spec{{Path: "d", Seed: 1, DeadAfter: 0, hasDead: true}}},
	}
	for _, c := range good {
		got, err := Parse(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
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
		got, err := Parse(c.in)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Parse(%q) = %+v, %v; want an error containing %q", c.in, got, err, c.msg)
		}
	}
}

// TestWrap wraps only the member named, with the rules asked for: a
// dead-after member fails every operation after N, a rate of 1 fails
// every read in its range, and a bad value is an error (FromEnv's names
// Env).
func TestWrap(t *testing.T) {
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
	spec := a + ":dead-after=2;" + dir + "/./b.img:read=1,off=8192,len=4096"
	da := open(a)
	wa, err := Wrap(spec, a, da)
	if err != nil {
		t.Fatal(err)
	}
	if wa == da || DeviceFor(a) == nil {
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
	wb, err := Wrapper(spec)(b, open(b))
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
	if n := DeviceFor(b).Injected.Load(); n != 2 {
		t.Errorf("%d faults injected on b, want 2", n)
	}
	c := sparse(t, dir, "c.img", 1<<20)
	dc := open(c)
	if wc, err := Wrap(spec, c, dc); err != nil || wc != dc {
		t.Errorf("member without faults: %v, wrapped %v", err, wc != dc)
	}
	if _, err := Wrap(c+":read=7", c, dc); err == nil || !strings.Contains(err.Error(), "read=7: want a rate in (0, 1]") {
		t.Errorf("bad value: %v", err)
	}
	if wc, err := Wrap("", c, dc); err != nil || wc != dc {
		t.Errorf("empty spec: %v, wrapped %v", err, wc != dc)
	}
	t.Setenv(Env, c+":read=0.5,bogus=1")
	if _, err := FromEnv(c, dc); err == nil || !strings.Contains(err.Error(), Env+": entry 1 ("+c+`): unknown fault "bogus"`) {
		t.Errorf("FromEnv, bad value: %v", err)
	}
	t.Setenv(Env, c+":dead-after=0")
	if wc, err := FromEnv(c, dc); err != nil || wc == dc || DeviceFor(c) != wc {
		t.Errorf("FromEnv: %v, wrapped %v", err, wc != dc)
	}
}
