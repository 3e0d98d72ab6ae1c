// Package layering holds only tests. TestLayering checks, with `go list`,
// that every package of the module imports only packages of lower rooms
// (or of its own internal/X room) and that no production package imports a
// test harness. The rank table is in layering_test.go; a new package must
// be placed there. TestNoGiantFunctions fails for a production function
// over 150 lines that its list of known giants does not name.
package layering
