package snapshot

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// Source fetches one document.
type Source interface {
	// Fetch returns the current document. When changed is false, data is
	// nil and the document is the one the previous successful Fetch
	// returned or, for a [Versioner], the one whose version was last set.
	// The first successful Fetch of a source that was never told a
	// version always reports changed.
	Fetch(ctx context.Context) (data []byte, changed bool, err error)
}

// Forgetter is implemented by sources that remember the last document
// they returned. Forget drops that memory: the next Fetch reports the
// document as changed even if it is not.
type Forgetter interface {
	Forget()
}

// Versioner is implemented by sources that can ask the publisher whether
// the consumer's document is still current, so that an unchanged document
// is not transferred again (HTTP: If-None-Match: "<version>", answered
// with 304, docs/snapshots.md). The consumer calls SetVersion with the version it
// holds after loading a document, including one restored from disk.
type Versioner interface {
	SetVersion(version uint64)
}

// LongPoller is implemented by sources that can ask the publisher to hold
// a request until the document changes (HTTP: ?wait=N, proto/control-plane.md
// "Long-poll"). Held reports whether the publisher held the last Fetch,
// which it says by answering with "Preference-Applied: wait=N"; the
// poller then fetches again at once instead of pausing, because the next
// change will again be answered as soon as it happens. A static server
// never says so, and is polled every interval. After a Fetch that failed
// with [ErrStalled], Held reports whether the poller may ask again at once
// (the stalled request was a held one).
//
// Hold says whether later Fetches ask to be held at all. The poller turns
// it off while it has nothing loaded, is stale, or its last poll failed:
// a held request that hangs is abandoned only after the wait it asked for,
// and then the question is whether the publisher answers at all
// (docs/snapshots.md "Recovery").
type LongPoller interface {
	Held() bool
	Hold(on bool)
}

// ParseSource returns the Source that s names. Relative file paths are
// resolved against baseDir (normally the config file's directory; "" means
// the working directory); http:// and https:// sources use o. Errors wrap
// [ErrUnsupportedSource] and never repeat s, which may carry credentials
// in a URL.
func ParseSource(s, baseDir string, o HTTPOptions) (Source, error) {
	if s == "" {
		return nil, fmt.Errorf("%w: empty", ErrUnsupportedSource)
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not a valid URL", ErrUnsupportedSource)
	}
	switch strings.ToLower(u.Scheme) {
	case "file":
		path, err := filePath(u)
		if err != nil {
			return nil, err
		}
		if !filepath.IsAbs(path) {
			path = filepath.Join(baseDir, path)
		}
		return &FileSource{Path: path}, nil
	case "http", "https":
		return NewHTTPSource(u, o)
	case "":
		return nil, fmt.Errorf(`%w: no scheme (want "file:<path>" or an https:// URL)`, ErrUnsupportedSource)
	default:
		return nil, fmt.Errorf(`%w: scheme %q (want "file:<path>" or an https:// URL)`, ErrUnsupportedSource, u.Scheme)
	}
}

// filePath extracts the local path from a file: URL (RFC 8089): the opaque
// form file:rel/path, or file:/abs and file:///abs with an empty or
// "localhost" host.
func filePath(u *url.URL) (string, error) {
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", fmt.Errorf("%w: file: URL must not have a query or fragment", ErrUnsupportedSource)
	}
	if u.Host != "" && !strings.EqualFold(u.Host, "localhost") {
		return "", fmt.Errorf("%w: file: URL must not name a remote host (for a relative path write file:<path>)", ErrUnsupportedSource)
	}
	path := u.Path
	if u.Opaque != "" {
		p, err := url.PathUnescape(u.Opaque)
		if err != nil {
			return "", fmt.Errorf("%w: file: URL has a bad percent-escape", ErrUnsupportedSource)
		}
		path = p
	}
	if path == "" {
		return "", fmt.Errorf("%w: file: URL has no path", ErrUnsupportedSource)
	}
	return filepath.FromSlash(path), nil
}
