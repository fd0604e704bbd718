package config

import (
	"strings"
	"time"
)

// Usage configures usage events and their disk outbox (docs/usage-events.md). The
// outbox keys map onto internal/outbox.Options; delivery is [mqtt].
type Usage struct {
	// Enabled turns usage events on. When the outbox cannot be opened at
	// start (unwritable path, file locked by another process), the node
	// stays unready and /readyz says why, unless ServeWithoutOutbox.
	Enabled bool
	// ServeWithoutOutbox lets a node whose outbox cannot be opened serve
	// without usage events (unbilled): /readyz shows it as a detail and
	// scootgate_usage_events_enabled is 0 (docs/usage-events.md "Outbox
	// bounds"). Default false: such a node is not ready.
	ServeWithoutOutbox bool
	// OutboxPath is the bbolt outbox file. Load resolves a relative path
	// against the config file's directory; the directory must exist.
	OutboxPath string
	// MaxEvents and MaxBytes bound the outbox by row count and by payload
	// bytes; past either, the newest event is dropped and counted.
	MaxEvents int
	MaxBytes  int64
	// CommitInterval is the group-commit window: at most about one fsync
	// per interval, never one per event (docs/usage-events.md "Outbox bounds").
	CommitInterval time.Duration
	// CrashWindowEvents and CrashWindow bound what a crash can lose: the
	// events accepted but not yet on disk, by count and by the age of the
	// oldest. When the disk is slower than that, new events are dropped
	// and counted (docs/usage-events.md "Crash bound").
	CrashWindowEvents int
	CrashWindow       time.Duration
	// OpenAIIncludeUsage injects stream_options.include_usage into OpenAI
	// streaming requests whose client did not ask for it, and hides the
	// extra usage-only chunk from that client (docs/usage-events.md).
	OpenAIIncludeUsage bool
}

// Ranges of the [usage] keys (documented in the package doc).
const (
	defaultOutboxPath     = "scootgate-outbox.db"
	maxOutboxEvents       = 10_000_000
	minOutboxBytes        = 1 << 20
	maxOutboxBytes        = 16 << 30
	minCommitInterval     = time.Millisecond
	maxCommitInterval     = time.Second
	defaultOutboxEvents   = 100000
	defaultOutboxBytes    = 256 << 20
	defaultCommitInterval = 100 * time.Millisecond
	minCrashWindowEvents  = 16
	maxCrashWindowEvents  = 1_000_000
	minCrashWindow        = 100 * time.Millisecond
	maxCrashWindow        = time.Minute
	// The outbox's defaults (outbox.DefaultMaxUnsynced and
	// DefaultMaxUnsyncedAge), repeated so that config does not import it.
	defaultCrashWindowEvents = 4096
	defaultCrashWindow       = 3 * time.Second
)

// defaultUsage is the [usage] part of Defaults.
func defaultUsage() Usage {
	return Usage{
		Enabled:            true,
		OutboxPath:         defaultOutboxPath,
		MaxEvents:          defaultOutboxEvents,
		MaxBytes:           defaultOutboxBytes,
		CommitInterval:     defaultCommitInterval,
		CrashWindowEvents:  defaultCrashWindowEvents,
		CrashWindow:        defaultCrashWindow,
		OpenAIIncludeUsage: true,
	}
}

// usageSection reads [usage]; absent, every key keeps its default. The
// outbox path, given or default, is resolved against the config directory.
func (v *validator) usageSection(root *table, u *Usage) {
	if t, ok := section(root, "usage"); ok {
		v.usage(t, u)
	}
	u.OutboxPath = v.resolve(u.OutboxPath)
}

func (v *validator) usage(t *table, u *Usage) {
	defer t.done()
	if b, ok := t.boolean("enabled"); ok {
		u.Enabled = b
	}
	if b, ok := t.boolean("serve_without_outbox"); ok {
		u.ServeWithoutOutbox = b
	}
	if s, ok := t.str("outbox_path", ""); ok {
		if s == "" || strings.ContainsRune(s, 0) {
			v.ps.add(t.at("outbox_path"), "expected a file path, like %q", defaultOutboxPath)
		} else {
			u.OutboxPath = s
		}
	}
	if n, ok := t.integer("max_events", "", 1, maxOutboxEvents); ok {
		u.MaxEvents = int(n)
	}
	if n, ok := t.integer("max_bytes", "", minOutboxBytes, maxOutboxBytes); ok {
		u.MaxBytes = n
	}
	v.durationRange(t, "commit_interval", minCommitInterval, maxCommitInterval, &u.CommitInterval)
	if n, ok := t.integer("crash_window_events", "", minCrashWindowEvents, maxCrashWindowEvents); ok {
		u.CrashWindowEvents = int(n)
	}
	if t.has("crash_window") {
		v.durationRange(t, "crash_window", minCrashWindow, maxCrashWindow, &u.CrashWindow)
		if u.CrashWindow <= u.CommitInterval {
			// Every event would be refused before its commit was due.
			v.ps.add(t.at("crash_window"), "%s is not longer than commit_interval (%s)", u.CrashWindow, u.CommitInterval)
		}
	}
	if b, ok := t.boolean("openai_include_usage"); ok {
		u.OpenAIIncludeUsage = b
	}
}
