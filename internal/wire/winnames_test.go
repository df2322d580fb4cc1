package wire

import (
	"strings"
	"testing"
)

func TestWindowsNameError(t *testing.T) {
	for _, tc := range []struct {
		name string
		why  string // a word the refusal must hold; "" for a name Windows holds
	}{
		{"readme.txt", ""},
		{"CONSOLE", ""},
		{"console.log", ""},
		{"COM10", ""},
		{"LPT", ""},
		{"nulls", ""},
		{".hidden", ""},
		{"a.b.c", ""},
		{"é — ünïcode", ""},
		{"CON", "device"},
		{"con", "device"},
		{"Nul.txt", "device"},
		{"aux.tar.gz", "device"},
		{"PRN", "device"},
		{"COM1", "device"},
		{"com9.log", "device"},
		{"LPT0", "device"},
		{"COM¹", "device"},
		{"lpt³.txt", "device"},
		{"CONIN$", "device"},
		{"CON .txt", "device"},
		{"a.", "dot or a space"},
		{"a ", "dot or a space"},
		{"...", "dot or a space"},
		{"a:b", `':'`},
		{"a<b", `'<'`},
		{"a>b", `'>'`},
		{`a"b`, `'"'`},
		{"a|b", `'|'`},
		{"a?b", `'?'`},
		{"a*b", `'*'`},
		{`a\b`, `'\\'`},
		{"a\x01b", "control character 0x01"},
		{"tab\there", "control character 0x09"},
	} {
		err := WindowsNameError(tc.name)
		switch {
		case tc.why == "" && err != nil:
			t.Errorf("%q refused: %v", tc.name, err)
		case tc.why != "" && err == nil:
			t.Errorf("%q accepted, want a refusal (%s)", tc.name, tc.why)
		case err != nil && (!strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), "rename it")):
			t.Errorf("%q: %q does not say %q and what to do", tc.name, err, tc.why)
		}
	}
}
