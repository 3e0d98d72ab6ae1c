package nbdclient

import "syscall"

var errEIO = syscall.EIO
