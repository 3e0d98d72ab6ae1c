// Package faults wraps engine devices in engine.FaultDevice from a
// textual fault specification. It is test support only: in-process tests
// install [Wrapper] as the cmd package's member hook, and the test build
// of mdtool (build tag mdtool_testhooks, cmd/testhooks_env.go) installs
// [FromEnv], which reads [Env]. The product never links this package.
//
// A specification is a list of members separated by ';', each a member
// path (as given to assemble) and its faults after a ':':
//
//	d1.img:read=0.01,write=0.002,seed=7;/dev/loop3:dead-after=5000
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
package faults

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

// Env is the environment variable the test build of mdtool reads
// specifications from. Nothing in the product reads it.
const Env = "MDTOOL_TEST_FAULTS"

// Spec is one member's faults.
type Spec struct {
	Path                        string
	Read, Write, Flush          float64
	Seed                        uint64
	Skip, Count, Off, Len       int64
	After                       time.Duration
	DeadAfter                   int64 // -1: never
	hasRead, hasWrite, hasFlush bool
	hasDead, hasOffLen          bool
}

// Parse parses a specification.
func Parse(s string) ([]Spec, error) {
	var specs []Spec
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
		sp := Spec{Path: entry[:k], Seed: 1, DeadAfter: -1}
		if sp.Path == "" {
			return nil, fmt.Errorf("entry %d %q: empty member path", i+1, entry)
		}
		key := cleanPath(sp.Path)
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

// Rules turns a spec into FaultDevice rules: dead-after first, so that it
// counts every operation.
func (sp Spec) Rules() []engine.FaultRule {
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

func cleanPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return filepath.Clean(p)
}

// devs remembers the fault devices made in this process, by cleaned
// path, for in-process tests that look at their counters.
var devs sync.Map

// DeviceFor returns the FaultDevice last made in this process for the
// member at path, or nil.
func DeviceFor(path string) *engine.FaultDevice {
	v, ok := devs.Load(cleanPath(path))
	if !ok {
		return nil
	}
	return v.(*engine.FaultDevice)
}

// WrapFunc is the shape of the member hooks (cmd's member hook,
// daemon.Config.WrapDevice).
type WrapFunc = func(path string, d engine.Device) (engine.Device, error)

// Wrapper returns a hook that wraps the members spec names in fault
// devices and returns the others as they are. spec is parsed at each
// call, so that a bad one fails the open that uses it.
func Wrapper(spec string) WrapFunc {
	return func(path string, d engine.Device) (engine.Device, error) {
		return Wrap(spec, path, d)
	}
}

// FromEnv is the hook of the test build: Wrapper of the value of Env at
// the time of the call; its errors name Env.
func FromEnv(path string, d engine.Device) (engine.Device, error) {
	dev, err := Wrap(os.Getenv(Env), path, d)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Env, err)
	}
	return dev, nil
}

// Wrap returns the device to give the engine for the member at path: d
// itself, or d wrapped in an engine.FaultDevice when spec asks for faults
// on that member.
func Wrap(spec, path string, d engine.Device) (engine.Device, error) {
	if spec == "" {
		return d, nil
	}
	specs, err := Parse(spec)
	if err != nil {
		return nil, err
	}
	key := cleanPath(path)
	for _, sp := range specs {
		if cleanPath(sp.Path) != key {
			continue
		}
		fd := engine.NewFaultDevice(d, sp.Seed)
		rules := sp.Rules()
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
		devs.Store(key, fd)
		return fd, nil
	}
	return d, nil
}
