package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/peerfs/peerfs/internal/api"
)

// transferPrinter shows a pull or send: events as they come, then the result. There are two:
// text (a progress bar on a terminal, a summary line) and JSON (one line per event).
type transferPrinter interface {
	Event(e api.Event)
	Done(res *api.TransferResult) error
	// Abort ends the display after a failure, before the error is printed.
	Abort()
}

// newTransferPrinter picks the printer for g. doing and done name the operation in the bar
// and the summary ("pulling", "pulled"); target is what the summary names as the destination
// when the daemon's result names none.
func newTransferPrinter(g *Globals, out io.Writer, doing, done, target string) transferPrinter {
	if g.JSON {
		return &jsonTransferPrinter{out: out}
	}
	t := &textTransferPrinter{g: g, out: out, doing: doing, verb: done, target: target}
	if g.StderrTTY && !g.Quiet {
		t.bar = progressbar.NewOptions64(-1,
			progressbar.OptionSetWriter(g.Stderr),
			progressbar.OptionSetDescription(doing),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowCount(),
			progressbar.OptionShowTotalBytes(true),
			progressbar.OptionUseIECUnits(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionFullWidth(),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionEnableColorCodes(false),
		)
	}
	return t
}

// textTransferPrinter draws a progress bar on stderr when it has one, reports per-file
// errors on stderr, and prints a summary line on stdout at the end (not with --quiet).
type textTransferPrinter struct {
	g      *Globals
	out    io.Writer
	doing  string // in the bar: "pulling"
	verb   string // in the summary: "pulled"
	target string
	bar    *progressbar.ProgressBar // nil: no terminal, or --quiet
	files  int                      // last file count shown in the description
	done   int
}

func (t *textTransferPrinter) Event(e api.Event) {
	if e.Type == "error" {
		if t.bar != nil {
			t.bar.Clear()
		}
		msg := "failed"
		if e.Error != nil {
			msg = e.Error.Message
		}
		if e.Path != "" {
			t.g.warnf("%s: %s", displayName(e.Path), msg)
		} else {
			t.g.warnf("%s", msg)
		}
	}
	if t.bar == nil {
		return
	}
	// The total grows as the daemon's walk discovers files.
	if e.TotalBytes > 0 && e.TotalBytes != t.bar.GetMax64() {
		t.bar.ChangeMax64(e.TotalBytes)
	}
	if e.Files != t.files || e.FilesDone != t.done {
		t.files, t.done = e.Files, e.FilesDone
		t.bar.Describe(fmt.Sprintf("%s %d/%d files", t.doing, e.FilesDone, e.Files))
	}
	if n := e.Resumed + e.Bytes; n > 0 {
		if m := t.bar.GetMax64(); m > 0 && n > m {
			n = m
		}
		t.bar.Set64(n)
	}
}

func (t *textTransferPrinter) Abort() {
	if t.bar != nil {
		t.bar.Exit()
		fmt.Fprintln(t.g.Stderr)
	}
}

func (t *textTransferPrinter) Done(res *api.TransferResult) error {
	if t.bar != nil {
		t.bar.Finish()
	}
	if t.g.Quiet {
		return nil
	}
	_, err := fmt.Fprintln(t.out, transferSummary(t.verb, t.target, res))
	return err
}

// transferSummary is the one-line account of a finished transfer:
// "pulled 10000 files (1.00 GiB) to /dst in 1.23 s, 832.1 MiB/s (resumed 0 B, skipped 0)".
func transferSummary(verb, target string, res *api.TransferResult) string {
	dest := res.Dest
	if dest == "" {
		dest = target
	}
	rate := res.Rate
	if rate == 0 && res.Elapsed > 0 {
		rate = float64(res.Bytes) / res.Elapsed
	}
	total := res.TotalBytes
	if total == 0 {
		total = res.Bytes + res.Resumed
	}
	return fmt.Sprintf("%s %s (%s) to %s in %.2f s, %s (resumed %s, skipped %d)",
		verb, plural(res.Files, "file"), humanBytes(total), displayName(dest), res.Elapsed,
		humanRate(rate), humanBytes(res.Resumed), res.Skipped)
}

// jsonTransferPrinter writes each event as a JSON line on stdout, then a "done" line with the
// result. The daemon's own "done" event is not repeated: the result line replaces it.
type jsonTransferPrinter struct {
	out io.Writer
}

func (j *jsonTransferPrinter) Event(e api.Event) {
	if e.Type == "done" {
		return
	}
	j.line(e)
}

func (j *jsonTransferPrinter) Abort() {}

func (j *jsonTransferPrinter) Done(res *api.TransferResult) error {
	return j.line(struct {
		Type string `json:"type"`
		*api.TransferResult
	}{"done", res})
}

func (j *jsonTransferPrinter) line(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding JSON output: %w", err)
	}
	b = append(b, '\n')
	_, err = j.out.Write(b)
	return err
}
