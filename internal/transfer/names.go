package transfer

import (
	"fmt"
	"strings"

	"github.com/peerfs/peerfs/internal/wire"
)

// nameGuard refuses, in one pulled directory, the names this computer cannot hold as the owner
// spells them, so that a file is never written under another name or over another file: on
// Windows (names_windows.go) a name Windows refuses or changes (wire.WindowsNameError) and a
// name differing only in case from one already taken in the same directory ("Readme" after
// "README" would overwrite it on NTFS). Elsewhere it refuses nothing (names_other.go).
type nameGuard struct {
	dir    string
	folded map[string]string // case-folded name -> the name that took it
}

func newNameGuard(dir string) *nameGuard {
	return &nameGuard{dir: dir, folded: make(map[string]string)}
}

// windowsRefusal returns why a Windows puller refuses the entry name of g's directory, or nil,
// and takes the name.
func (g *nameGuard) windowsRefusal(name string) error {
	path := wire.Join(g.dir, name)
	if err := wire.WindowsNameError(name); err != nil {
		return fmt.Errorf("not pulling %q: %v on the owner's side, then pull again", path, err)
	}
	key := strings.ToLower(name)
	if first, ok := g.folded[key]; ok {
		return fmt.Errorf("not pulling %q: it differs only in case from %q, which Windows folders do not tell apart: rename one on the owner's side, then pull again",
			path, wire.Join(g.dir, first))
	}
	g.folded[key] = name
	return nil
}
