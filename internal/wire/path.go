package wire

import (
	"errors"
	"fmt"
	"strings"
)

// ErrPathRefused is wrapped by every path validation failure. A share refuses such a path with
// ErrnoPathRefused; a decoder treats it as a malformed message.
var ErrPathRefused = errors.New("path refused")

// CheckPath validates a share-relative path as it travels on the wire: "" names the share root;
// otherwise components separated by single slashes, none empty, "." or "..", no NUL byte, no
// leading slash, each component at most MaxNameLen bytes and the whole at most MaxPathLen.
// Symlinks are not judged here: the share resolves paths through os.Root, which refuses links
// that lead outside.
func CheckPath(p string) error {
	if p == "" {
		return nil
	}
	if len(p) > MaxPathLen {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrPathRefused, len(p), MaxPathLen)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return fmt.Errorf("%w: contains a NUL byte", ErrPathRefused)
	}
	if p[0] == '/' {
		return fmt.Errorf("%w: %q is absolute", ErrPathRefused, p)
	}
	for rest := p; ; {
		comp, tail, more := strings.Cut(rest, "/")
		switch {
		case comp == "":
			return fmt.Errorf("%w: %q has an empty component", ErrPathRefused, p)
		case comp == "." || comp == "..":
			return fmt.Errorf("%w: %q has a %q component", ErrPathRefused, p, comp)
		case len(comp) > MaxNameLen:
			return fmt.Errorf("%w: a component of %d bytes, limit %d", ErrPathRefused, len(comp), MaxNameLen)
		}
		if !more {
			return nil
		}
		rest = tail
	}
}

// CheckShareName validates a share name: 1 to MaxShareNameLen bytes of letters, digits, '-', '_'
// and '.', not starting with '.'.
func CheckShareName(s string) error {
	if s == "" || len(s) > MaxShareNameLen || s[0] == '.' {
		return fmt.Errorf("%w: share name %q must be 1-%d characters and not start with '.'", ErrMalformed, s, MaxShareNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%w: share name %q may hold only letters, digits, '-', '_' and '.'", ErrMalformed, s)
		}
	}
	return nil
}

// Join joins a share-relative directory and a name.
func Join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}
