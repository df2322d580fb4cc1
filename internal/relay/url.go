package relay

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/peerfs/peerfs/internal/identity"
)

// Scheme is the scheme of a relay URL.
const Scheme = "peerfs-relay"

// URL names a relay and what a device needs to trust it:
//
//	peerfs-relay://HOST[:PORT]/?id=DEVICEID[&token=TOKEN]
//
// The port defaults to 443. id pins the relay's key: a device refuses a relay whose TLS
// certificate does not hash to it. token is the access token of a private relay; it is a
// secret, so "peerfs relay serve" leaves it out of the URL it prints unless asked.
type URL struct {
	Host  string // host:port
	ID    identity.DeviceID
	Token string
}

// ParseURL parses a relay URL; the error says what is wrong with it.
func ParseURL(s string) (URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return URL{}, fmt.Errorf("relay URL %q: %v: want %s://HOST:PORT/?id=DEVICEID", s, err, Scheme)
	}
	if u.Scheme != Scheme {
		return URL{}, fmt.Errorf("relay URL %q: scheme %q: want %s://HOST:PORT/?id=DEVICEID", s, u.Scheme, Scheme)
	}
	if u.Hostname() == "" {
		return URL{}, fmt.Errorf("relay URL %q has no host: want %s://HOST:PORT/?id=DEVICEID", s, Scheme)
	}
	if p := u.Path; p != "" && p != "/" {
		return URL{}, fmt.Errorf("relay URL %q: unexpected path %q: want %s://HOST:PORT/?id=DEVICEID", s, p, Scheme)
	}
	q := u.Query()
	raw := q.Get("id")
	if raw == "" {
		return URL{}, fmt.Errorf("relay URL %q has no id: the relay's ID is on the first line \"peerfs relay serve\" prints", s)
	}
	id, err := identity.ParseDeviceID(raw)
	if err != nil {
		return URL{}, fmt.Errorf("relay URL %q: id: %w", s, err)
	}
	token := q.Get("token")
	if len(token) > MaxTokenLen {
		return URL{}, fmt.Errorf("relay URL %q: token longer than %d bytes", s, MaxTokenLen)
	}
	port := u.Port()
	if port == "" {
		port = DefaultPort
	}
	return URL{Host: net.JoinHostPort(u.Hostname(), port), ID: id, Token: token}, nil
}

// String formats u, with its token if it has one.
func (u URL) String() string {
	q := url.Values{"id": {u.ID.String()}}
	if u.Token != "" {
		q.Set("token", u.Token)
	}
	// Encode sorts keys: id before token.
	return (&url.URL{Scheme: Scheme, Host: u.Host, Path: "/", RawQuery: q.Encode()}).String()
}

// Redacted is u without its token, for logs and status output.
func (u URL) Redacted() string {
	u.Token = ""
	return u.String()
}
