package node

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// detach lazily unmounts dir, as "fusermount3 -u -z" does: the mount leaves the tree at once
// and goes away when its last user does. Root does it directly; others through the setuid
// helper.
func detach(dir string) error {
	if err := syscall.Unmount(dir, syscall.MNT_DETACH); err == nil {
		return nil
	}
	for _, helper := range []string{"fusermount3", "fusermount"} {
		bin, err := exec.LookPath(helper)
		if err != nil {
			continue
		}
		out, err := exec.Command(bin, "-u", "-z", dir).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s -u -z: %v: %s", helper, err, bytes.TrimSpace(out))
		}
		return nil
	}
	return errors.New("fusermount3 not found: install fuse3")
}

// mountType returns the file system type of the mount whose mount point is dir, as
// /proc/self/mountinfo names it ("fuse.peerfs"), or "" when dir is no mount point.
func mountType(dir string) string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	fstype := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || unescapeMountinfo(fields[4]) != dir {
			continue
		}
		for i := 5; i+1 < len(fields); i++ {
			if fields[i] == "-" {
				fstype = fields[i+1] // the last entry is the one on top
				break
			}
		}
	}
	return fstype
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 for a space) in mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
