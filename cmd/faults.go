package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"mdtool/engine"
)

// faultEnv names the test-only environment variable that wraps members in
// fault-injecting devices (see wrapFaults). It is not a user interface:
// the fault-injection tests of the daemon use it, and nothing documents it
// to users. Its value is a list of members separated by ';', each a member
// path (as given to assemble) and its faults after a ':':
//
//	MDTOOL_TEST_FAULTS='d1.img:read=0.01,write=0.002,seed=7;/dev/loop3:dead-after=5000'
//
// Faults:
//
//	read=RATE      fail each read with probability RATE (0 < RATE <= 1)
//	write=RATE     the same for writes (and write-zeroes)
//	flush=RATE     the same for flushes
//	seed=N         seed of the random choices (default 1): runs repeat
//	skip=N         the first N reads, writes and flushes (each counted
//	               apart) pass before a rate applies
//	count=N        inject at most N failures per kind of operation
//	off=BYTES      rates apply only to I/O overlapping [off, off+len)
//	len=BYTES      (member byte offsets; len 0 or unset: to the end)
//	after=DURATION no faults until DURATION (Go syntax: 500ms, 2s) after
//	               the member was opened
//	dead-after=N   after N further operations of any kind every operation
//	               fails, as a pulled drive (0: dead at once)
//
// Errors are engine.ErrInjected.
const faultEnv = "MDTOOL_TEST_FAULTS"

// faultSpec is one member's faults as faultEnv gives them.
type faultSpec struct {
	Path                        string
	Read, Write, Flush          float64
	Seed                        uint64
	Skip, Count, Off, Len       int64
	After                       time.Duration
	DeadAfter                   int64 // -1: never
	hasRead, hasWrite, hasFlush bool
	hasDead, hasOffLen          bool
}

// parseFaults parses a faultEnv value.
func parseFaults(s string) ([]faultSpec, error) {
	var specs []faultSpec
	seen := map[string]bool{}
	for i, entry := range strings.Split(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		k := strings.LastIndexByte(entry, ':')
		if k < 0 {
			return nil, fmt.Errorf("entry %d %q: want PATH:FAULT,... (no ':')", i+1, entry)
		}
		sp := faultSpec{Path: entry[:k], Seed: 1, DeadAfter: -1}
		if sp.Path == "" {
			return nil, fmt.Errorf("entry %d %q: empty member path", i+1, entry)
		}
		key := cleanFaultPath(sp.Path)
		if seen[key] {
			return nil, fmt.Errorf("entry %d: member %s given twice", i+1, sp.Path)
		}
		seen[key] = true
		opts := entry[k+1:]
		if strings.TrimSpace(opts) == "" {
			return nil, fmt.Errorf("entry %d %q: no faults given for %s", i+1, entry, sp.Path)
		}
		given := map[string]bool{}
		for _, kv := range strings.Split(opts, ",") {
			kv = strings.TrimSpace(kv)
			name, val, ok := strings.Cut(kv, "=")
			if !ok || val == "" {
				return nil, fmt.Errorf("entry %d (%s): %q: want NAME=VALUE", i+1, sp.Path, kv)
			}
			if given[name] {
				return nil, fmt.Errorf("entry %d (%s): %s given twice", i+1, sp.Path, name)
			}
			given[name] = true
			bad := func(what string) error {
				return fmt.Errorf("entry %d (%s): %s=%s: %s", i+1, sp.Path, name, val, what)
			}
			count := func() (int64, error) {
				n, err := strconv.ParseInt(val, 10, 64)
				if err != nil || n < 0 {
					return 0, bad("want a count (an integer >= 0)")
				}
				return n, nil
			}
			rate := func() (float64, error) {
				r, err := strconv.ParseFloat(val, 64)
				if err != nil || !(r > 0 && r <= 1) {
					return 0, bad("want a rate in (0, 1]")
				}
				return r, nil
			}
			var err error
			switch name {
			case "read":
				sp.Read, err = rate()
				sp.hasRead = true
			case "write":
				sp.Write, err = rate()
				sp.hasWrite = true
			case "flush":
				sp.Flush, err = rate()
				sp.hasFlush = true
			case "seed":
				sp.Seed, err = strconv.ParseUint(val, 10, 64)
				if err != nil {
					err = bad("want an unsigned integer")
				}
			case "skip":
				sp.Skip, err = count()
			case "count":
				sp.Count, err = count()
				if err == nil && sp.Count == 0 {
					err = bad("want at least 1")
				}
			case "off":
				sp.Off, err = count()
				sp.hasOffLen = true
			case "len":
				sp.Len, err = count()
				sp.hasOffLen = true
			case "after":
				sp.After, err = time.ParseDuration(val)
				if err != nil || sp.After < 0 {
					err = bad("want a duration such as 500ms or 2s")
				}
			case "dead-after":
				sp.DeadAfter, err = count()
				sp.hasDead = true
			default:
				return nil, fmt.Errorf("entry %d (%s): unknown fault %q (known: read, write, flush, seed, skip, count, off, len, after, dead-after)", i+1, sp.Path, name)
			}
			if err != nil {
				return nil, err
			}
		}
		if !sp.hasRead && !sp.hasWrite && !sp.hasFlush && !sp.hasDead {
			return nil, fmt.Errorf("entry %d (%s): no fault to inject (give read=, write=, flush= or dead-after=)", i+1, sp.Path)
		}
		if sp.hasOffLen && !sp.hasRead && !sp.hasWrite && !sp.hasFlush {
			return nil, fmt.Errorf("entry %d (%s): off= and len= need a rate (read=, write= or flush=)", i+1, sp.Path)
		}
		specs = append(specs, sp)
	}
	return specs, nil
}

// rules turns a spec into FaultDevice rules: dead-after first, so that it
// counts every operation.
func (sp faultSpec) rules() []engine.FaultRule {
	var rs []engine.FaultRule
	if sp.hasDead {
		rs = append(rs, engine.FaultRule{Ops: engine.OpAll, Skip: sp.DeadAfter})
	}
	add := func(op engine.FaultOp, has bool, rate float64) {
		if !has {
			return
		}
		r := engine.FaultRule{Ops: op, Skip: sp.Skip, Count: sp.Count, Rate: rate, Off: sp.Off, Len: sp.Len}
		if rate >= 1 {
			r.Rate = 0 // FaultRule: 0 means always
		}
		if op == engine.OpFlush {
			r.Off, r.Len = 0, 0 // flushes have no range
		}
		rs = append(rs, r)
	}
	add(engine.OpRead, sp.hasRead, sp.Read)
	add(engine.OpWrite, sp.hasWrite, sp.Write)
	add(engine.OpFlush, sp.hasFlush, sp.Flush)
	return rs
}

func cleanFaultPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return filepath.Clean(p)
}

// faultDevs remembers the fault devices made in this process, by cleaned
// path, for in-process tests that look at their counters.
var faultDevs sync.Map

// faultDeviceFor returns the FaultDevice wrapping the member at path in
// this process, or nil.
func faultDeviceFor(path string) *engine.FaultDevice {
	v, ok := faultDevs.Load(cleanFaultPath(path))
	if !ok {
		return nil
	}
	return v.(*engine.FaultDevice)
}

// wrapFaults returns the device to give the engine for the member at
// path: d itself, or d wrapped in an engine.FaultDevice when faultEnv asks
// for faults on that member.
func wrapFaults(path string, d engine.Device) (engine.Device, error) {
	env := os.Getenv(faultEnv)
	if env == "" {
		return d, nil
	}
	specs, err := parseFaults(env)
	if err != nil {
		return nil, err
	}
	key := cleanFaultPath(path)
	for _, sp := range specs {
		if cleanFaultPath(sp.Path) != key {
			continue
		}
		fd := engine.NewFaultDevice(d, sp.Seed)
		rules := sp.rules()
		if sp.After > 0 {
			time.AfterFunc(sp.After, func() {
				for _, r := range rules {
					fd.AddRule(r)
				}
			})
		} else {
			for _, r := range rules {
				fd.AddRule(r)
			}
		}
		faultDevs.Store(key, fd)
		return fd, nil
	}
	return d, nil
}
