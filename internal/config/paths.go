// Package config finds peerfs's directories and reads and writes its config file.
//
// It sits at the top of the control path (CLI -> daemon API -> node) beside the CLI and the
// daemon: both resolve the same Paths, and both read and edit the same config file, which this
// package guards with a lock so that a CLI edit and a daemon write never interleave. It holds
// settings only; it opens no sockets and knows nothing of peers beyond their names, IDs and
// addresses.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Environment variables read here. Flags win over them; they win over the config file.
const (
	EnvHome    = "PEERFS_HOME"    // one directory for everything, instead of the XDG layout
	EnvListen  = "PEERFS_LISTEN"  // the daemon's peer listen address
	EnvMetrics = "PEERFS_METRICS" // the daemon's metrics listen address (docs/METRICS.md)
)

// Paths are the directories one peerfs instance uses. Two instances with different Paths (two
// --home directories) are two independent devices on one machine.
type Paths struct {
	Config  string // config file and identity (secrets, mode 0700)
	Data    string // state that must survive (resume records)
	Cache   string // state that may be thrown away (fetched chunks)
	Runtime string // the control socket; gone at reboot
}

// ResolvePaths returns the directories for home, the --home flag. An empty home falls back to
// $PEERFS_HOME; when both are empty the XDG base directories are used:
//
//	config   $XDG_CONFIG_HOME/peerfs  (~/.config/peerfs)
//	data     $XDG_DATA_HOME/peerfs    (~/.local/share/peerfs)
//	cache    $XDG_CACHE_HOME/peerfs   (~/.cache/peerfs)
//	runtime  $XDG_RUNTIME_DIR/peerfs  (/tmp/peerfs-UID)
//
// With a home directory everything lives under it: HOME/config, HOME/data, HOME/cache, HOME/run.
// All returned paths are absolute. Nothing is created.
func ResolvePaths(home string) (Paths, error) {
	if home == "" {
		home = os.Getenv(EnvHome)
	}
	if home != "" {
		abs, err := filepath.Abs(home)
		if err != nil {
			return Paths{}, fmt.Errorf("resolving home directory %q: %w", home, err)
		}
		return Paths{
			Config:  filepath.Join(abs, "config"),
			Data:    filepath.Join(abs, "data"),
			Cache:   filepath.Join(abs, "cache"),
			Runtime: filepath.Join(abs, "run"),
		}, nil
	}

	var userHome string
	needHome := func() (string, error) {
		if userHome != "" {
			return userHome, nil
		}
		h, err := os.UserHomeDir()
		if err != nil || h == "" {
			return "", errors.New("cannot find your home directory: set $HOME, or pass --home DIR (or $PEERFS_HOME)")
		}
		userHome = h
		return h, nil
	}
	// xdg returns $env/peerfs, or ~/def/peerfs when $env is unset. The XDG base directory
	// specification says relative values are invalid and must be ignored.
	xdg := func(env, def string) (string, error) {
		if v := os.Getenv(env); filepath.IsAbs(v) {
			return filepath.Join(v, "peerfs"), nil
		}
		h, err := needHome()
		if err != nil {
			return "", err
		}
		return filepath.Join(h, def, "peerfs"), nil
	}

	var p Paths
	var err error
	if p.Config, err = xdg("XDG_CONFIG_HOME", ".config"); err != nil {
		return Paths{}, err
	}
	if p.Data, err = xdg("XDG_DATA_HOME", filepath.Join(".local", "share")); err != nil {
		return Paths{}, err
	}
	if p.Cache, err = xdg("XDG_CACHE_HOME", ".cache"); err != nil {
		return Paths{}, err
	}
	if v := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(v) {
		p.Runtime = filepath.Join(v, "peerfs")
	} else {
		p.Runtime = fmt.Sprintf("/tmp/peerfs-%d", os.Getuid())
	}
	return p, nil
}

// Socket is the daemon's control socket.
func (p Paths) Socket() string { return filepath.Join(p.Runtime, "peerfs.sock") }

// IdentityDir is where the device key and certificate live: the config directory.
func (p Paths) IdentityDir() string { return p.Config }

// ConfigFile is the config file.
func (p Paths) ConfigFile() string { return filepath.Join(p.Config, "config.json") }

// lockFile serialises edits of the config file.
func (p Paths) lockFile() string { return filepath.Join(p.Config, "config.lock") }
