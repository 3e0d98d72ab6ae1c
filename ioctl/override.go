//go:build linux

package ioctl

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// EnvOverride is the environment variable holding geometry overrides:
// entries separated by ';', each "PATH:key=value,key=value,...", where
// PATH is the device or file path as opened (also matched after resolving
// symbolic links) or "*" for every path, and the keys are
//
//	size        device size in bytes
//	lbs         logical block size (power of two, >= 512)
//	pbs         physical block size (power of two, >= 512)
//	io_min      minimum I/O size
//	io_opt      optimal I/O size
//	rotational  0 or 1
//
// Example: MDTOOL_GEOMETRY_OVERRIDE="/dev/sdb:lbs=4096,pbs=4096,io_opt=1048576".
// The last ':' in an entry separates the path from the keys. An entry for
// the exact path wins over "*".
const EnvOverride = "MDTOOL_GEOMETRY_OVERRIDE"

// Override replaces Geometry fields; nil fields are left as measured.
type Override struct {
	Size              *uint64
	LogicalBlockSize  *uint32
	PhysicalBlockSize *uint32
	IOMin             *uint32
	IOOpt             *uint32
	Rotational        *bool
}

// Apply returns g with the override's fields replaced.
func (o Override) Apply(g Geometry) Geometry {
	if o.Size != nil {
		g.Size = *o.Size
	}
	if o.LogicalBlockSize != nil {
		g.LogicalBlockSize = *o.LogicalBlockSize
	}
	if o.PhysicalBlockSize != nil {
		g.PhysicalBlockSize = *o.PhysicalBlockSize
	}
	if o.IOMin != nil {
		g.IOMin = *o.IOMin
	}
	if o.IOOpt != nil {
		g.IOOpt = *o.IOOpt
	}
	if o.Rotational != nil {
		g.Rotational = *o.Rotational
	}
	return g
}

var (
	overrideMu sync.Mutex
	overrides  = map[string]Override{}
)

// SetOverride installs an override for path ("*" = every path) for this
// process; it takes precedence over the environment. Passing a zero
// Override removes it.
func SetOverride(path string, o Override) {
	overrideMu.Lock()
	defer overrideMu.Unlock()
	if o == (Override{}) {
		delete(overrides, path)
		return
	}
	overrides[path] = o
}

// ParseOverrides parses the EnvOverride syntax into a map from path to
// override.
func ParseOverrides(s string) (map[string]Override, error) {
	out := map[string]Override{}
	for _, entry := range strings.Split(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		i := strings.LastIndexByte(entry, ':')
		if i <= 0 {
			return nil, fmt.Errorf("%s: entry %q: want PATH:key=value,...", EnvOverride, entry)
		}
		path, keys := entry[:i], entry[i+1:]
		var o Override
		for _, kv := range strings.Split(keys, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok {
				return nil, fmt.Errorf("%s: entry %q: %q is not key=value", EnvOverride, entry, kv)
			}
			n, err := strconv.ParseUint(v, 0, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: entry %q: bad number for %s: %q", EnvOverride, entry, k, v)
			}
			u32 := func() (*uint32, error) {
				if n > 1<<31 {
					return nil, fmt.Errorf("%s: entry %q: %s=%d is too large", EnvOverride, entry, k, n)
				}
				x := uint32(n)
				return &x, nil
			}
			blockSize := func() (*uint32, error) {
				if n < 512 || n > 1<<20 || n&(n-1) != 0 {
					return nil, fmt.Errorf("%s: entry %q: %s=%d is not a power of two between 512 and 1 MiB", EnvOverride, entry, k, n)
				}
				return u32()
			}
			switch k {
			case "size":
				x := n
				o.Size = &x
			case "lbs":
				o.LogicalBlockSize, err = blockSize()
			case "pbs":
				o.PhysicalBlockSize, err = blockSize()
			case "io_min":
				o.IOMin, err = u32()
			case "io_opt":
				o.IOOpt, err = u32()
			case "rotational":
				if n > 1 {
					return nil, fmt.Errorf("%s: entry %q: rotational must be 0 or 1", EnvOverride, entry)
				}
				b := n == 1
				o.Rotational = &b
			default:
				return nil, fmt.Errorf("%s: entry %q: unknown key %q (want size, lbs, pbs, io_min, io_opt, rotational)", EnvOverride, entry, k)
			}
			if err != nil {
				return nil, err
			}
		}
		out[path] = o
	}
	return out, nil
}

// overrideFor finds the override for a path: programmatic ones first,
// then the environment; an exact (or symlink-resolved) path before "*".
func overrideFor(path string) (Override, bool, error) {
	candidates := []string{path}
	if abs, err := filepath.Abs(path); err == nil && abs != path {
		candidates = append(candidates, abs)
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		candidates = append(candidates, real)
	}
	candidates = append(candidates, "*")

	overrideMu.Lock()
	prog := make(map[string]Override, len(overrides))
	for k, v := range overrides {
		prog[k] = v
	}
	overrideMu.Unlock()

	env, err := ParseOverrides(os.Getenv(EnvOverride))
	if err != nil {
		return Override{}, false, err
	}
	for _, c := range candidates {
		if o, ok := prog[c]; ok {
			return o, true, nil
		}
		if o, ok := env[c]; ok {
			return o, true, nil
		}
	}
	return Override{}, false, nil
}
