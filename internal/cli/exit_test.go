package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/identity"
)

func TestClassify(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("doing something: %w", err) }
	cases := []struct {
		name     string
		err      error
		wantCode string
		wantExit int
	}{
		{"nil", nil, "", ExitOK},
		{"plain", errors.New("boom"), api.CodeInternal, ExitError},
		{"usage", usageErrorf("bad flag"), api.CodeInvalid, ExitUsage},
		{"api internal", api.Errorf(api.CodeInternal, "x"), api.CodeInternal, ExitError},
		{"api invalid", api.Errorf(api.CodeInvalid, "x"), api.CodeInvalid, ExitUsage},
		{"api unreachable", wrap(api.Errorf(api.CodePeerUnreachable, "x")), api.CodePeerUnreachable, ExitUnreachable},
		{"api untrusted", api.Errorf(api.CodeUntrusted, "x"), api.CodeUntrusted, ExitUntrusted},
		{"api unknown peer", api.Errorf(api.CodeUnknownPeer, "x"), api.CodeUnknownPeer, ExitUntrusted},
		{"api unknown share", api.Errorf(api.CodeUnknownShare, "x"), api.CodeUnknownShare, ExitNotFound},
		{"api not found", api.Errorf(api.CodeNotFound, "x"), api.CodeNotFound, ExitNotFound},
		{"api permission", api.Errorf(api.CodePermission, "x"), api.CodePermission, ExitPermission},
		{"api path refused", api.Errorf(api.CodePathRefused, "x"), api.CodePathRefused, ExitPathRefused},
		{"api disk full", api.Errorf(api.CodeDiskFull, "x"), api.CodeDiskFull, ExitDiskFull},
		{"api integrity", api.Errorf(api.CodeIntegrity, "x"), api.CodeIntegrity, ExitIntegrity},
		{"api canceled", api.Errorf(api.CodeCanceled, "x"), api.CodeCanceled, ExitInterrupted},
		{"api future code", api.Errorf("quota_exceeded", "x"), "quota_exceeded", ExitError},
		{"no daemon", wrap(api.ErrNoDaemon), codeNoDaemon, ExitNoDaemon},
		{"no identity", wrap(identity.ErrNoIdentity), codeNotInitialized, ExitNotInitialized},
		{"no config", wrap(config.ErrNotInitialized), codeNotInitialized, ExitNotInitialized},
		{"identity exists", wrap(identity.ErrExists), codeAlreadyInit, ExitError},
		{"invalid config", wrap(config.ErrInvalid), api.CodeInvalid, ExitUsage},
		{"canceled", wrap(context.Canceled), api.CodeCanceled, ExitInterrupted},
		{"local not found", &fs.PathError{Op: "stat", Path: "/x", Err: syscall.ENOENT}, api.CodeNotFound, ExitNotFound},
		{"local permission", &fs.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}, api.CodePermission, ExitPermission},
		{"local disk full", &fs.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}, api.CodeDiskFull, ExitDiskFull},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, exit := classify(tc.err)
			if code != tc.wantCode || exit != tc.wantExit {
				t.Errorf("got (%q, %d), want (%q, %d)", code, exit, tc.wantCode, tc.wantExit)
			}
			if ExitCode(tc.err) != tc.wantExit {
				t.Errorf("ExitCode = %d", ExitCode(tc.err))
			}
		})
	}
}

// TestEveryAPICodeMapped keeps apiCodeExit complete as api grows.
func TestEveryAPICodeMapped(t *testing.T) {
	for _, code := range []string{api.CodeInternal, api.CodeInvalid, api.CodeUnknownPeer, api.CodePeerUnreachable,
		api.CodeUntrusted, api.CodeUnknownShare, api.CodeNotFound, api.CodePermission, api.CodePathRefused,
		api.CodeDiskFull, api.CodeIntegrity, api.CodeCanceled} {
		if _, ok := apiCodeExit[code]; !ok {
			t.Errorf("api code %q has no exit code", code)
		}
	}
}

// TestExitTableInDocs checks that docs/CLI.md tables every exit code with its meaning.
func TestExitTableInDocs(t *testing.T) {
	b, err := os.ReadFile("../../docs/CLI.md")
	if err != nil {
		t.Skipf("docs/CLI.md not readable: %v", err)
	}
	for _, e := range exitTable {
		re := regexp.MustCompile(`(?m)^\| ` + strconv.Itoa(e.Code) + ` \| ` + regexp.QuoteMeta(e.Meaning) + ` \|`)
		if !re.Match(b) {
			t.Errorf("docs/CLI.md has no row \"| %d | %s |\"", e.Code, e.Meaning)
		}
	}
}
