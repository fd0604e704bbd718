package snapshot

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// Source fetches one document.
type Source interface {
	// Fetch returns the current document. When changed is false the
	// document is the one returned by the previous successful Fetch and
	// data is nil. The first successful Fetch always reports changed.
	Fetch(ctx context.Context) (data []byte, changed bool, err error)
}

// Forgetter is implemented by sources that remember the last document
// they returned. Forget drops that memory: the next Fetch reports the
// document as changed even if it is not.
type Forgetter interface {
	Forget()
}

// ErrUnsupportedSource reports a source string ParseSource cannot handle.
var ErrUnsupportedSource = errors.New("snapshot: unsupported source")

// ParseSource returns the Source that s names. Relative file paths are
// resolved against baseDir (normally the config file's directory; "" means
// the working directory). Errors wrap [ErrUnsupportedSource] and never
// repeat s, which may carry credentials in a URL.
func ParseSource(s, baseDir string) (Source, error) {
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
		// Issue 5 adds HTTP(S) pulls with ETag / If-None-Match (SPEC §7).
		return nil, fmt.Errorf("%w: http(s) sources are not supported yet", ErrUnsupportedSource)
	case "":
		return nil, fmt.Errorf(`%w: no scheme (want "file:<path>")`, ErrUnsupportedSource)
	default:
		return nil, fmt.Errorf(`%w: scheme %q (want "file:<path>")`, ErrUnsupportedSource, u.Scheme)
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
