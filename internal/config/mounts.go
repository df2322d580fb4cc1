package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Mount is a mount the daemon made and makes again when it starts: the parameters of
// "peerfs mount". Fields may be added, never changed.
type Mount struct {
	Peer          string `json:"peer"`
	Share         string `json:"share"`
	Dir           string `json:"dir"` // absolute
	Blksize       int    `json:"blksize,omitempty"`
	Inline        int    `json:"inline,omitempty"`
	NoPassthrough bool   `json:"no_passthrough,omitempty"`
	WaitSeconds   int    `json:"wait_seconds,omitempty"`
	Idmap         string `json:"idmap,omitempty"`
	AllowOther    bool   `json:"allow_other,omitempty"`

	Readahead       int64  `json:"readahead,omitempty"`
	KernelReadahead int64  `json:"kernel_readahead,omitempty"`
	ReadsInFlight   int    `json:"reads_in_flight,omitempty"`
	WritesInFlight  int    `json:"writes_in_flight,omitempty"`
	Piece           int    `json:"piece,omitempty"`
	Writes          string `json:"writes,omitempty"`
}

// mountsFile is Paths.MountsFile: state the daemon keeps, not settings, so it lives beside
// the config file instead of in it and is never edited by the config commands.
type mountsFile struct {
	Mounts []Mount `json:"mounts"`
}

// MountsFile remembers the daemon's mounts across restarts (mode 0600).
func (p Paths) MountsFile() string { return filepath.Join(p.Config, "mounts.json") }

// MountSocket is the control socket of a foreground mount ("peerfs mount --foreground") at
// dir, found again by its mount point: "peerfs stats DIR" and "peerfs unmount DIR" use it.
func (p Paths) MountSocket(dir string) string {
	return filepath.Join(p.Runtime, "mount-"+mountKey(dir)+".sock")
}

// MountCache is the chunk cache of a foreground mount at dir. The daemon keeps its cache
// directory locked while it has mounts, so a foreground mount beside it needs its own; one
// per mount point lets a foreground mount run again at the same place find its chunks.
func (p Paths) MountCache(dir string) string {
	return filepath.Join(p.Cache, "foreground", mountKey(dir))
}

// mountKey names a mount point in file names: short, fixed length, no separators.
func mountKey(dir string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(dir)))
	return hex.EncodeToString(sum[:8])
}

// LoadMounts returns the remembered mounts; no file means none. Entries that are not
// usable (no peer, share or absolute directory) are dropped: a hand edit cannot make the
// daemon mount somewhere unexpected.
func LoadMounts(p Paths) ([]Mount, error) {
	b, err := os.ReadFile(p.MountsFile())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading remembered mounts: %w", err)
	}
	var f mountsFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %w: fix or remove it", p.MountsFile(), err)
	}
	out := f.Mounts[:0]
	for _, m := range f.Mounts {
		if CheckPeerName(m.Peer) == nil && CheckShareName(m.Share) == nil && filepath.IsAbs(m.Dir) {
			m.Dir = filepath.Clean(m.Dir)
			out = append(out, m)
		}
	}
	return out, nil
}

// RememberMount records m, replacing any entry for the same directory.
func RememberMount(p Paths, m Mount) error {
	m.Dir = filepath.Clean(m.Dir)
	return updateMounts(p, func(list []Mount) []Mount {
		for i := range list {
			if list[i].Dir == m.Dir {
				list[i] = m
				return list
			}
		}
		return append(list, m)
	})
}

// ForgetMount removes the entry for dir, if any.
func ForgetMount(p Paths, dir string) error {
	dir = filepath.Clean(dir)
	return updateMounts(p, func(list []Mount) []Mount {
		out := list[:0]
		for _, m := range list {
			if m.Dir != dir {
				out = append(out, m)
			}
		}
		return out
	})
}

// updateMounts edits the mounts file under the config lock and writes it atomically.
func updateMounts(p Paths, fn func([]Mount) []Mount) error {
	unlock, err := lock(p)
	if err != nil {
		return err
	}
	defer unlock()
	list, err := LoadMounts(p)
	if err != nil {
		return err
	}
	list = fn(list)
	if list == nil {
		list = []Mount{}
	}
	b, err := json.MarshalIndent(mountsFile{Mounts: list}, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding remembered mounts: %w", err)
	}
	if err := writeAtomic(p.Config, p.MountsFile(), append(b, '\n')); err != nil {
		return fmt.Errorf("writing remembered mounts: %w", err)
	}
	return nil
}
