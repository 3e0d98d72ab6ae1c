//go:build linux

package ioctl

import (
	"path/filepath"
	"sync"
)

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
// process: path is the device or file path as opened (also matched after
// making it absolute and after resolving symbolic links); an override for
// the path wins over "*". Passing a zero Override removes it. Nothing in
// the product calls it: tests do, and the test build of mdtool (build tag
// mdtool_testhooks) installs overrides from its environment with it
// (internal/testkit/geometry).
func SetOverride(path string, o Override) {
	overrideMu.Lock()
	defer overrideMu.Unlock()
	if o == (Override{}) {
		delete(overrides, path)
		return
	}
	overrides[path] = o
}

// overrideFor finds the override for a path: an exact (or
// symlink-resolved) path before "*".
func overrideFor(path string) (Override, bool) {
	candidates := []string{path}
	if abs, err := filepath.Abs(path); err == nil && abs != path {
		candidates = append(candidates, abs)
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		candidates = append(candidates, real)
	}
	candidates = append(candidates, "*")

	overrideMu.Lock()
	defer overrideMu.Unlock()
	for _, c := range candidates {
		if o, ok := overrides[c]; ok {
			return o, true
		}
	}
	return Override{}, false
}
