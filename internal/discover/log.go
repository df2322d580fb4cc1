package discover

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/pion/logging"
)

// pionLogs hands the mDNS library's warnings and errors to our log at debug level: they are
// about single packets and interfaces (a send that failed on one of them), which a user
// cannot act on. Its trace, debug and info lines, one per packet, are dropped unformatted.
type pionLogs struct{ log *slog.Logger }

func (f pionLogs) NewLogger(scope string) logging.LeveledLogger { return pionLogger(f) }

type pionLogger struct{ log *slog.Logger }

func (pionLogger) Trace(string)                {}
func (pionLogger) Tracef(string, ...any)       {}
func (pionLogger) Debug(string)                {}
func (pionLogger) Debugf(string, ...any)       {}
func (pionLogger) Info(string)                 {}
func (pionLogger) Infof(string, ...any)        {}
func (l pionLogger) Warn(msg string)           { l.out(msg) }
func (l pionLogger) Warnf(f string, a ...any)  { l.outf(f, a) }
func (l pionLogger) Error(msg string)          { l.out(msg) }
func (l pionLogger) Errorf(f string, a ...any) { l.outf(f, a) }

func (l pionLogger) out(msg string) { l.log.Debug("mdns: " + msg) }

func (l pionLogger) outf(format string, args []any) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug("mdns: " + fmt.Sprintf(format, args...))
	}
}
