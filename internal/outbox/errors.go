package outbox

import "errors"

// Errors from Open. The app logs them and runs with usage events disabled
// (docs/usage-events.md: the API keeps serving); it reports the reason on /readyz or in
// its metrics. Errors about the file itself (missing directory, permission
// denied, read-only file system) wrap the *fs.PathError, which names the
// path, so errors.Is(err, fs.ErrPermission) works.
var (
	// ErrLocked: another process (or another Store in this one) holds the
	// file's lock and did not release it within Options.LockTimeout. Two
	// nodes configured with one outbox path is the usual cause.
	ErrLocked = errors.New("outbox: file is locked by another process")

	// ErrCorrupt: the file is not a usable outbox. Open never returns it: it
	// moves such a file aside and starts fresh (see Store.Quarantined). Read
	// returns it, and commits count their events as dropped with reason
	// "failing", when bbolt panics on a page that went bad while running.
	ErrCorrupt = errors.New("outbox: corrupt file")
)

// ErrClosed is returned by Read and Delete after Close. Append reports the
// same condition by returning false (Stats.Dropped.Closed).
var ErrClosed = errors.New("outbox: closed")
