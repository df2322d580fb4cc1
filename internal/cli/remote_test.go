package cli

import (
	"strings"
	"testing"
)

func TestParseRemote(t *testing.T) {
	cases := []struct {
		in        string
		needShare bool
		want      Remote
		exit      int    // 0: no error
		match     string // part of the error message
	}{
		{"laptop:projects/src/main.go", true, Remote{"laptop", "projects", "src/main.go"}, 0, ""},
		{"laptop:projects", true, Remote{"laptop", "projects", ""}, 0, ""},
		{"laptop:projects/", true, Remote{"laptop", "projects", ""}, 0, ""},
		{"laptop:/projects//a/./b/", true, Remote{"laptop", "projects", "a/b"}, 0, ""},
		{"laptop:projects///abs", true, Remote{"laptop", "projects", "abs"}, 0, ""},
		{"laptop:projects/.", true, Remote{"laptop", "projects", ""}, 0, ""},
		{"laptop:projects/a b/c:d", true, Remote{"laptop", "projects", "a b/c:d"}, 0, ""},
		{"my-box.lan_2:Photos.2024/x", true, Remote{"my-box.lan_2", "Photos.2024", "x"}, 0, ""},
		{"laptop:", false, Remote{Peer: "laptop"}, 0, ""},
		{"laptop", false, Remote{Peer: "laptop"}, 0, ""},
		{"laptop:projects/a", false, Remote{"laptop", "projects", "a"}, 0, ""},

		{"laptop", true, Remote{}, ExitUsage, "PEER:SHARE"},
		{"laptop:", true, Remote{}, ExitUsage, "names no share"},
		{"laptop:/", true, Remote{}, ExitUsage, "names no share"},
		{":projects", true, Remote{}, ExitUsage, "peer name"},
		{"Laptop:projects", true, Remote{}, ExitUsage, "lower-case"},
		{"./file", false, Remote{}, ExitUsage, "peer name"},
		{"laptop:.hidden/x", true, Remote{}, ExitUsage, "not start with '.'"},
		{"laptop:pro*jects", true, Remote{}, ExitUsage, "letters"},
		{"laptop:projects/../etc", true, Remote{}, ExitPathRefused, `".."`},
		{"laptop:projects/a/..", true, Remote{}, ExitPathRefused, `".."`},
		{"laptop:projects/a/../b", true, Remote{}, ExitPathRefused, `".."`},
		{"laptop:projects/a\x00b", true, Remote{}, ExitPathRefused, "NUL"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseRemote(tc.in, tc.needShare)
			if tc.exit == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if got != tc.want {
					t.Errorf("got %+v, want %+v", got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %+v, want an error", got)
			}
			if ExitCode(err) != tc.exit {
				t.Errorf("exit %d, want %d (%v)", ExitCode(err), tc.exit, err)
			}
			if !strings.Contains(err.Error(), tc.match) {
				t.Errorf("error %q does not mention %q", err, tc.match)
			}
		})
	}
}

func TestRemoteString(t *testing.T) {
	cases := []struct {
		r    Remote
		want string
	}{
		{Remote{Peer: "p"}, "p:"},
		{Remote{Peer: "p", Share: "s"}, "p:s"},
		{Remote{Peer: "p", Share: "s", Path: "a/b"}, "p:s/a/b"},
	}
	for _, tc := range cases {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.r, got, tc.want)
		}
		// The string form parses back to the same remote.
		if back, err := ParseRemote(tc.want, false); err != nil || back != tc.r {
			t.Errorf("ParseRemote(%q) = %+v, %v", tc.want, back, err)
		}
	}
}
