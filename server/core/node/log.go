package node

import (
	"context"
	"io"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// newHCLogger bridges hashicorp/raft's hclog output into slog.
func newHCLogger(l *slog.Logger) hclog.Logger {
	il := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "raft", Output: io.Discard, Level: hclog.Debug})
	il.RegisterSink(slogSink{l: l})
	return il
}

type slogSink struct{ l *slog.Logger }

func (s slogSink) Accept(name string, level hclog.Level, msg string, args ...interface{}) {
	var lv slog.Level
	switch {
	case level <= hclog.Debug:
		lv = slog.LevelDebug
	case level == hclog.Info:
		lv = slog.LevelInfo
	case level == hclog.Warn:
		lv = slog.LevelWarn
	default:
		lv = slog.LevelError
	}
	if !s.l.Enabled(context.Background(), lv) {
		return
	}
	s.l.Log(context.Background(), lv, msg, append([]any{"component", name}, args...)...)
}
