package main_test

// The release artefacts as a user gets them: scripts/dist.sh builds the Debian package and
// the archive for this machine's architecture, dpkg installs the package into a clean root
// (its own database, nothing touches the system's), and the installed files are checked:
// the binary's version and commit, the man pages, the completions, the systemd user unit.

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestDistPackageInstalls(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the release .deb (and nfpm, a minute the first time): run without -short")
	}
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skipf("the .deb is built for linux/amd64 and linux/arm64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	for _, tool := range []string{"dpkg", "dpkg-deb", "git", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the package is installed with dpkg (apt-get install dpkg git coreutils)", tool)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("installing a .deb, even into a separate root, needs root: run as root")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		out, err := cmd.Output()
		if err != nil {
			t.Skipf("git %s: %v: the version comes from git, run in a checkout", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	wantVersion := git("describe", "--tags", "--always", "--dirty")
	wantCommit := git("rev-parse", "HEAD")

	out := t.TempDir()
	archiveTarget := "archive/linux/" + runtime.GOARCH
	dist := exec.Command(filepath.Join(repo, "scripts/dist.sh"), "-o", out, "deb/"+runtime.GOARCH, archiveTarget)
	dist.Dir = repo
	if b, err := dist.CombinedOutput(); err != nil {
		t.Fatalf("scripts/dist.sh: %v\n%s", err, b)
	}
	debs, _ := filepath.Glob(filepath.Join(out, "peerfs_*_"+runtime.GOARCH+".deb"))
	archives, _ := filepath.Glob(filepath.Join(out, "peerfs_*_linux_"+runtime.GOARCH+".tar.gz"))
	if len(debs) != 1 || len(archives) != 1 {
		t.Fatalf("want one .deb and one .tar.gz in %s, got %q and %q", out, debs, archives)
	}
	if want := "peerfs_" + wantVersion + "_linux_" + runtime.GOARCH + ".tar.gz"; filepath.Base(archives[0]) != want {
		t.Errorf("archive is named %s, want %s", filepath.Base(archives[0]), want)
	}
	sums := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
	sums.Dir = out
	if b, err := sums.CombinedOutput(); err != nil || strings.Count(string(b), ": OK") != 2 {
		t.Errorf("sha256sum --check SHA256SUMS: %v\n%s", err, b)
	}

	// A clean root with an empty dpkg database.
	root := t.TempDir()
	for _, dir := range []string{"info", "updates", "triggers"} {
		if err := os.MkdirAll(filepath.Join(root, "var/lib/dpkg", dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dpkg := func(args ...string) string {
		t.Helper()
		b, err := exec.Command("dpkg", append([]string{"--root=" + root}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("dpkg %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return string(b)
	}
	dpkg("--install", debs[0])
	installed := true
	t.Cleanup(func() {
		if installed {
			exec.Command("dpkg", "--root="+root, "--remove", "peerfs").Run()
		}
	})
	if status := dpkg("--status", "peerfs"); !strings.Contains(status, "Status: install ok installed") {
		t.Fatalf("dpkg --status peerfs after install:\n%s", status)
	}

	// The installed binary says which version and commit it is.
	peerfsBin := filepath.Join(root, "usr/bin/peerfs")
	b, err := exec.Command(peerfsBin, "--version").Output()
	if err != nil {
		t.Fatalf("installed peerfs --version: %v", err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		label, value, _ := strings.Cut(line, " ")
		fields[label] = strings.TrimSpace(value)
	}
	if fields["peerfs"] != wantVersion || fields["commit"] != wantCommit || fields["platform"] != "linux/"+runtime.GOARCH {
		t.Errorf("installed peerfs --version says:\n%s\nwant version %s, commit %s, platform linux/%s", b, wantVersion, wantCommit, runtime.GOARCH)
	}
	if fields["built"] == "" || fields["built"] == "unknown" {
		t.Errorf("installed peerfs --version has no build date:\n%s", b)
	}

	// Man pages, one per command, compressed as Debian wants them.
	for _, page := range []string{"peerfs.1.gz", "peerfs-version.1.gz", "peerfs-mount.1.gz"} {
		text := gunzip(t, filepath.Join(root, "usr/share/man/man1", page))
		if !strings.Contains(text, ".TH ") || !strings.Contains(text, "peerfs "+wantVersion) {
			t.Errorf("man page %s has no header naming peerfs %s:\n%.300s", page, wantVersion, text)
		}
	}

	// Completions where bash-completion, zsh and fish look for them.
	for path, marker := range map[string]string{
		"usr/share/bash-completion/completions/peerfs":    "__start_peerfs",
		"usr/share/zsh/vendor-completions/_peerfs":        "#compdef peerfs",
		"usr/share/fish/vendor_completions.d/peerfs.fish": "complete -c peerfs",
	} {
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Error(err)
			continue
		}
		if !strings.Contains(string(b), marker) {
			t.Errorf("/%s lacks %q", path, marker)
		}
	}

	// The systemd user unit starts the installed binary, by its path.
	unit, err := os.ReadFile(filepath.Join(root, "usr/lib/systemd/user/peerfs.service"))
	if err != nil {
		t.Fatal(err)
	}
	var execStart string
	for _, line := range strings.Split(string(unit), "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			execStart = v
		}
	}
	argv := strings.Fields(execStart)
	if len(argv) != 2 || argv[0] != "/usr/bin/peerfs" || argv[1] != "daemon" {
		t.Errorf("unit's ExecStart=%s, want /usr/bin/peerfs daemon", execStart)
	} else if fi, err := os.Stat(filepath.Join(root, argv[0])); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("unit's ExecStart names %s, which is not an installed executable: %v", argv[0], err)
	}

	// The archive holds the same pieces under one top directory.
	top := "peerfs_" + wantVersion + "_linux_" + runtime.GOARCH + "/"
	names := tarNames(t, archives[0])
	for _, want := range []string{"peerfs", "README.md", "systemd/peerfs.service", "completions/peerfs.bash",
		"completions/_peerfs", "completions/peerfs.fish", "man/man1/peerfs.1"} {
		if !names[top+want] {
			t.Errorf("archive lacks %s%s", top, want)
		}
	}

	// Removing the package leaves the root as it was.
	dpkg("--remove", "peerfs")
	installed = false
	if _, err := os.Stat(peerfsBin); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after dpkg --remove, /usr/bin/peerfs: %v", err)
	}
}

func gunzip(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(b)
}

// tarNames lists the regular files of a .tar.gz.
func tarNames(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	names := map[string]bool{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Typeflag == tar.TypeReg {
			names[h.Name] = true
		}
	}
}
