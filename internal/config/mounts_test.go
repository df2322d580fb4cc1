package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestRememberedMounts(t *testing.T) {
	p, err := ResolvePaths(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if list, err := LoadMounts(p); err != nil || len(list) != 0 {
		t.Fatalf("no file: %v %v, want none", list, err)
	}
	a := Mount{Peer: "desktop", Share: "projects", Dir: "/mnt/p/", Blksize: 65536}
	b := Mount{Peer: "server", Share: "photos", Dir: "/mnt/photos", NoPassthrough: true, WaitSeconds: 5}
	for _, m := range []Mount{a, b} {
		if err := RememberMount(p, m); err != nil {
			t.Fatal(err)
		}
	}
	a.Dir = "/mnt/p"
	a2 := a
	a2.Inline = 100
	if err := RememberMount(p, a2); err != nil { // same directory: replaces
		t.Fatal(err)
	}
	list, err := LoadMounts(p)
	if err != nil || !reflect.DeepEqual(list, []Mount{a2, b}) {
		t.Fatalf("loaded %+v (%v), want %+v", list, err, []Mount{a2, b})
	}
	fi, err := os.Stat(p.MountsFile())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mounts file: %v, mode %v", err, fi.Mode())
	}
	if err := ForgetMount(p, "/mnt/p/"); err != nil {
		t.Fatal(err)
	}
	if err := ForgetMount(p, "/never/mounted"); err != nil {
		t.Fatal(err)
	}
	if list, _ := LoadMounts(p); !reflect.DeepEqual(list, []Mount{b}) {
		t.Fatalf("after forgetting: %+v", list)
	}
	b2, _ := os.ReadFile(p.MountsFile())
	for _, key := range []string{`"peer"`, `"share"`, `"dir"`, `"no_passthrough"`, `"wait_seconds"`} {
		if !strings.Contains(string(b2), key) {
			t.Errorf("mounts file lacks %s:\n%s", key, b2)
		}
	}
}

func TestLoadMountsDropsUnusableEntries(t *testing.T) {
	p, _ := ResolvePaths(t.TempDir())
	os.MkdirAll(p.Config, 0o700)
	os.WriteFile(p.MountsFile(), []byte(`{"mounts":[
		{"peer":"desktop","share":"projects","dir":"relative"},
		{"peer":"Bad:Name","share":"projects","dir":"/mnt/a"},
		{"peer":"desktop","share":"../x","dir":"/mnt/b"},
		{"peer":"desktop","share":"projects","dir":"/mnt/c","later_field":1}]}`), 0o600)
	list, err := LoadMounts(p)
	if err != nil || len(list) != 1 || list[0].Dir != "/mnt/c" {
		t.Fatalf("got %+v %v, want only /mnt/c", list, err)
	}
	os.WriteFile(p.MountsFile(), []byte("{"), 0o600)
	if _, err := LoadMounts(p); err == nil || !strings.Contains(err.Error(), "fix or remove it") {
		t.Fatalf("bad JSON: %v", err)
	}
}

func TestMountPointFiles(t *testing.T) {
	p, _ := ResolvePaths("/h")
	sock, cache := p.MountSocket("/mnt/p"), p.MountCache("/mnt/p/")
	if filepath.Dir(sock) != "/h/run" || !strings.HasPrefix(filepath.Base(sock), "mount-") || !strings.HasSuffix(sock, ".sock") {
		t.Errorf("socket %s", sock)
	}
	if filepath.Dir(cache) != "/h/cache/foreground" ||
		strings.TrimSuffix(strings.TrimPrefix(filepath.Base(sock), "mount-"), ".sock") != filepath.Base(cache) {
		t.Errorf("cache %s does not match socket %s", cache, sock)
	}
	if p.MountCache("/mnt/q") == cache {
		t.Error("two mount points share a cache")
	}
}
