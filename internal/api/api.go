// Package api is the control interface between the peerfs CLI and its daemon: versioned JSON
// messages over a Unix socket in the runtime directory. The socket is created mode 0600 in a
// 0700 directory, so other local users can neither connect nor see it.
//
// One connection carries one call. The client writes one Request as a JSON line; the daemon
// answers with zero or more {"type":"event"} lines (long operations: pull, send) and then
// exactly one line of type "result" or "error". Fields may be added, never changed; a client
// ignores fields it does not know. docs/CLI.md documents the methods and their JSON.
package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/peerfs/peerfs/internal/identity"
)

// Version is the API version; a request with another version is refused.
const Version = 1

// Method names.
const (
	MethodStatus = "status"
	MethodReload = "reload"
	MethodList   = "ls"
	MethodPull   = "pull"
	MethodSend   = "send"

	MethodMount   = "mount"
	MethodUnmount = "unmount"
	MethodMounts  = "mounts"
	MethodStats   = "stats"

	MethodPair = "pair"
)

// Request is the one line a client sends.
type Request struct {
	API    int    `json:"api"`
	Method string `json:"method"`
	Params any    `json:"params,omitempty"`
}

// Line is one line the daemon sends back.
type Line struct {
	Type   string `json:"type"` // "event", "result" or "error"
	Event  *Event `json:"event,omitempty"`
	Result any    `json:"result,omitempty"`
	Error  *Error `json:"error,omitempty"`
}

// Error is a failure with a stable code (see the Code constants) and a one-line message that
// says what to do.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// Error codes. The CLI maps each to an exit code (docs/CLI.md).
const (
	CodeInternal        = "internal"
	CodeInvalid         = "invalid"           // bad arguments
	CodeUnknownPeer     = "unknown_peer"      // no peer of that name in the config
	CodePeerUnreachable = "peer_unreachable"  // not connected and could not connect
	CodeUntrusted       = "untrusted"         // the peer refused us or we refused it
	CodeUnknownShare    = "unknown_share"     // no such share exported to us
	CodeNotFound        = "not_found"         // path does not exist
	CodePermission      = "permission_denied" // EACCES/EPERM or a read-only share
	CodePathRefused     = "path_refused"      // path escapes the share or is malformed
	CodeDiskFull        = "disk_full"         // ENOSPC/EDQUOT on either side
	CodeIntegrity       = "integrity"         // content hash mismatch, source changed
	CodeCanceled        = "canceled"

	// Pairing (MethodPair).
	CodeWrongCode      = "wrong_code"      // key confirmation failed; the code is used up
	CodeCodeExpired    = "code_expired"    // nobody completed the pairing in time
	CodeCodeUsed       = "code_used"       // no device waits for this code: used, expired or absent
	CodeAlreadyTrusted = "already_trusted" // the two devices trust each other already
	CodePairingBusy    = "pairing_busy"    // a pairing is in progress on this device already
)

// Errorf builds an *Error.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of an *Error in err's chain, or CodeInternal.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// StatusResult answers "status".
type StatusResult struct {
	DeviceID identity.DeviceID `json:"device_id"`
	Name     string            `json:"name"`
	Listen   string            `json:"listen"` // the address actually bound
	Peers    []PeerStatus      `json:"peers"`
	Relays   []RelayStatus     `json:"relays"` // the configured relays, in config order
}

// RelayStatus is the daemon's connection to one relay.
type RelayStatus struct {
	URL       string    `json:"url"`                 // without its token
	Connected bool      `json:"connected"`           // a listening join waits there: peers can reach us through it
	Since     time.Time `json:"since,omitzero"`      // connected since
	Transport string    `json:"transport,omitempty"` // "tls" or "websocket", what last worked
	Observed  string    `json:"observed,omitempty"`  // the address the relay last saw us at (it tells it at each session)
	Sessions  int       `json:"sessions"`            // sessions peers opened to us through it since the daemon started
	LastError string    `json:"last_error,omitempty"`
}

// Paths a link to a peer can take (PeerStatus.Path).
const (
	PathDirect  = "direct"  // we or the peer dialled an address
	PathPunched = "punched" // a direct path opened through NATs (TCP simultaneous open)
	PathRelayed = "relayed" // through a relay (PeerStatus.Via)
)

// CandidateStatus is one way to reach a peer that the daemon tried, and how it went.
type CandidateStatus struct {
	Addr   string    `json:"addr"`            // HOST:PORT, or a relay's URL without its token
	Source string    `json:"source"`          // "config", "lan", "peer" (told by the peer), "relay"
	Tried  time.Time `json:"tried,omitzero"`  // when last tried
	Error  string    `json:"error,omitempty"` // why it failed; empty: it worked, or not tried yet
}

// PeerStatus is one trusted peer as the daemon sees it.
type PeerStatus struct {
	Name      string            `json:"name"`
	DeviceID  identity.DeviceID `json:"device_id"`
	Addr      string            `json:"addr"` // configured address, or the one it last came from
	Connected bool              `json:"connected"`
	Since     time.Time         `json:"since,omitzero"`         // connected since
	RTTMicros int64             `json:"rtt_us,omitempty"`       // last keepalive round trip
	TLS       string            `json:"tls,omitempty"`          // "TLS 1.3"
	Cipher    string            `json:"cipher,omitempty"`       // negotiated cipher suite
	KeyExch   string            `json:"key_exchange,omitempty"` // negotiated group, X25519MLKEM768
	Protocol  int               `json:"protocol,omitempty"`     // negotiated wire version
	BytesIn   uint64            `json:"bytes_in"`
	BytesOut  uint64            `json:"bytes_out"`
	Rekeys    int               `json:"rekeys"`               // links this device replaced by a fresh handshake to renew keys
	LastError string            `json:"last_error,omitempty"` // why the last connection attempt failed
	Transfers []TransferStatus  `json:"transfers"`
	// Path is how the link in use runs: PathDirect, PathPunched or PathRelayed; empty when
	// not connected. Via is the relay's URL (without token) of a relayed link.
	Path       string `json:"path,omitempty"`
	Via        string `json:"via,omitempty"`
	RemoteAddr string `json:"remote_addr,omitempty"` // the link's remote address (the relay's, for a relayed link)
	// Candidates are the addresses and relays the daemon tried last, with why each failed.
	Candidates []CandidateStatus `json:"candidates"`
}

// TransferStatus is a pull or send in progress.
type TransferStatus struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"` // "pull" or "send"
	Remote    string    `json:"remote"`
	Local     string    `json:"local"`
	Started   time.Time `json:"started"`
	Bytes     int64     `json:"bytes"`       // moved so far
	Total     int64     `json:"total_bytes"` // known so far
	Files     int       `json:"files"`
	FilesDone int       `json:"files_done"`
}

// ListParams asks "ls" for a path of a peer's share; an empty Share lists the shares.
type ListParams struct {
	Peer  string `json:"peer"`
	Share string `json:"share,omitempty"`
	Path  string `json:"path,omitempty"`
}

// ListResult answers "ls": the entries of a directory, or the single entry of a file.
type ListResult struct {
	Shares  []ShareInfo `json:"shares,omitempty"`
	Entries []Entry     `json:"entries,omitempty"`
}

// ShareInfo is one share a peer exports to us.
type ShareInfo struct {
	Name     string `json:"name"`
	ReadOnly bool   `json:"read_only"`
}

// Entry is one file in an "ls" result.
type Entry struct {
	Name   string    `json:"name"`
	Type   string    `json:"type"` // "file", "dir", "symlink", "other"
	Mode   uint32    `json:"mode"` // POSIX mode: type bits | permissions
	Size   int64     `json:"size"`
	Mtime  time.Time `json:"mtime"`
	Nlink  uint32    `json:"nlink"`
	UID    uint32    `json:"uid"`
	GID    uint32    `json:"gid"`
	Target string    `json:"target,omitempty"` // symlink target
}

// PullParams asks for a file or tree of a peer's share to be copied to Dest, an absolute local
// path. If Dest is an existing directory the copy lands inside it under the remote base name.
type PullParams struct {
	Peer  string `json:"peer"`
	Share string `json:"share"`
	Path  string `json:"path,omitempty"`
	Dest  string `json:"dest"`
}

// SendParams asks for Source, an absolute local path (file or tree), to be copied into Dir of a
// peer's share.
type SendParams struct {
	Source string `json:"source"`
	Peer   string `json:"peer"`
	Share  string `json:"share"`
	Dir    string `json:"dir,omitempty"`
}

// Event is one step of a long operation. Type is "start", "progress", "done" or "error".
type Event struct {
	Type       string  `json:"type"`
	Path       string  `json:"path,omitempty"`  // the file concerned, for per-file events
	Files      int     `json:"files"`           // files known so far
	FilesDone  int     `json:"files_done"`      //
	Bytes      int64   `json:"bytes"`           // bytes moved so far
	TotalBytes int64   `json:"total_bytes"`     // bytes known so far
	Resumed    int64   `json:"resumed_bytes"`   // bytes kept from earlier interrupted runs
	Elapsed    float64 `json:"elapsed_seconds"` //
	Rate       float64 `json:"bytes_per_second"`
	Error      *Error  `json:"error,omitempty"` // with type "error"
	// Code is the pairing code, in the "start" event of MethodPair when this device shows it.
	Code string `json:"code,omitempty"`
	// ExpiresSeconds is how long the code stays valid, in the same event.
	ExpiresSeconds int `json:"expires_seconds,omitempty"`
}

// TransferResult answers "pull" and "send".
type TransferResult struct {
	Source     string  `json:"source"`
	Dest       string  `json:"dest"`
	Files      int     `json:"files"`
	Dirs       int     `json:"dirs"`
	Symlinks   int     `json:"symlinks"`
	Skipped    int     `json:"skipped"` // already present and identical in size and mtime
	Bytes      int64   `json:"bytes"`   // bytes moved over the link in this run
	TotalBytes int64   `json:"total_bytes"`
	Resumed    int64   `json:"resumed_bytes"`
	Elapsed    float64 `json:"elapsed_seconds"`
	Rate       float64 `json:"bytes_per_second"`
	Hash       string  `json:"hash,omitempty"` // BLAKE3 of a single file, hex
}

// MountParams asks the daemon to mount a peer's share at Dir, an absolute path to an existing
// empty directory.
type MountParams struct {
	Peer    string `json:"peer"`
	Share   string `json:"share"`
	Dir     string `json:"dir"`
	Blksize int    `json:"blksize,omitempty"` // reported st_blksize and statfs block size; 0: default
	Inline  int    `json:"inline,omitempty"`  // inline small files up to this size; 0: default
	// NoPassthrough serves cached files through the daemon instead of FUSE passthrough.
	NoPassthrough bool `json:"no_passthrough,omitempty"`
	// Idmap says how the owner's user and group IDs show: "user" (or empty, the default) shows
	// the owner's as the mounting user's, "none" shows every ID as the owner numbers it.
	Idmap string `json:"idmap,omitempty"`
	// AllowOther lets every user of this machine use the mount, the kernel checking
	// permissions as on a local disk (needs user_allow_other in /etc/fuse.conf unless root).
	AllowOther bool `json:"allow_other,omitempty"`
	// WaitSeconds bounds how long an operation waits for a lost link before failing with EIO;
	// 0: 30 s.
	WaitSeconds int `json:"wait_seconds,omitempty"`
	// Tuning, for benchmarks and unusual links; 0: the defaults (docs/CLI.md, BENCHMARKS.md).
	Readahead       int64 `json:"readahead,omitempty"`        // bytes a sequential reader's stream runs ahead
	KernelReadahead int64 `json:"kernel_readahead,omitempty"` // the kernel's readahead window (needs root)
	ReadsInFlight   int   `json:"reads_in_flight,omitempty"`  // READs in flight for random reads
	WritesInFlight  int   `json:"writes_in_flight,omitempty"` // WRITEs in flight per flush
	Piece           int   `json:"piece,omitempty"`            // bytes per READ and WRITE
	// Writes says when a change through the mount returns: WritesSync (or empty, the
	// default) once the owner applied it; WritesJournal once it is in the mount's journal on
	// this disk, the owner getting it in order, without waits, and fsync waiting for it.
	Writes string `json:"writes,omitempty"`
}

// MountParams.Writes values.
const (
	WritesSync    = "sync"
	WritesJournal = "journal"
)

// MountInfo describes one mount.
type MountInfo struct {
	Peer        string    `json:"peer"`
	Share       string    `json:"share"`
	Dir         string    `json:"dir"`
	Since       time.Time `json:"since"`
	Events      bool      `json:"events"`      // the owner pushes change events
	Passthrough bool      `json:"passthrough"` // passthrough enabled for fully cached files
	Blksize     int       `json:"blksize"`
	Idmap       string    `json:"idmap"`       // "user" or "none"
	AllowOther  bool      `json:"allow_other"` // other users of this machine may use the mount
	Writes      string    `json:"writes"`      // WritesSync or WritesJournal
	// Journal is the state of a journaling mount's changes (Writes WritesJournal).
	Journal *JournalInfo `json:"journal,omitempty"`
}

// JournalInfo is what a journaling mount has waiting for its owner, and what the owner
// refused.
type JournalInfo struct {
	// Online: the owner answered the last batch sent (an answer refusing it counts).
	Online bool `json:"online"`
	// Waiting changes are in the journal and not yet applied by the owner, WaitingBytes
	// their size; Oldest is when the first of them was made.
	Waiting      uint64    `json:"waiting"`
	WaitingBytes int64     `json:"waiting_bytes"`
	Oldest       time.Time `json:"oldest,omitzero"`
	// LogBytes the journal holds on disk: the changes not yet durable on the owner.
	LogBytes int64 `json:"log_bytes"`
	// LastError is the last failure to send, while nothing was sent since.
	LastError string `json:"last_error,omitempty"`
	// Refused counts the changes the owner did not apply since the mount began; Refusals
	// are the latest of them.
	Refused  uint64        `json:"refused"`
	Refusals []RefusalInfo `json:"refusals,omitempty"`
}

// RefusalInfo is one change the owner refused.
type RefusalInfo struct {
	Time  time.Time `json:"time"`
	Op    string    `json:"op"`
	Path  string    `json:"path,omitempty"`
	Error string    `json:"error"`
}

// UnmountParams names a mount by its directory.
type UnmountParams struct {
	Dir string `json:"dir"`
}

// MountsResult answers "mounts".
type MountsResult struct {
	Mounts []MountInfo `json:"mounts"`
}

// OpStats are one FUSE operation's counters in "stats".
type OpStats struct {
	Name  string  `json:"name"`
	Calls int64   `json:"calls"`
	Bytes int64   `json:"bytes"`
	Min   int64   `json:"min_bytes"`
	Avg   float64 `json:"avg_bytes"`
	Max   int64   `json:"max_bytes"`
	// TotalMs is the time the daemon spent on the operation's calls, from the request read
	// to the reply ready: the daemon's share of the latency programs see.
	TotalMs float64 `json:"total_ms"`
}

// StatsResult answers "stats": per FUSE operation calls and request sizes, cache hits and
// misses, round trips to the owner (seed 000's instrumentation).
type StatsResult struct {
	Mount    MountInfo        `json:"mount"`
	Ops      []OpStats        `json:"ops"`
	Counters map[string]int64 `json:"counters"`
}

// PairParams asks the daemon to pair with another device. Without Code it makes a code,
// sends it in a "start" event and waits for the other device; with Code it completes the
// pairing the other device waits in.
type PairParams struct {
	Code string `json:"code,omitempty"`
	// Addr is the other device's peer address, HOST:PORT, for a device LAN discovery does
	// not find; only with Code.
	Addr string `json:"addr,omitempty"`
	// Name is the name to give the other device here; empty: the name it chose for itself.
	Name string `json:"name,omitempty"`
	// TimeoutSeconds bounds the wait for the other device, at most (and by default) 300.
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
}

// PairResult answers "pair": the device now trusted.
type PairResult struct {
	Name     string            `json:"name"`
	DeviceID identity.DeviceID `json:"device_id"`
	Addr     string            `json:"addr,omitempty"` // where it is dialled
}

// Pairer is the part of a Backend that pairs devices; only a daemon's node implements it.
type Pairer interface {
	Pair(ctx context.Context, p PairParams, emit func(Event)) (*PairResult, error)
}

// Backend is what the daemon serves; the node implements it. Long operations report progress
// through emit, which is safe to call from any goroutine.
type Backend interface {
	Status(ctx context.Context) (*StatusResult, error)
	Reload(ctx context.Context) error
	List(ctx context.Context, p ListParams) (*ListResult, error)
	Pull(ctx context.Context, p PullParams, emit func(Event)) (*TransferResult, error)
	Send(ctx context.Context, p SendParams, emit func(Event)) (*TransferResult, error)
	Mount(ctx context.Context, p MountParams) (*MountInfo, error)
	Unmount(ctx context.Context, p UnmountParams) error
	Mounts(ctx context.Context) (*MountsResult, error)
	Stats(ctx context.Context, p UnmountParams) (*StatsResult, error)
}
