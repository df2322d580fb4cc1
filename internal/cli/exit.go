package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
	"github.com/peerfs/peerfs/internal/identity"
)

// Exit codes: a contract with scripts, tabled in docs/CLI.md. Codes are never reused for
// another meaning; scripts must treat an unknown non-zero code as failure.
const (
	ExitOK             = 0
	ExitError          = 1 // any other error, including bugs
	ExitUsage          = 2 // invalid arguments or flags
	ExitNoDaemon       = 3
	ExitUnreachable    = 4
	ExitUntrusted      = 5 // untrusted or unknown peer
	ExitNotFound       = 6 // path not found or unknown share
	ExitPermission     = 7 // permission denied, including a read-only share
	ExitPathRefused    = 8
	ExitDiskFull       = 9
	ExitIntegrity      = 10 // content hash mismatch, source changed while read
	ExitNotInitialized = 11 // no identity or config: run "peerfs init"
	// Pairing ("peerfs pair"), from 20.
	ExitWrongCode      = 20 // the two devices did not use the same code; it is used up
	ExitCodeExpired    = 21 // nobody completed the pairing before the code expired
	ExitCodeUsed       = 22 // no device waits for this code (used, expired, or another)
	ExitAlreadyTrusted = 23 // the two devices trust each other already
	ExitPairingBusy    = 24 // this device is pairing already
	ExitInterrupted    = 130
)

// Error codes the CLI reports for failures that have no api.Error code.
const (
	codeNoDaemon       = "no_daemon"
	codeNotInitialized = "not_initialized"
	codeAlreadyInit    = "already_initialized"
)

// exitTable documents the exit codes, in order; help and docs/CLI.md show it.
var exitTable = []struct {
	Code    int
	Meaning string
}{
	{ExitOK, "success"},
	{ExitError, "other error"},
	{ExitUsage, "invalid arguments or flags"},
	{ExitNoDaemon, "the daemon is not running for this home"},
	{ExitUnreachable, "peer unreachable"},
	{ExitUntrusted, "untrusted or unknown peer"},
	{ExitNotFound, "not found, or unknown share"},
	{ExitPermission, "permission denied (including a read-only share)"},
	{ExitPathRefused, "path refused (escapes the share or is malformed)"},
	{ExitDiskFull, "disk full"},
	{ExitIntegrity, "integrity error (hash mismatch, source changed)"},
	{ExitNotInitialized, "not initialised: run \"peerfs init\""},
	{ExitWrongCode, "pairing: wrong code (the code is used up)"},
	{ExitCodeExpired, "pairing: the code expired"},
	{ExitCodeUsed, "pairing: no device waits for this code (used, expired or another)"},
	{ExitAlreadyTrusted, "pairing: the devices trust each other already"},
	{ExitPairingBusy, "pairing: another pairing is in progress on this device"},
	{ExitInterrupted, "interrupted or canceled"},
}

// exitStatusHelp ends every leaf command's help.
var exitStatusHelp = func() string {
	var b strings.Builder
	b.WriteString("\nExit status:\n")
	for _, e := range exitTable {
		fmt.Fprintf(&b, "  %-4d %s\n", e.Code, e.Meaning)
	}
	b.WriteString("Treat any other non-zero status as failure. See docs/CLI.md.\n")
	return b.String()
}()

// apiCodeExit maps each api.Error code to its exit code.
var apiCodeExit = map[string]int{
	api.CodeInternal:        ExitError,
	api.CodeInvalid:         ExitUsage,
	api.CodeUnknownPeer:     ExitUntrusted,
	api.CodePeerUnreachable: ExitUnreachable,
	api.CodeUntrusted:       ExitUntrusted,
	api.CodeUnknownShare:    ExitNotFound,
	api.CodeNotFound:        ExitNotFound,
	api.CodePermission:      ExitPermission,
	api.CodePathRefused:     ExitPathRefused,
	api.CodeDiskFull:        ExitDiskFull,
	api.CodeIntegrity:       ExitIntegrity,
	api.CodeCanceled:        ExitInterrupted,
	api.CodeWrongCode:       ExitWrongCode,
	api.CodeCodeExpired:     ExitCodeExpired,
	api.CodeCodeUsed:        ExitCodeUsed,
	api.CodeAlreadyTrusted:  ExitAlreadyTrusted,
	api.CodePairingBusy:     ExitPairingBusy,
}

// usageError is a mistake on the command line. Its message says what to do.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// interruptedError is a command stopped by SIGINT or SIGTERM; it says what to do next.
type interruptedError struct{ msg string }

func (e *interruptedError) Error() string { return e.msg }
func (e *interruptedError) Unwrap() error { return context.Canceled }

// classify is the one place that maps an error to its code (as in the JSON error object) and
// exit status.
func classify(err error) (code string, exit int) {
	if err == nil {
		return "", ExitOK
	}
	var ue *usageError
	var ae *api.Error
	switch {
	case errors.As(err, &ue):
		return api.CodeInvalid, ExitUsage
	case errors.As(err, &ae):
		if exit, ok := apiCodeExit[ae.Code]; ok {
			return ae.Code, exit
		}
		return ae.Code, ExitError // a code added to the daemon after this CLI was built
	case errors.Is(err, context.Canceled):
		return api.CodeCanceled, ExitInterrupted
	case errors.Is(err, api.ErrNoDaemon):
		return codeNoDaemon, ExitNoDaemon
	case errors.Is(err, identity.ErrNoIdentity), errors.Is(err, config.ErrNotInitialized):
		return codeNotInitialized, ExitNotInitialized
	case errors.Is(err, identity.ErrExists):
		return codeAlreadyInit, ExitError
	case errors.Is(err, config.ErrInvalid):
		return api.CodeInvalid, ExitUsage
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return api.CodeDiskFull, ExitDiskFull
	case errors.Is(err, fs.ErrPermission):
		return api.CodePermission, ExitPermission
	case errors.Is(err, fs.ErrNotExist):
		return api.CodeNotFound, ExitNotFound
	}
	return api.CodeInternal, ExitError
}

// ExitCode returns the exit status for err.
func ExitCode(err error) int {
	_, exit := classify(err)
	return exit
}
