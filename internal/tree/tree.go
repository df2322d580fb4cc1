// Package tree is the mount side's replica of a peer's share metadata: the directories it has
// listed, with every entry's attributes and the inline content of small files. Once a
// directory is listed, lookups and stats in it cost no round trip; change events pushed by the
// owner keep the replica current and say what the kernel must forget. It does no I/O itself.
package tree

import (
	"encoding/binary"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/peerfs/peerfs/internal/wire"
)

// Replica holds listed directories by share-relative path ("" is the root). Safe for
// concurrent use.
type Replica struct {
	// TTL bounds how long a listing is trusted when no change events arrive (0: forever,
	// the normal case while the owner pushes events).
	TTL time.Duration
	// InlineBudget bounds the inline file contents kept in memory (0: DefaultInlineBudget).
	// Past it, the contents of the directories listed longest ago are dropped: their files
	// are then read like any other, with a round trip.
	InlineBudget int64

	mu     sync.Mutex
	root   wire.Entry
	dirs   map[string]*dir
	inline int64 // bytes of inline contents held, over all dirs and spares
	// spare keeps the inline contents of entries forgotten on an event, by path: when the
	// entry is learnt again with the same contents (same inode, size and mtime: a chmod's
	// event, say), they come back with it.
	spare map[string]wire.Entry
}

// DefaultInlineBudget is the inline contents one mount keeps in memory at most.
const DefaultInlineBudget = 64 << 20

type dir struct {
	inline  int64 // bytes of inline contents among entries
	entries map[string]entry
	// unknown names changed on the owner: their entries must be asked for again. A change
	// event can overtake or trail this mount's own operations on the same name, so the
	// replica never trusts an event's content; it only forgets.
	unknown map[string]bool
	listed  time.Time
}

// entry is a listed name's attributes as the replica keeps them: a wire.Entry without its
// name (the map's key) and with its type-specific fields folded into one, 80 bytes where a
// wire.Entry takes 136. A folder of a million names pays for it a million times.
type entry struct {
	mode, nlink, uid, gid     uint32 // mode carries hasData beside the wire's type and permission bits
	size                      uint64
	mtimeNs, atimeNs, ctimeNs int64
	ino                       uint64
	// aux is a regular file's inline contents, a symlink's target, or a device's number
	// (8 bytes, little endian): what only some types have.
	aux []byte
}

// hasData marks an entry whose inline contents are known (an empty file's too). It lies
// above every bit a wire mode uses.
const hasData = 1 << 31

func compact(e *wire.Entry) entry {
	c := entry{mode: e.Mode &^ hasData, nlink: e.Nlink, uid: e.UID, gid: e.GID, size: e.Size,
		mtimeNs: e.MtimeNs, atimeNs: e.AtimeNs, ctimeNs: e.CtimeNs, ino: e.Ino}
	switch {
	case e.IsSymlink():
		c.aux = []byte(e.Target)
	case e.Rdev != 0:
		c.aux = binary.LittleEndian.AppendUint64(nil, e.Rdev)
	case e.HasData:
		c.aux, c.mode = e.Data, c.mode|hasData
	}
	return c
}

func (c *entry) expand(name string) wire.Entry {
	e := wire.Entry{Name: name, Mode: c.mode &^ hasData, Nlink: c.nlink, UID: c.uid, GID: c.gid,
		Size: c.size, MtimeNs: c.mtimeNs, AtimeNs: c.atimeNs, CtimeNs: c.ctimeNs, Ino: c.ino}
	switch {
	case c.mode&hasData != 0:
		e.Data, e.HasData = c.aux, true
	case e.IsSymlink():
		e.Target = string(c.aux)
	case len(c.aux) == 8:
		e.Rdev = binary.LittleEndian.Uint64(c.aux)
	}
	return e
}

// inlineLen is the bytes of inline contents the entry holds.
func (c *entry) inlineLen() int64 {
	if c.mode&hasData == 0 {
		return 0
	}
	return int64(len(c.aux))
}

// New returns an empty replica.
func New() *Replica { return &Replica{dirs: map[string]*dir{}, spare: map[string]wire.Entry{}} }

// sameContents reports whether two entries describe the same contents of one file.
func sameContents(a, b *wire.Entry) bool {
	return a.IsRegular() && b.IsRegular() && a.Ino == b.Ino && a.Size == b.Size && a.MtimeNs == b.MtimeNs
}

// setSpare keeps e's inline contents aside for p. r.mu must be held.
func (r *Replica) setSpare(p string, e wire.Entry) {
	r.dropSpare(p)
	if len(e.Data) > 0 {
		r.spare[p] = e
		r.inline += int64(len(e.Data))
	}
}

// dropSpare forgets what is kept aside for p. r.mu must be held.
func (r *Replica) dropSpare(p string) {
	if e, ok := r.spare[p]; ok {
		r.inline -= int64(len(e.Data))
		delete(r.spare, p)
	}
}

// setEntry records e under name in d, keeping the inline accounting. r.mu must be held.
func (r *Replica) setEntry(d *dir, name string, e entry) {
	r.delEntry(d, name)
	d.entries[name] = e
	d.inline += e.inlineLen()
	r.inline += e.inlineLen()
}

// delEntry removes name from d. r.mu must be held.
func (r *Replica) delEntry(d *dir, name string) {
	if old, ok := d.entries[name]; ok {
		d.inline -= old.inlineLen()
		r.inline -= old.inlineLen()
		delete(d.entries, name)
	}
}

// setDir records d as the listing of dirPath. r.mu must be held.
func (r *Replica) setDir(dirPath string, d *dir) {
	r.delDir(dirPath)
	r.dirs[dirPath] = d
	r.inline += d.inline
}

// delDir drops the listing of dirPath. r.mu must be held.
func (r *Replica) delDir(dirPath string) {
	if d := r.dirs[dirPath]; d != nil {
		r.inline -= d.inline
		delete(r.dirs, dirPath)
	}
}

// trim drops inline contents, from the directories listed longest ago, until what is kept
// fits the budget. r.mu must be held.
func (r *Replica) trim() {
	budget := r.InlineBudget
	if budget <= 0 {
		budget = DefaultInlineBudget
	}
	if r.inline <= budget {
		return
	}
	for p := range r.spare {
		r.dropSpare(p)
	}
	type aged struct {
		d      *dir
		listed time.Time
	}
	var ds []aged
	for _, d := range r.dirs {
		if d.inline > 0 {
			ds = append(ds, aged{d, d.listed})
		}
	}
	slices.SortFunc(ds, func(a, b aged) int { return a.listed.Compare(b.listed) })
	for _, a := range ds {
		if r.inline <= budget/2 { // some slack, so the next listing does not trim again
			return
		}
		for name, e := range a.d.entries {
			if e.inlineLen() > 0 {
				e.aux, e.mode = nil, e.mode&^hasData
				r.setEntry(a.d, name, e)
			}
		}
	}
}

func (r *Replica) fresh(d *dir) bool {
	return d != nil && (r.TTL == 0 || time.Since(d.listed) < r.TTL)
}

// Split returns the parent directory and base name of a share-relative path.
func Split(p string) (string, string) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "", p
	}
	return p[:i], p[i+1:]
}

// Lookup answers for name in directory dirPath: its entry and whether it exists. listed says
// whether the answer is authoritative (the directory is listed); if not, ask the owner.
func (r *Replica) Lookup(dirPath, name string) (e wire.Entry, found, listed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.dirs[dirPath]
	if !r.fresh(d) {
		return wire.Entry{}, false, false
	}
	if d.unknown[name] {
		return wire.Entry{}, false, false
	}
	c, found := d.entries[name]
	if !found {
		return wire.Entry{}, false, true
	}
	return c.expand(name), true, true
}

// DirListed reports whether dirPath's listing is known (even if some names in it are not).
func (r *Replica) DirListed(dirPath string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fresh(r.dirs[dirPath])
}

// InvalidateEntry forgets the attributes of one path, keeping its listing if it is a
// directory: the next stat asks the owner.
func (r *Replica) InvalidateEntry(p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgetEntry(p)
}

// Invalidate forgets what is known of one path without concluding anything: the next
// lookup asks the owner. Listed directories below it are dropped.
func (r *Replica) Invalidate(p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgetEntry(p)
	if p != "" {
		r.dropBelow(p)
	}
}

// forgetEntry marks p unknown in its parent's listing. r.mu must be held.
func (r *Replica) forgetEntry(p string) {
	if p == "" {
		r.root = wire.Entry{}
		return
	}
	dirPath, name := Split(p)
	if d := r.dirs[dirPath]; d != nil {
		if c, ok := d.entries[name]; ok && c.inlineLen() > 0 {
			r.setSpare(p, c.expand(name))
		}
		r.delEntry(d, name)
		if d.unknown == nil {
			d.unknown = map[string]bool{}
		}
		d.unknown[name] = true
	}
}

// Stat returns the cached entry of a path, if its parent is listed.
func (r *Replica) Stat(p string) (wire.Entry, bool) {
	if p == "" {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.root, r.root.Mode != 0
	}
	dirPath, name := Split(p)
	e, found, listed := r.Lookup(dirPath, name)
	return e, found && listed
}

// DirEntry is what a listing shows of an entry: its name, type and inode number.
type DirEntry struct {
	Name string
	Mode uint32 // wire type bits and permission bits
	Ino  uint64
}

// Entries returns a listed directory's entries, sorted by name, or false. They are copied
// small: a listing of a million entries copies and sorts 32 bytes of each, not its Entry.
func (r *Replica) Entries(dirPath string) ([]DirEntry, bool) {
	r.mu.Lock()
	d := r.dirs[dirPath]
	if !r.fresh(d) || len(d.unknown) > 0 {
		r.mu.Unlock()
		return nil, false
	}
	out := make([]DirEntry, 0, len(d.entries))
	for name, e := range d.entries {
		out = append(out, DirEntry{Name: name, Mode: e.mode &^ hasData, Ino: e.ino})
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, true
}

// SetDir records a directory listing.
func (r *Replica) SetDir(dirPath string, entries []wire.Entry) {
	l := r.NewListing()
	l.Add(entries)
	r.SetListing(dirPath, l)
}

// Listing gathers a directory's entries as they arrive, a reply frame at a time, already in
// the replica's form: a listing of a million names never exists as a million wire.Entry.
type Listing struct {
	d    *dir
	keep int64 // inline contents kept at most: what trim would leave of this listing alone
}

// NewListing starts a listing for SetListing.
func (r *Replica) NewListing() *Listing {
	budget := r.InlineBudget
	if budget <= 0 {
		budget = DefaultInlineBudget
	}
	return &Listing{d: &dir{entries: map[string]entry{}}, keep: budget / 2}
}

// Add records entries in the listing. Inline contents past the listing's share of the
// budget are not kept: trim would drop them at once.
func (l *Listing) Add(entries []wire.Entry) {
	for i := range entries {
		c := compact(&entries[i])
		if n := c.inlineLen(); n > 0 && l.d.inline+n > l.keep {
			c.aux, c.mode = nil, c.mode&^hasData
		}
		l.d.entries[entries[i].Name] = c
		l.d.inline += c.inlineLen()
	}
}

// SetListing records l as the listing of dirPath; l must not be used after.
func (r *Replica) SetListing(dirPath string, l *Listing) {
	l.d.listed = time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setDir(dirPath, l.d)
	r.trim()
	l.d = nil
}

// Put records the attributes of one path (in its parent's listing, if listed). Inline data
// is kept if e carries it, or if e describes the same contents as the entry it replaces
// (same inode, size and modification time).
func (r *Replica) Put(p string, e wire.Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p == "" {
		e.Name = ""
		r.root = e
		return
	}
	dirPath, name := Split(p)
	e.Name = name
	if d := r.dirs[dirPath]; d != nil {
		// New attributes of the same contents (a chmod, say) keep the inline contents.
		if !e.HasData {
			if c, ok := d.entries[name]; ok && c.mode&hasData != 0 {
				if old := c.expand(name); sameContents(&old, &e) {
					e.Data, e.HasData = old.Data, true
				}
			}
			if sp, ok := r.spare[p]; !e.HasData && ok && sameContents(&sp, &e) {
				e.Data, e.HasData = sp.Data, true
			}
		}
		r.dropSpare(p)
		r.setEntry(d, name, compact(&e))
		delete(d.unknown, name)
		r.trim()
	}
}

// DirChanged records a change this mount made to the names in directory dirPath at nowNs: its
// mtime and ctime move there and its link count by nlinkDelta (a subdirectory made, moved or
// removed), so the mount shows at once what a local file system would. The owner's values
// come with its change event later. Nothing happens when dirPath's entry is not known.
func (r *Replica) DirChanged(dirPath string, nlinkDelta int, nowNs int64) {
	r.update(dirPath, func(e *wire.Entry) {
		if !e.IsDir() {
			return
		}
		e.MtimeNs = max(e.MtimeNs, nowNs)
		e.CtimeNs = max(e.CtimeNs, nowNs)
		if n := int(e.Nlink) + nlinkDelta; n >= 2 {
			e.Nlink = uint32(n)
		}
	})
}

// Touched records that the file at p changed at nowNs without a new entry from the owner (a
// rename moves its ctime).
func (r *Replica) Touched(p string, nowNs int64) {
	r.update(p, func(e *wire.Entry) { e.CtimeNs = max(e.CtimeNs, nowNs) })
}

// SetLinks records the link count and ctime of the file with inode number ino under every
// name the replica lists for it: a hard link made or removed through the mount changes them
// for all its names. It walks every listed directory, so callers use it only for files with
// more than one name.
func (r *Replica) SetLinks(ino uint64, nlink uint32, ctimeNs int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.dirs {
		for name, e := range d.entries {
			if e.ino == ino && e.mode&wire.ModeTypeMask != wire.ModeDir {
				e.nlink, e.ctimeNs = nlink, max(e.ctimeNs, ctimeNs)
				d.entries[name] = e
			}
		}
	}
}

// update edits the known entry of p in place.
func (r *Replica) update(p string, edit func(*wire.Entry)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p == "" {
		if r.root.Mode != 0 {
			edit(&r.root)
		}
		return
	}
	dirPath, name := Split(p)
	d := r.dirs[dirPath]
	if !r.fresh(d) {
		return
	}
	if c, ok := d.entries[name]; ok {
		e := c.expand(name)
		edit(&e)
		r.setEntry(d, name, compact(&e))
	}
}

// Remove forgets one path, and everything below it if it was a directory.
func (r *Replica) Remove(p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	dirPath, name := Split(p)
	if d := r.dirs[dirPath]; d != nil {
		r.delEntry(d, name)
		delete(d.unknown, name)
	}
	r.dropSpare(p)
	r.dropBelow(p)
}

// Forget drops the listing of dirPath and everything below it (a rescan), and the entry of
// the path itself in its parent.
func (r *Replica) Forget(p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p == "" {
		r.dirs = map[string]*dir{}
		r.spare = map[string]wire.Entry{}
		r.inline = 0
		return
	}
	r.dropBelow(p)
	dirPath, name := Split(p)
	if d := r.dirs[dirPath]; d != nil {
		r.delEntry(d, name)
		d.listed = time.Time{} // the parent must be listed again to learn the entry
		if r.TTL == 0 {
			r.delDir(dirPath)
		}
	}
}

func (r *Replica) dropBelow(p string) {
	r.delDir(p)
	prefix := p + "/"
	for k := range r.dirs {
		if strings.HasPrefix(k, prefix) {
			r.delDir(k)
		}
	}
	for k := range r.spare {
		if strings.HasPrefix(k, prefix) {
			r.dropSpare(k)
		}
	}
}

// Rename moves an entry (and listed directories below it) from one path to another,
// replacing what was at the destination.
func (r *Replica) Rename(from, to string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fd, fn := Split(from)
	td, tn := Split(to)
	var e entry
	var ok bool
	if d := r.dirs[fd]; d != nil {
		e, ok = d.entries[fn]
		r.delEntry(d, fn)
	}
	r.dropBelow(to)
	if d := r.dirs[td]; d != nil {
		if ok {
			r.setEntry(d, tn, e)
		} else {
			r.delEntry(d, tn)
			d.listed = time.Time{}
			r.delDir(td)
		}
	}
	prefix := from + "/"
	moved := map[string]*dir{}
	for k, d := range r.dirs {
		if k == from || strings.HasPrefix(k, prefix) {
			moved[to+k[len(from):]] = d
			r.delDir(k)
		}
	}
	for k, d := range moved {
		r.setDir(k, d)
	}
}

// Exchange swaps two paths atomically (RENAME_EXCHANGE).
func (r *Replica) Exchange(a, b string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Simplest correct answer: forget both parents' listings and both subtrees.
	for _, p := range []string{a, b} {
		r.dropBelow(p)
		dirPath, _ := Split(p)
		r.delDir(dirPath)
	}
}

// Join joins a directory path and a name.
func Join(dirPath, name string) string {
	if dirPath == "" {
		return name
	}
	return path.Join(dirPath, name)
}
