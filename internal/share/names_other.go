//go:build !windows

package share

// checkNewName: Unix file systems hold any name CheckPath allows. A case-insensitive volume
// (APFS by default, a casefolded ext4 directory) would merge names differing in case here
// too; it is checked on Windows only, where such volumes are the rule (names_windows.go).
func (s *Share) checkNewName(op, path, renamedFrom string) error { return nil }
