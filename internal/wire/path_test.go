package wire

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckPath(t *testing.T) {
	name255 := strings.Repeat("n", MaxNameLen)
	// 2047 components "a/" and a last "ab": exactly MaxPathLen bytes.
	exact := strings.Repeat("a/", MaxPathLen/2-1) + "ab"
	good := []string{
		"",
		"a",
		"a/b/c",
		"...",
		"..a",
		"a..",
		".hidden",
		"a b/c\td",
		"dir/.git/config",
		"\xff\xfe", // bytes, not UTF-8: paths are opaque bytes
		"back\\slash",
		name255,
		name255 + "/" + name255,
		exact,
	}
	for _, p := range good {
		if err := CheckPath(p); err != nil {
			t.Errorf("CheckPath(%.40q…, %d bytes) = %v, want nil", p, len(p), err)
		}
	}
	if len(exact) != MaxPathLen {
		t.Fatalf("test path is %d bytes, want %d", len(exact), MaxPathLen)
	}
	bad := []string{
		".",
		"..",
		"../x",
		"a/..",
		"a/../b",
		"a/./b",
		"./a",
		"/",
		"/etc/passwd",
		"a//b",
		"a/",
		"//",
		"a\x00b",
		"\x00",
		"a/b\x00",
		name255 + "n",
		"a/" + name255 + "n" + "/b",
		exact + "a",
		strings.Repeat("a", MaxPathLen+1),
	}
	for _, p := range bad {
		err := CheckPath(p)
		if err == nil {
			t.Errorf("CheckPath(%.40q…, %d bytes) = nil, want refusal", p, len(p))
			continue
		}
		if !errors.Is(err, ErrPathRefused) {
			t.Errorf("CheckPath(%.40q…) = %v, not ErrPathRefused", p, err)
		}
	}
}

func TestCheckShareName(t *testing.T) {
	good := []string{"a", "projects", "photos.2024", "my-share_2", "A.b-C_d", "x.", strings.Repeat("s", MaxShareNameLen)}
	for _, s := range good {
		if err := CheckShareName(s); err != nil {
			t.Errorf("CheckShareName(%q) = %v, want nil", s, err)
		}
	}
	bad := []string{"", ".", "..", ".hidden", "a/b", "a b", "a\x00", "é", "a:b", "a\\b", "*", strings.Repeat("s", MaxShareNameLen+1)}
	for _, s := range bad {
		err := CheckShareName(s)
		if err == nil {
			t.Errorf("CheckShareName(%q) = nil, want refusal", s)
			continue
		}
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("CheckShareName(%q) = %v, not ErrMalformed", s, err)
		}
	}
}

func TestJoin(t *testing.T) {
	cases := []struct{ dir, name, want string }{
		{"", "a", "a"},
		{"a", "b", "a/b"},
		{"a/b", "c.txt", "a/b/c.txt"},
	}
	for _, tc := range cases {
		if got := Join(tc.dir, tc.name); got != tc.want {
			t.Errorf("Join(%q, %q) = %q, want %q", tc.dir, tc.name, got, tc.want)
		}
		if err := CheckPath(Join(tc.dir, tc.name)); err != nil {
			t.Errorf("Join(%q, %q) is not a valid path: %v", tc.dir, tc.name, err)
		}
	}
}
