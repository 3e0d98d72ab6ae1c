package engine

import (
	"time"
)

// writeIntent is what the engine needs from the write-intent bitmap
// runtime (package engine/wib, contract in notes/engine-contract.md).
// Sectors are "sync space" sectors: component sectors for raid1/4/5/6,
// array sectors for raid10.
type writeIntent interface {
	StartWrite(sector, count uint64) error
	EndWrite(sector, count uint64, ok bool)
	Tick(now time.Time) error
	SetEvents(events uint64, degraded bool) error
	Dirty(sector uint64) bool
}

// noBitmap is the write intent of an array without a bitmap.
type noBitmap struct{}

func (noBitmap) StartWrite(sector, count uint64) error        { return nil }
func (noBitmap) EndWrite(sector, count uint64, ok bool)       {}
func (noBitmap) Tick(now time.Time) error                     { return nil }
func (noBitmap) SetEvents(events uint64, degraded bool) error { return nil }
func (noBitmap) Dirty(sector uint64) bool                     { return true }
