package watch

import (
	"io/fs"
	"os"
	"reflect"

	"github.com/peerfs/peerfs/internal/wire"
)

// EntryOf converts what Lstat or Stat returned into the attributes peers see: the portable
// fields, and the NTFS file index as the inode number. A mount tells files apart by that
// number: were it 0 for every file, the kernel would take every file for one, and a rename of
// one name over another for a rename onto itself. internal/share describes files with it, so
// an event's Entry stands in for a STAT.
func EntryOf(fi fs.FileInfo) wire.Entry {
	e := portableEntry(fi)
	e.Ino = fileIndex(fi)
	if e.IsDir() || e.Ino != 0 {
		e.Nlink = 1
	}
	return e
}

// fileIndex returns the file index (the volume's number for the file) that os keeps in the
// FileInfo of a Windows file but does not export: os.Root's Lstat and File.Stat fill it from
// GetFileInformationByHandle, a directory listing from FILE_ID_BOTH_DIR_INFO, or os.SameFile
// loads it by path on first use, which is why SameFile is called first. It is read by
// reflection, the way SameFile compares it (fields vol, idxhi, idxlo of os's fileStat); 0 if a
// Go release renames them (TestFileIndex under Wine would then fail) or the volume has none.
func fileIndex(fi fs.FileInfo) uint64 {
	os.SameFile(fi, fi)
	v := reflect.ValueOf(fi)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return 0
	}
	hi, lo := v.Elem().FieldByName("idxhi"), v.Elem().FieldByName("idxlo")
	if hi.Kind() != reflect.Uint32 || lo.Kind() != reflect.Uint32 {
		return 0
	}
	return hi.Uint()<<32 | lo.Uint()
}
