package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/gofrs/flock"

	"github.com/peerfs/peerfs/internal/identity"
	"github.com/peerfs/peerfs/internal/relay"
)

// DefaultListen is the address the daemon listens on for peers when neither --listen,
// $PEERFS_LISTEN nor the config file names one.
const DefaultListen = ":7462"

// Limits on names, in bytes. Share names follow the wire protocol's rule (wire.MaxShareNameLen).
const (
	MaxPeerNameLen  = 64
	MaxShareNameLen = 64
)

var (
	// ErrNotInitialized means there is no config file: "peerfs init" has not been run for
	// this home.
	ErrNotInitialized = errors.New("peerfs is not initialised")
	// ErrInvalid marks a config that breaks a rule of Validate.
	ErrInvalid = errors.New("invalid config")
)

// File is the config file, Paths.ConfigFile: JSON, mode 0600. Fields may be added, never
// changed.
type File struct {
	Name   string  `json:"name"`             // this device's name, shown to the user
	Listen string  `json:"listen,omitempty"` // peer listen address; empty means DefaultListen
	Peers  []Peer  `json:"peers"`
	Shares []Share `json:"shares"`
	// Metrics is the address the daemon serves Prometheus metrics on; empty: none. It must be
	// a loopback address unless MetricsPublic is set (docs/METRICS.md).
	Metrics       string `json:"metrics,omitempty"`
	MetricsPublic bool   `json:"metrics_public,omitempty"`
	// Discovery, when false, turns LAN discovery off (like "peerfs daemon --no-discovery");
	// absent means on. Read when the daemon starts.
	Discovery *bool `json:"discovery,omitempty"`
	// Relays are the URLs of the relays this device keeps a listening connection to and
	// reaches peers through when it cannot dial them (docs/RELAY.md), in the order tried.
	// Each is a relay.ParseURL URL; it may hold an access token, which is why the file is
	// 0600.
	Relays []string `json:"relays,omitempty"`
}

// DiscoveryOn reports whether the config file leaves LAN discovery on.
func (f *File) DiscoveryOn() bool { return f.Discovery == nil || *f.Discovery }

// Peer is a trusted device.
type Peer struct {
	Name string            `json:"name"`
	ID   identity.DeviceID `json:"device_id"`
	Addr string            `json:"addr,omitempty"` // HOST:PORT to dial; empty: wait for it to dial us
	// Secret is shared with the peer alone, agreed when the two paired (peerfs pair); it keys
	// what the two announce on a LAN. Empty for a peer added by device ID.
	Secret []byte `json:"secret,omitempty"`
}

// Share is a folder this device exports.
type Share struct {
	Name     string   `json:"name"`
	Path     string   `json:"path"` // absolute
	ReadOnly bool     `json:"read_only"`
	Peers    []string `json:"peers"` // names of the peers allowed to use it
	// AllowHardlinks serves files with several hard links whatever made them; without it only
	// those linked through the share are (docs/ARCHITECTURE.md, hard links).
	AllowHardlinks bool `json:"allow_hardlinks,omitempty"`
	// Privileged lets its peers change owners and groups, keep set-user-ID and set-group-ID
	// bits on files and make device nodes, as far as the daemon's account may.
	Privileged bool `json:"privileged,omitempty"`
}

// Load reads and validates the config file. A missing file is an error wrapping
// ErrNotInitialized that tells the user to run "peerfs init".
func Load(p Paths) (*File, error) {
	b, err := os.ReadFile(p.ConfigFile())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: no config file at %s: run \"peerfs init\" first", ErrNotInitialized, p.ConfigFile())
	}
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	f := new(File)
	if err := json.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("config file %s is not valid JSON: %w: fix or remove it", p.ConfigFile(), err)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("config file %s: %w", p.ConfigFile(), err)
	}
	return f, nil
}

// Create writes f as a new config file, creating the config directory (0700). It refuses to
// replace an existing file: the error wraps fs.ErrExist.
func Create(p Paths, f *File) error {
	if err := f.Validate(); err != nil {
		return err
	}
	unlock, err := lock(p)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Lstat(p.ConfigFile()); err == nil {
		return fmt.Errorf("config file %s already exists: %w", p.ConfigFile(), fs.ErrExist)
	}
	return save(p, f)
}

// Update edits the config file: under an exclusive lock it loads the file, calls fn, validates
// the result and writes it back atomically. If fn or validation fails nothing is written. The
// CLI and the daemon both edit through Update, so their changes never interleave.
func Update(p Paths, fn func(*File) error) error {
	unlock, err := lock(p)
	if err != nil {
		return err
	}
	defer unlock()
	f, err := Load(p)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return err
	}
	return save(p, f)
}

// lock takes the exclusive lock on the config directory's lock file, creating the directory
// (0700) if needed. Readers do not lock: save replaces the file by rename, so a reader sees
// either the old or the new file, never half of one.
func lock(p Paths) (unlock func(), err error) {
	if err := os.MkdirAll(p.Config, 0o700); err != nil {
		return nil, fmt.Errorf("creating config directory: %w", err)
	}
	lf := flock.New(p.lockFile(), flock.SetPermissions(0o600))
	if err := lf.Lock(); err != nil {
		return nil, fmt.Errorf("locking %s: %w", p.lockFile(), err)
	}
	// Closing the file drops the lock.
	return func() { lf.Close() }, nil
}

// save writes f as the config file.
func save(p Paths, f *File) error {
	out := *f
	if out.Peers == nil {
		out.Peers = []Peer{}
	}
	if out.Shares == nil {
		out.Shares = []Share{}
	}
	for i := range out.Shares {
		if out.Shares[i].Peers == nil {
			out.Shares[i].Peers = []string{}
		}
	}
	b, err := json.MarshalIndent(&out, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding config: %w", err)
	}
	if err := writeAtomic(p.Config, p.ConfigFile(), append(b, '\n')); err != nil {
		return fmt.Errorf("writing config: %w", err)
	}
	return nil
}

// writeAtomic writes b to a temporary file (mode 0600) in dir, syncs it and renames it over
// name, then syncs dir so the rename survives a crash. A reader sees the old or the new
// file, never half of one.
func writeAtomic(dir, name string, b []byte) error {
	tmp, err := os.CreateTemp(dir, ".tmp-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// ResolveListen returns the peer listen address: flag if set, else $PEERFS_LISTEN, else the
// config file's Listen, else DefaultListen. f may be nil.
func (f *File) ResolveListen(flag string) string {
	if flag != "" {
		return flag
	}
	if v := os.Getenv(EnvListen); v != "" {
		return v
	}
	if f != nil && f.Listen != "" {
		return f.Listen
	}
	return DefaultListen
}

// ResolveMetrics returns the metrics listen address: flag if set, else $PEERFS_METRICS, else
// the config file's Metrics; empty means no metrics. f may be nil.
func (f *File) ResolveMetrics(flag string) string {
	if flag != "" {
		return flag
	}
	if v := os.Getenv(EnvMetrics); v != "" {
		return v
	}
	if f != nil {
		return f.Metrics
	}
	return ""
}

// Validate checks the rules the rest of peerfs relies on: peer names and IDs unique, peer
// names of [a-z0-9._-], share names valid on the wire and unique, share paths absolute, and
// every peer a share names configured. Errors wrap ErrInvalid.
func (f *File) Validate() error {
	if f.Listen != "" {
		if err := CheckAddr(f.Listen); err != nil {
			return fmt.Errorf("%w: listen address %q: %v", ErrInvalid, f.Listen, err)
		}
	}
	if f.Metrics != "" {
		if err := CheckAddr(f.Metrics); err != nil {
			return fmt.Errorf("%w: metrics address %q: %v", ErrInvalid, f.Metrics, err)
		}
	}
	relays := make(map[string]bool, len(f.Relays))
	for _, r := range f.Relays {
		u, err := relay.ParseURL(r)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if relays[u.Host] {
			return fmt.Errorf("%w: relay %s is listed twice: remove one with \"peerfs relay rm\"", ErrInvalid, u.Redacted())
		}
		relays[u.Host] = true
	}
	names := make(map[string]bool, len(f.Peers))
	ids := make(map[identity.DeviceID]string, len(f.Peers))
	for _, p := range f.Peers {
		if err := CheckPeerName(p.Name); err != nil {
			return err
		}
		if names[p.Name] {
			return fmt.Errorf("%w: two peers are named %q: peer names must be unique", ErrInvalid, p.Name)
		}
		names[p.Name] = true
		if p.ID == (identity.DeviceID{}) {
			return fmt.Errorf("%w: peer %q has no device ID", ErrInvalid, p.Name)
		}
		if other, ok := ids[p.ID]; ok {
			return fmt.Errorf("%w: peers %q and %q have the same device ID %s", ErrInvalid, other, p.Name, p.ID)
		}
		ids[p.ID] = p.Name
		if p.Addr != "" {
			if err := CheckAddr(p.Addr); err != nil {
				return fmt.Errorf("%w: peer %q: address %q: %v", ErrInvalid, p.Name, p.Addr, err)
			}
		}
	}
	shares := make(map[string]bool, len(f.Shares))
	for _, s := range f.Shares {
		if err := CheckShareName(s.Name); err != nil {
			return err
		}
		if shares[s.Name] {
			return fmt.Errorf("%w: two shares are named %q: share names must be unique", ErrInvalid, s.Name)
		}
		shares[s.Name] = true
		if !filepath.IsAbs(s.Path) {
			return fmt.Errorf("%w: share %q: path %q is not absolute", ErrInvalid, s.Name, s.Path)
		}
		for _, pn := range s.Peers {
			if !names[pn] {
				return fmt.Errorf("%w: share %q names peer %q, which is not configured: add it with \"peerfs peer add\"", ErrInvalid, s.Name, pn)
			}
		}
	}
	return nil
}

// CheckPeerName validates a peer name: 1 to MaxPeerNameLen bytes of lower-case letters,
// digits, '.', '_' and '-'. Peer names appear in PEER:SHARE specs, so they can hold no ':'.
func CheckPeerName(s string) error {
	if s == "" || len(s) > MaxPeerNameLen {
		return fmt.Errorf("%w: peer name %q must be 1-%d characters", ErrInvalid, s, MaxPeerNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: peer name %q may hold only lower-case letters, digits, '.', '_' and '-'", ErrInvalid, s)
		}
	}
	return nil
}

// CheckShareName validates a share name by the wire protocol's rule: 1 to MaxShareNameLen
// bytes of letters, digits, '-', '_' and '.', not starting with '.'.
func CheckShareName(s string) error {
	if s == "" || len(s) > MaxShareNameLen || s[0] == '.' {
		return fmt.Errorf("%w: share name %q must be 1-%d characters and not start with '.'", ErrInvalid, s, MaxShareNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%w: share name %q may hold only letters, digits, '-', '_' and '.'", ErrInvalid, s)
		}
	}
	return nil
}

// CheckAddr accepts HOST:PORT with a host (which may be empty, meaning all addresses when
// listening) and a numeric port.
func CheckAddr(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("want HOST:PORT: %v", err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}

// PeerByName returns the peer named name, or nil.
func (f *File) PeerByName(name string) *Peer {
	for i := range f.Peers {
		if f.Peers[i].Name == name {
			return &f.Peers[i]
		}
	}
	return nil
}

// PeerByID returns the peer with device ID id, or nil.
func (f *File) PeerByID(id identity.DeviceID) *Peer {
	for i := range f.Peers {
		if f.Peers[i].ID == id {
			return &f.Peers[i]
		}
	}
	return nil
}

// RelayIndex returns the index in f.Relays of the relay u names (by host and port), or -1.
func (f *File) RelayIndex(u relay.URL) int {
	for i, r := range f.Relays {
		if v, err := relay.ParseURL(r); err == nil && v.Host == u.Host {
			return i
		}
	}
	return -1
}

// RelayURLs returns the parsed relay URLs; Validate has checked them.
func (f *File) RelayURLs() []relay.URL {
	out := make([]relay.URL, 0, len(f.Relays))
	for _, r := range f.Relays {
		if u, err := relay.ParseURL(r); err == nil {
			out = append(out, u)
		}
	}
	return out
}

// ShareByName returns the share named name, or nil.
func (f *File) ShareByName(name string) *Share {
	for i := range f.Shares {
		if f.Shares[i].Name == name {
			return &f.Shares[i]
		}
	}
	return nil
}

// SharesFor returns the shares the peer with device ID id may use, in config order. An
// unknown ID gets none.
func (f *File) SharesFor(id identity.DeviceID) []Share {
	p := f.PeerByID(id)
	if p == nil {
		return nil
	}
	var out []Share
	for _, s := range f.Shares {
		if slices.Contains(s.Peers, p.Name) {
			out = append(out, s)
		}
	}
	return out
}
