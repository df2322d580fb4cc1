//go:build !linux

package fusefs

import "github.com/hanwen/go-fuse/v2/fuse"

func probePassthrough(srv *fuse.Server) (why string) { return "FUSE passthrough exists only on Linux" }

func setKernelReadahead(dir string, bytes int64) error { return nil }
