package plan

import (
	"fmt"
	"strings"
)

// Error is a refusal to create, worded as mdadm 4.2 words it where mdadm
// has a message (without the "mdadm: " prefix). Lines holds one message
// per line mdadm would print; Status is the exit status mdadm uses for it
// (2 for bad arguments rejected while parsing the command line, 1 for
// refusals inside Create).
type Error struct {
	Status int
	Lines  []string
}

func (e *Error) Error() string { return strings.Join(e.Lines, "\n") }

func errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Lines: []string{fmt.Sprintf(format, args...)}}
}
