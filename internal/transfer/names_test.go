package transfer

import (
	"strings"
	"testing"
)

// TestWindowsRefusal runs the check a Windows puller makes on each entry of a pulled directory
// (names.go), here on Linux: names Windows cannot hold, and a second spelling of a name already
// taken in the directory, are refused with the path and what to do; others pass.
func TestWindowsRefusal(t *testing.T) {
	g := newNameGuard("docs")
	for _, tc := range []struct {
		name string
		says string // "" to pass
	}{
		{"README", ""},
		{"notes.txt", ""},
		{"Readme", `differs only in case from "docs/README"`},
		{"readme", `differs only in case from "docs/README"`},
		{"NOTES.TXT", `differs only in case from "docs/notes.txt"`},
		{"aux.c", "device name"},
		{"what?", "does not allow"},
		{"end.", "dot or a space"},
		{"other", ""},
	} {
		err := g.windowsRefusal(tc.name)
		switch {
		case tc.says == "" && err != nil:
			t.Errorf("%q refused: %v", tc.name, err)
		case tc.says != "" && err == nil:
			t.Errorf("%q pulled, want a refusal (%s)", tc.name, tc.says)
		case err != nil && (!strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), `"docs/`+tc.name+`"`) ||
			!strings.Contains(err.Error(), "pull again")):
			t.Errorf("%q: %q does not name the file, say %q and what to do", tc.name, err, tc.says)
		}
	}
}
