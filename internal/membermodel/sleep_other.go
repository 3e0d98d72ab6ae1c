//go:build !linux

package membermodel

import "time"

func sleep(d time.Duration) { time.Sleep(d) }
