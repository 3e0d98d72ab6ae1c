//go:build !unix

package parity

import "time"

func processCPU() time.Duration { return 0 }
