//go:build linux

// Package geometry installs ioctl geometry overrides from a textual
// specification. It is test support only: the test build of mdtool (build
// tag mdtool_testhooks, cmd/testhooks_env.go) calls [FromEnv] once at
// start; in-process tests call ioctl.SetOverride directly. The product
// never links this package.
package geometry

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"mdtool/ioctl"
)

// Env is the environment variable the test build of mdtool reads: entries
// separated by ';', each "PATH:key=value,key=value,...", where PATH is the
// device or file path as opened (also matched after resolving symbolic
// links) or "*" for every path, and the keys are
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
// the exact path wins over "*". Nothing in the product reads it.
const Env = "MDTOOL_GEOMETRY_OVERRIDE"

// Install parses s and installs its overrides with ioctl.SetOverride.
// Nothing is installed when s is malformed.
func Install(s string) error {
	m, err := Parse(s)
	if err != nil {
		return err
	}
	for path, o := range m {
		ioctl.SetOverride(path, o)
	}
	return nil
}

// FromEnv installs the overrides Env holds, if any.
func FromEnv() error {
	return Install(os.Getenv(Env))
}

// Parse parses the Env syntax into a map from path to override.
func Parse(s string) (map[string]ioctl.Override, error) {
	out := map[string]ioctl.Override{}
	for _, entry := range strings.Split(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		i := strings.LastIndexByte(entry, ':')
		if i <= 0 {
			return nil, fmt.Errorf("%s: entry %q: want PATH:key=value,...", Env, entry)
		}
		path, keys := entry[:i], entry[i+1:]
		var o ioctl.Override
		for _, kv := range strings.Split(keys, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok {
				return nil, fmt.Errorf("%s: entry %q: %q is not key=value", Env, entry, kv)
			}
			n, err := strconv.ParseUint(v, 0, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: entry %q: bad number for %s: %q", Env, entry, k, v)
			}
			u32 := func() (*uint32, error) {
				if n > 1<<31 {
					return nil, fmt.Errorf("%s: entry %q: %s=%d is too large", Env, entry, k, n)
				}
				x := uint32(n)
				return &x, nil
			}
			blockSize := func() (*uint32, error) {
				if n < 512 || n > 1<<20 || n&(n-1) != 0 {
					return nil, fmt.Errorf("%s: entry %q: %s=%d is not a power of two between 512 and 1 MiB", Env, entry, k, n)
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
					return nil, fmt.Errorf("%s: entry %q: rotational must be 0 or 1", Env, entry)
				}
				b := n == 1
				o.Rotational = &b
			default:
				return nil, fmt.Errorf("%s: entry %q: unknown key %q (want size, lbs, pbs, io_min, io_opt, rotational)", Env, entry, k)
			}
			if err != nil {
				return nil, err
			}
		}
		out[path] = o
	}
	return out, nil
}
