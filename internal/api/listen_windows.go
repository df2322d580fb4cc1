package api

import (
	"fmt"
	"io/fs"
	"net"
)

// listenPrivate binds an AF_UNIX socket (Windows 10 1803 and later) at path. Windows has no
// mode bits: the socket is as private as its directory, the user's own local application
// data folder, whose ACL admits only the user, SYSTEM and administrators.
func listenPrivate(path string) (net.Listener, error) {
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	return l, nil
}

// fileOwner: Windows files have an owner SID, not a uid; the directory's ACL is what guards it.
func fileOwner(fs.FileInfo) (uid int, ok bool) { return 0, false }

// isSocket: Go reports an AF_UNIX socket file on Windows as a socket or, on older releases,
// as an irregular file (a reparse point it does not know).
func isSocket(fi fs.FileInfo) bool {
	return fi.Mode().Type() == fs.ModeSocket || fi.Mode().Type() == fs.ModeIrregular
}
