// Command mdtool is an mdadm-compatible md RAID administration tool and
// userspace RAID engine.
package main

import (
	"os"

	"mdtool/cmd"
)

func main() {
	os.Exit(cmd.Main(os.Args[1:], cmd.StdEnv()))
}
