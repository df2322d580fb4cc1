package serve

import (
	"os"
	"syscall"
)

// stateOf returns the state of the open file f.
func stateOf(f *os.File) (contentState, error) {
	var st syscall.Stat_t
	rc, err := f.SyscallConn()
	if err != nil {
		return contentState{}, err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.Fstat(int(fd), &st) }); err != nil {
		return contentState{}, err
	}
	if serr != nil {
		return contentState{}, serr
	}
	return contentState{
		dev: uint64(st.Dev), ino: st.Ino, size: st.Size,
		mtimeNs: st.Mtim.Nano(), ctimeNs: st.Ctim.Nano(),
	}, nil
}
