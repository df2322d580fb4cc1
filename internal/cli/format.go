package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/peerfs/peerfs/internal/api"
)

// POSIX file type bits of api.Entry.Mode.
const (
	modeTypeMask = 0o170000
	modeSocket   = 0o140000
	modeSymlink  = 0o120000
	modeRegular  = 0o100000
	modeBlock    = 0o060000
	modeDir      = 0o040000
	modeChar     = 0o020000
	modeFIFO     = 0o010000
	modeSetuid   = 0o4000
	modeSetgid   = 0o2000
	modeSticky   = 0o1000
)

// sixMonths is how far back ls shows a time of day rather than a year: half of an average
// Gregorian year, as GNU ls counts it.
const sixMonths = 15778476 * time.Second

// modeString renders a POSIX mode like ls -l: "drwxr-xr-x", "lrwxrwxrwx", "-rwsr-x--T".
// When the mode has no type bits the entry's Type decides.
func modeString(mode uint32, typ string) string {
	var b [10]byte
	switch mode & modeTypeMask {
	case modeDir:
		b[0] = 'd'
	case modeSymlink:
		b[0] = 'l'
	case modeRegular:
		b[0] = '-'
	case modeFIFO:
		b[0] = 'p'
	case modeSocket:
		b[0] = 's'
	case modeChar:
		b[0] = 'c'
	case modeBlock:
		b[0] = 'b'
	default:
		switch typ {
		case "dir":
			b[0] = 'd'
		case "symlink":
			b[0] = 'l'
		case "file":
			b[0] = '-'
		default:
			b[0] = '?'
		}
	}
	const rwx = "rwxrwxrwx"
	for i := range 9 {
		if mode&(1<<(8-i)) != 0 {
			b[1+i] = rwx[i]
		} else {
			b[1+i] = '-'
		}
	}
	special := func(pos int, bit uint32, set, unsetExec byte) {
		if mode&bit == 0 {
			return
		}
		if b[pos] == 'x' {
			b[pos] = set
		} else {
			b[pos] = unsetExec
		}
	}
	special(3, modeSetuid, 's', 'S')
	special(6, modeSetgid, 's', 'S')
	special(9, modeSticky, 't', 'T')
	return string(b[:])
}

// lsTime formats t as ls -l does: month, day and time of day for the last six months, month,
// day and year otherwise (older, or in the future). t is shown in now's location.
func lsTime(t, now time.Time) string {
	t = t.In(now.Location())
	if t.After(now.Add(-sixMonths)) && !t.After(now) {
		return t.Format("Jan _2 15:04")
	}
	return t.Format("Jan _2  2006")
}

// displayName makes a name safe for a terminal: a name with control characters, invalid
// UTF-8 or other unprintable runes is shown quoted with escapes, so a peer cannot send
// escape sequences to the user's terminal through a file name.
func displayName(s string) string {
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// writeLong writes entries like ls -l: columns right-aligned to the widest value.
func writeLong(w io.Writer, entries []api.Entry, now time.Time) error {
	var wn, wu, wg, ws int
	for _, e := range entries {
		wn = max(wn, len(strconv.FormatUint(uint64(e.Nlink), 10)))
		wu = max(wu, len(strconv.FormatUint(uint64(e.UID), 10)))
		wg = max(wg, len(strconv.FormatUint(uint64(e.GID), 10)))
		ws = max(ws, len(strconv.FormatInt(e.Size, 10)))
	}
	var b strings.Builder
	for _, e := range entries {
		b.Reset()
		fmt.Fprintf(&b, "%s %*d %*d %*d %*d %s %s",
			modeString(e.Mode, e.Type), wn, e.Nlink, wu, e.UID, wg, e.GID, ws, e.Size,
			lsTime(e.Mtime, now), displayName(e.Name))
		if e.Target != "" || e.Mode&modeTypeMask == modeSymlink || e.Type == "symlink" {
			b.WriteString(" -> ")
			b.WriteString(displayName(e.Target))
		}
		b.WriteByte('\n')
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// humanBytes renders a byte count with binary units: "0 B", "512 B", "1.00 KiB", "1.00 GiB".
func humanBytes(n int64) string {
	if n < 1024 && n > -1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := scaleIEC(float64(n))
	return fmt.Sprintf("%.2f %s", v, unit)
}

// humanRate renders bytes per second: "832.1 MiB/s".
func humanRate(r float64) string {
	if r < 1024 {
		return fmt.Sprintf("%.1f B/s", r)
	}
	v, unit := scaleIEC(r)
	return fmt.Sprintf("%.1f %s/s", v, unit)
}

func scaleIEC(v float64) (float64, string) {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for (v >= 1024 || v <= -1024) && i < len(units)-1 {
		v /= 1024
		i++
	}
	return v, units[i]
}

// plural returns "1 file" or "2 files".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
