package share

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/peerfs/peerfs/internal/sharetest"
	"github.com/peerfs/peerfs/internal/wire"
)

// The fixture's pieces come from sharetest, which the server's tests share.
var (
	oldTime      = sharetest.OldTime
	mkdirs       = sharetest.Mkdirs
	writeFile    = sharetest.WriteFile
	snapshot     = sharetest.Snapshot
	sameSnapshot = sharetest.SameSnapshot
)

const canaryContent = sharetest.CanaryContent

type fileState = sharetest.FileState

// fixture is a sharetest.Tree served as the share "test".
type fixture struct {
	base, shareDir, outside string
	s                       *Share
}

func newFixture(t testing.TB, readOnly bool) *fixture {
	t.Helper()
	tr := sharetest.NewTree(t)
	fx := &fixture{base: tr.Base, shareDir: tr.Share, outside: tr.Outside}
	s, err := Open("test", fx.shareDir, readOnly)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	fx.s = s
	return fx
}

// wantCode fails unless Errno(err) is want (0 meaning success).
func wantCode(t testing.TB, what string, err error, want wire.Errno) {
	t.Helper()
	if got := Errno(err); got != want {
		t.Errorf("%s: Errno = %v, want %v (err: %v)", what, got, want, err)
	}
	if want == wire.ErrnoPathRefused && !errors.Is(err, ErrPathRefused) {
		t.Errorf("%s: error does not match ErrPathRefused: %v", what, err)
	}
	if err != nil {
		checkMessage(t, what, err)
	}
}

// checkMessage fails if the peer-facing text is not one short line free of the owner's
// absolute paths.
func checkMessage(t testing.TB, what string, err error) {
	t.Helper()
	msg := Message(err)
	switch {
	case msg == "":
		t.Errorf("%s: empty Message for %v", what, err)
	case len(msg) > wire.MaxMessageLen:
		t.Errorf("%s: Message is %d bytes", what, len(msg))
	case strings.ContainsAny(msg, "\n\r"):
		t.Errorf("%s: Message has a line break: %q", what, msg)
	case strings.Contains(msg, os.TempDir()):
		t.Errorf("%s: Message reveals an absolute path: %q", what, msg)
	}
}

// setAttr calls SetAttr with the fields a direct transfer sets and keeps only the error.
func setAttr(s *Share, path string, valid, mode uint32, mtime time.Time) error {
	_, err := s.SetAttr(wire.SetAttrReq{Path: path, Valid: valid, Mode: mode, MtimeNs: mtime.UnixNano()})
	return err
}

// setAttrEntry is Share.SetAttr's Entry after the change.
func setAttrEntry(s *Share, req wire.SetAttrReq) (wire.Entry, error) {
	resp, err := s.SetAttr(req)
	return resp.Entry, err
}
