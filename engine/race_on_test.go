//go:build race

package engine

// raceEnabled: the race detector slows everything ~10x; the heaviest
// tests do less work under it.
const raceEnabled = true
