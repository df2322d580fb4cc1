//go:build !linux

package node

import "errors"

// detach would lazily unmount dir; only Linux has the flag and the helper for it.
func detach(dir string) error {
	return errors.New("lazy unmount is not supported on this system: unmount it by hand")
}

// mountType returns "": there is no mountinfo to read outside Linux.
func mountType(dir string) string { return "" }
