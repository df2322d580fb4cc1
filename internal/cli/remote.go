package cli

import (
	"path"
	"strings"

	"github.com/peerfs/peerfs/internal/api"
	"github.com/peerfs/peerfs/internal/config"
)

// Remote is a parsed PEER:SHARE/PATH spec.
type Remote struct {
	Peer  string
	Share string // empty: the peer's list of shares (ls only)
	Path  string // relative to the share, cleaned, no leading slash; empty: the share's root
}

func (r Remote) String() string {
	switch {
	case r.Share == "":
		return r.Peer + ":"
	case r.Path == "":
		return r.Peer + ":" + r.Share
	}
	return r.Peer + ":" + r.Share + "/" + r.Path
}

// ParseRemote parses PEER:SHARE[/PATH]. With needShare false it also accepts "PEER:" and
// "PEER", which name the peer's list of shares. The path is cleaned and loses its leading
// slashes; a ".." component is refused here, before anything is sent, because the owner
// would refuse it anyway and the user should hear why.
func ParseRemote(s string, needShare bool) (Remote, error) {
	peer, rest, hasColon := strings.Cut(s, ":")
	if !hasColon && needShare {
		return Remote{}, usageErrorf("%q is not a remote path: write PEER:SHARE or PEER:SHARE/PATH (see \"peerfs peer ls\" and \"peerfs ls PEER\")", s)
	}
	if err := config.CheckPeerName(peer); err != nil {
		return Remote{}, usageErrorf("%q: %v: write PEER:SHARE/PATH with a peer from \"peerfs peer ls\"", s, stripInvalid(err))
	}
	r := Remote{Peer: peer}
	rest = strings.TrimLeft(rest, "/")
	share, p, _ := strings.Cut(rest, "/")
	if share == "" {
		if needShare {
			return Remote{}, usageErrorf("%q names no share: write PEER:SHARE or PEER:SHARE/PATH (\"peerfs ls %s\" lists the shares)", s, peer)
		}
		return r, nil
	}
	if err := config.CheckShareName(share); err != nil {
		return Remote{}, usageErrorf("%q: %v", s, stripInvalid(err))
	}
	r.Share = share
	if strings.IndexByte(p, 0) >= 0 {
		return Remote{}, api.Errorf(api.CodePathRefused, "%q: the path holds a NUL byte", s)
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return Remote{}, api.Errorf(api.CodePathRefused, "%q: the path has a \"..\" component: paths stay inside the share, so name the file from the share's root", s)
		}
	}
	p = strings.TrimLeft(path.Clean("/"+p), "/")
	r.Path = p
	return r, nil
}

// stripInvalid drops config's "invalid config: " prefix, which reads oddly on the command line.
func stripInvalid(err error) string {
	return strings.TrimPrefix(err.Error(), config.ErrInvalid.Error()+": ")
}
