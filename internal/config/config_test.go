package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/peerfs/peerfs/internal/identity"
)

func TestResolvePaths(t *testing.T) {
	uid := os.Getuid()
	cases := []struct {
		name string
		flag string
		env  map[string]string
		want Paths
	}{
		{
			name: "flag wins over env",
			flag: "/h",
			env:  map[string]string{EnvHome: "/other", "XDG_CONFIG_HOME": "/x"},
			want: Paths{"/h/config", "/h/data", "/h/cache", "/h/run"},
		},
		{
			name: "env home",
			env:  map[string]string{EnvHome: "/e"},
			want: Paths{"/e/config", "/e/data", "/e/cache", "/e/run"},
		},
		{
			name: "xdg defaults",
			env:  map[string]string{"HOME": "/u"},
			want: Paths{"/u/.config/peerfs", "/u/.local/share/peerfs", "/u/.cache/peerfs", fmt.Sprintf("/tmp/peerfs-%d", uid)},
		},
		{
			name: "xdg set",
			env: map[string]string{"HOME": "/u", "XDG_CONFIG_HOME": "/c", "XDG_DATA_HOME": "/d",
				"XDG_CACHE_HOME": "/k", "XDG_RUNTIME_DIR": "/run/user/7"},
			want: Paths{"/c/peerfs", "/d/peerfs", "/k/peerfs", "/run/user/7/peerfs"},
		},
		{
			name: "relative xdg ignored",
			env:  map[string]string{"HOME": "/u", "XDG_CONFIG_HOME": "rel", "XDG_RUNTIME_DIR": "run"},
			want: Paths{"/u/.config/peerfs", "/u/.local/share/peerfs", "/u/.cache/peerfs", fmt.Sprintf("/tmp/peerfs-%d", uid)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{EnvHome, "HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR"} {
				t.Setenv(k, tc.env[k])
			}
			got, err := ResolvePaths(tc.flag)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestPathsFiles(t *testing.T) {
	p := Paths{Config: "/c", Runtime: "/r"}
	if got := p.Socket(); got != "/r/peerfs.sock" {
		t.Errorf("Socket = %q", got)
	}
	if got := p.IdentityDir(); got != "/c" {
		t.Errorf("IdentityDir = %q", got)
	}
	if got := p.ConfigFile(); got != "/c/config.json" {
		t.Errorf("ConfigFile = %q", got)
	}
}

func TestResolvePathsRelativeHome(t *testing.T) {
	p, err := ResolvePaths("rel")
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(p.Config) {
		t.Errorf("Config %q is not absolute", p.Config)
	}
}

var (
	idA = identity.DeviceID{1}
	idB = identity.DeviceID{2}
)

func validFile() *File {
	return &File{
		Name:   "laptop",
		Listen: ":7462",
		Peers: []Peer{
			{Name: "desktop", ID: idA, Addr: "192.0.2.1:7462"},
			{Name: "server-1.home", ID: idB},
		},
		Shares: []Share{
			{Name: "projects", Path: "/home/u/projects", Peers: []string{"desktop"}},
			{Name: "Photos_2024.raw", Path: "/srv/photos", ReadOnly: true, Peers: []string{"desktop", "server-1.home"}},
		},
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(f *File)
		match string // "" means valid
	}{
		{"valid", func(f *File) {}, ""},
		{"empty", func(f *File) { *f = File{} }, ""},
		{"duplicate peer name", func(f *File) { f.Peers[1].Name = "desktop" }, "unique"},
		{"duplicate peer id", func(f *File) { f.Peers[1].ID = idA }, "same device ID"},
		{"zero peer id", func(f *File) { f.Peers[1].ID = identity.DeviceID{} }, "no device ID"},
		{"upper-case peer name", func(f *File) { f.Peers[0].Name = "Desktop"; f.Shares = nil }, "lower-case"},
		{"colon in peer name", func(f *File) { f.Peers[0].Name = "a:b"; f.Shares = nil }, "lower-case"},
		{"empty peer name", func(f *File) { f.Peers[0].Name = ""; f.Shares = nil }, "1-64"},
		{"long peer name", func(f *File) { f.Peers[0].Name = strings.Repeat("a", 65); f.Shares = nil }, "1-64"},
		{"bad peer addr", func(f *File) { f.Peers[0].Addr = "host" }, "HOST:PORT"},
		{"bad peer port", func(f *File) { f.Peers[0].Addr = "host:http" }, "port"},
		{"bad listen", func(f *File) { f.Listen = "7462" }, "listen"},
		{"bad metrics", func(f *File) { f.Metrics = "7463" }, "metrics"},
		{"metrics", func(f *File) { f.Metrics = "127.0.0.1:7463" }, ""},
		{"share name with slash", func(f *File) { f.Shares[0].Name = "a/b" }, "letters"},
		{"share name with dot first", func(f *File) { f.Shares[0].Name = ".hidden" }, "not start"},
		{"share name too long", func(f *File) { f.Shares[0].Name = strings.Repeat("s", 65) }, "1-64"},
		{"share name 64", func(f *File) { f.Shares[0].Name = strings.Repeat("s", 64) }, ""},
		{"duplicate share", func(f *File) { f.Shares[1].Name = "projects" }, "unique"},
		{"relative share path", func(f *File) { f.Shares[0].Path = "projects" }, "absolute"},
		{"unknown share peer", func(f *File) { f.Shares[0].Peers = []string{"ghost"} }, "not configured"},
		{"relay", func(f *File) {
			f.Relays = []string{"peerfs-relay://relay.example.org/?id=" + idA.String() + "&token=t"}
		}, ""},
		{"relay without id", func(f *File) { f.Relays = []string{"peerfs-relay://relay.example.org:443/"} }, "no id"},
		{"relay bad scheme", func(f *File) { f.Relays = []string{"https://relay.example.org/?id=" + idA.String()} }, "scheme"},
		{"relay twice", func(f *File) {
			f.Relays = []string{"peerfs-relay://relay.example.org/?id=" + idA.String(), "peerfs-relay://relay.example.org:443/?id=" + idB.String()}
		}, "listed twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := validFile()
			tc.edit(f)
			err := f.Validate()
			if tc.match == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one matching %q", tc.match)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.match) {
				t.Errorf("error %q does not mention %q", err, tc.match)
			}
		})
	}
}

func TestLookups(t *testing.T) {
	f := validFile()
	if p := f.PeerByName("desktop"); p == nil || p.ID != idA {
		t.Errorf("PeerByName(desktop) = %+v", p)
	}
	if p := f.PeerByName("nobody"); p != nil {
		t.Errorf("PeerByName(nobody) = %+v", p)
	}
	if p := f.PeerByID(idB); p == nil || p.Name != "server-1.home" {
		t.Errorf("PeerByID(idB) = %+v", p)
	}
	if p := f.PeerByID(identity.DeviceID{9}); p != nil {
		t.Errorf("PeerByID(unknown) = %+v", p)
	}
	if s := f.ShareByName("projects"); s == nil || s.Path != "/home/u/projects" {
		t.Errorf("ShareByName(projects) = %+v", s)
	}
	if s := f.ShareByName("nope"); s != nil {
		t.Errorf("ShareByName(nope) = %+v", s)
	}
	shareNames := func(ss []Share) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Name)
		}
		return out
	}
	if got := fmt.Sprint(shareNames(f.SharesFor(idA))); got != "[projects Photos_2024.raw]" {
		t.Errorf("SharesFor(idA) = %s", got)
	}
	if got := fmt.Sprint(shareNames(f.SharesFor(idB))); got != "[Photos_2024.raw]" {
		t.Errorf("SharesFor(idB) = %s", got)
	}
	if got := f.SharesFor(identity.DeviceID{9}); got != nil {
		t.Errorf("SharesFor(unknown) = %v", got)
	}
}

func TestResolveListen(t *testing.T) {
	cases := []struct {
		name      string
		flag, env string
		file      *File
		want      string
	}{
		{"flag", ":1", ":2", &File{Listen: ":3"}, ":1"},
		{"env", "", ":2", &File{Listen: ":3"}, ":2"},
		{"file", "", "", &File{Listen: ":3"}, ":3"},
		{"default", "", "", &File{}, DefaultListen},
		{"nil file", "", "", nil, DefaultListen},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvListen, tc.env)
			if got := tc.file.ResolveListen(tc.flag); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestResolveMetrics(t *testing.T) {
	cases := []struct {
		name      string
		flag, env string
		file      *File
		want      string
	}{
		{"flag", ":1", ":2", &File{Metrics: ":3"}, ":1"},
		{"env", "", ":2", &File{Metrics: ":3"}, ":2"},
		{"file", "", "", &File{Metrics: ":3"}, ":3"},
		{"off by default", "", "", &File{}, ""},
		{"nil file", "", "", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvMetrics, tc.env)
			if got := tc.file.ResolveMetrics(tc.flag); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func testPaths(t *testing.T) Paths {
	t.Helper()
	p, err := ResolvePaths(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadMissing(t *testing.T) {
	_, err := Load(testPaths(t))
	if !errors.Is(err, ErrNotInitialized) {
		t.Fatalf("got %v, want ErrNotInitialized", err)
	}
	if !strings.Contains(err.Error(), "peerfs init") {
		t.Errorf("error %q does not say to run peerfs init", err)
	}
}

func TestCreateLoadUpdate(t *testing.T) {
	p := testPaths(t)
	if err := Create(p, validFile()); err != nil {
		t.Fatal(err)
	}
	if err := Create(p, &File{Name: "again"}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second Create: got %v, want fs.ErrExist", err)
	}
	fi, err := os.Stat(p.ConfigFile())
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o600 {
		t.Errorf("config file mode %04o, want 0600", m)
	}
	di, err := os.Stat(p.Config)
	if err != nil {
		t.Fatal(err)
	}
	if m := di.Mode().Perm(); m != 0o700 {
		t.Errorf("config dir mode %04o, want 0700", m)
	}

	f, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "laptop" || len(f.Peers) != 2 || f.Peers[0].ID != idA || len(f.Shares) != 2 || !f.Shares[1].ReadOnly {
		t.Fatalf("loaded %+v", f)
	}

	// A failing edit writes nothing.
	before, _ := os.ReadFile(p.ConfigFile())
	errEdit := errors.New("edit refused")
	if err := Update(p, func(f *File) error { f.Name = "changed"; return errEdit }); !errors.Is(err, errEdit) {
		t.Fatalf("got %v, want the edit's error", err)
	}
	// An edit that breaks a rule writes nothing.
	if err := Update(p, func(f *File) error { f.Shares[0].Peers = []string{"ghost"}; return nil }); !errors.Is(err, ErrInvalid) {
		t.Fatalf("got %v, want ErrInvalid", err)
	}
	after, _ := os.ReadFile(p.ConfigFile())
	if string(before) != string(after) {
		t.Fatal("a failed Update changed the file")
	}

	if err := Update(p, func(f *File) error { f.Name = "renamed"; return nil }); err != nil {
		t.Fatal(err)
	}
	f, err = Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "renamed" {
		t.Errorf("name %q after Update", f.Name)
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(p.Config)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".config-") {
			t.Errorf("leftover temp file %s", e.Name())
		}
	}
}

func TestFileJSONKeys(t *testing.T) {
	p := testPaths(t)
	if err := Create(p, validFile()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p.ConfigFile())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"name"`, `"listen"`, `"peers"`, `"shares"`, `"device_id"`, `"addr"`, `"path"`, `"read_only"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("config file lacks key %s:\n%s", key, b)
		}
	}
	if !strings.Contains(string(b), idA.String()) {
		t.Errorf("config file lacks the device ID in its text form:\n%s", b)
	}
}

func TestLoadRejectsBadFile(t *testing.T) {
	cases := []struct {
		name, body, match string
	}{
		{"not json", "{", "not valid JSON"},
		{"bad device id", `{"name":"x","peers":[{"name":"a","device_id":"NOT-AN-ID"}],"shares":[]}`, "not valid JSON"},
		{"invalid", `{"name":"x","peers":[],"shares":[{"name":"s","path":"rel","peers":[]}]}`, "absolute"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := testPaths(t)
			if err := os.MkdirAll(p.Config, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p.ConfigFile(), []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(p)
			if err == nil || !strings.Contains(err.Error(), tc.match) {
				t.Fatalf("got %v, want an error mentioning %q", err, tc.match)
			}
		})
	}
}

// TestUpdateSerialises runs concurrent read-modify-write edits; with the lock none is lost.
func TestUpdateSerialises(t *testing.T) {
	p := testPaths(t)
	if err := Create(p, &File{Name: "x"}); err != nil {
		t.Fatal(err)
	}
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := Update(p, func(f *File) error {
				f.Peers = append(f.Peers, Peer{Name: fmt.Sprintf("p%d", i), ID: identity.DeviceID{byte(i + 1)}})
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	f, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Peers) != n {
		t.Errorf("%d peers after %d concurrent adds", len(f.Peers), n)
	}
}
