package share

import "syscall"

// oNoatime opens a file without updating its access time (Linux O_NOATIME).
const oNoatime = syscall.O_NOATIME
