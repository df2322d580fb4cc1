package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The git clone workload's source: a repository with the shape of a small source tree,
// generated from a fixed seed so every run and machine clones the same bytes.
//
//   - files: n, in about n/10 directories nested up to five deep, so a clone creates
//     directories as well as files and looks names up at every depth;
//   - sizes: log-uniform from 100 B to 50 KiB (median about 2.2 KiB), the range of source
//     files and documents;
//   - contents: lines of words from a small vocabulary, so they compress like text in git's
//     pack and cost what text costs to inflate at checkout.

var repoWords = strings.Fields(`func return if else for range struct type interface package import const var
	error nil true false string int byte map chan select case default go defer buffer read write
	open close peer share mount cache chunk frame header session stream event tree node inode
	offset length size path name mode flags reply request window credit flush sync`)

var repoExts = []string{".go", ".go", ".go", ".c", ".h", ".md", ".txt", ".json", ".yaml", ".sh"}

// gitEnv is the environment git runs with: no system or user configuration, a fixed author
// and date, so the repository is the same everywhere and nothing on the machine changes how
// clone behaves.
func gitEnv() []string {
	return append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=peerfs-bench", "GIT_AUTHOR_EMAIL=bench@localhost",
		"GIT_COMMITTER_NAME=peerfs-bench", "GIT_COMMITTER_EMAIL=bench@localhost",
		"GIT_AUTHOR_DATE=2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z",
		"GIT_TERMINAL_PROMPT=0")
}

func git(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %v %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// makeRepo writes n files into a new repository at dir and commits them.
func makeRepo(ctx context.Context, dir string, n int) error {
	if _, err := exec.LookPath("git"); err != nil {
		return fmt.Errorf("git is not installed (scripts/deps.sh installs it)")
	}
	os.RemoveAll(dir)
	r := rand.New(rand.NewChaCha8([32]byte{7}))
	type node struct {
		path  string
		depth int
	}
	dirs := []node{{"", 0}}
	for len(dirs) < max(n/10, 3) {
		parent := dirs[r.IntN(len(dirs))]
		if parent.depth >= 5 {
			continue
		}
		name := fmt.Sprintf("%s%d", repoWords[r.IntN(len(repoWords))], len(dirs))
		dirs = append(dirs, node{filepath.Join(parent.path, name), parent.depth + 1})
	}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(dir, d.path), 0o755); err != nil {
			return err
		}
	}
	var line bytes.Buffer
	for i := range n {
		d := dirs[r.IntN(len(dirs))]
		name := fmt.Sprintf("%s_%d%s", repoWords[r.IntN(len(repoWords))], i, repoExts[r.IntN(len(repoExts))])
		size := int(100 * math.Pow(512, r.Float64())) // 100 B .. 50 KiB, log-uniform
		buf := make([]byte, 0, size+80)
		for len(buf) < size {
			line.Reset()
			line.WriteString(strings.Repeat("\t", r.IntN(4)))
			for w := 3 + r.IntN(8); w > 0; w-- {
				line.WriteString(repoWords[r.IntN(len(repoWords))])
				line.WriteByte(' ')
			}
			line.WriteByte('\n')
			buf = append(buf, line.Bytes()...)
		}
		if err := os.WriteFile(filepath.Join(dir, d.path, name), buf[:size], 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "benchmark tree"}} {
		if err := git(ctx, dir, args...); err != nil {
			return err
		}
	}
	return nil
}

// cloneArgs clone src into dest. The file:// URL makes git use its pack protocol, as a clone
// from a server does (pack sent, index-pack writes it, checkout writes the tree), instead of
// copying or hard-linking the object files: a hard-linked native clone would not be
// comparable with one into a mount.
func cloneArgs(src, dest string) []string {
	return []string{"clone", "-q", "file://" + src, dest}
}
