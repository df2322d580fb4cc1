package wire

import (
	"fmt"
	"strings"
)

// WindowsNameError says why Windows cannot hold name (one path component) as a file name, or
// returns nil. Windows refuses some names and silently changes others, so a file created under
// such a name on a Windows owner would not be the file a peer asked for:
//
//   - device names: CON, PRN, AUX, NUL, CONIN$, CONOUT$, COM0-9 and LPT0-9 (and COM¹²³,
//     LPT¹²³), in any case and with any extension ("nul.txt", "Com1.tar.gz") and with spaces
//     before the extension ("CON .txt"): they open the device, not a file;
//   - names ending in a dot or a space: Windows drops them, so "a." is "a";
//   - the characters < > : " | ? * \ and the control characters 1-31: refused, or (':') taken
//     as an NTFS stream name.
//
// The rules are those of Microsoft's "Naming Files, Paths, and Namespaces". The check is
// portable so that it is tested everywhere; only Windows builds call it.
func WindowsNameError(name string) error {
	for _, r := range name {
		switch {
		case r < 32:
			return fmt.Errorf("%q holds the control character %#02x, which Windows does not allow in file names: rename it", name, r)
		case strings.ContainsRune(`<>:"|?*\`, r):
			return fmt.Errorf(`%q holds %q, which Windows does not allow in file names (< > : " | ? * \): rename it`, name, r)
		}
	}
	if strings.HasSuffix(name, ".") || strings.HasSuffix(name, " ") {
		return fmt.Errorf("%q ends in a dot or a space, which Windows drops from file names: rename it", name)
	}
	base, _, _ := strings.Cut(name, ".")
	if isWindowsDevice(strings.TrimRight(base, " ")) {
		return fmt.Errorf("%q is a device name on Windows (CON, PRN, AUX, NUL, COM0-9, LPT0-9, with any extension): rename it", name)
	}
	return nil
}

// isWindowsDevice reports whether base (a name without its extension) is a reserved device name.
func isWindowsDevice(base string) bool {
	switch strings.ToUpper(base) {
	case "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$":
		return true
	}
	if len(base) < 4 {
		return false
	}
	prefix := strings.ToUpper(base[:3])
	if prefix != "COM" && prefix != "LPT" {
		return false
	}
	switch base[3:] {
	case "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "¹", "²", "³":
		return true
	}
	return false
}
