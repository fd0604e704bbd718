// Package secret holds credential values (provider API keys, proxy
// passwords) so that they cannot be printed by accident.
//
// # Model
//
// A [Secret] is an opaque value whose only accessor is [Secret.Reveal]. Every
// other way of turning it into text prints "[redacted]": fmt with any verb
// (%v, %+v, %#v, %s, %q, …), String, GoString, encoding/json,
// encoding.TextMarshaler and log/slog. The value sits behind a pointer, so even
// fmt's reflection walk over a struct that holds a Secret in an unexported
// field prints an address, never the value.
//
// Values come from the environment ([FromEnv]) or from a file ([FromFile],
// which trims one trailing "\n" or "\r\n" so that `echo key > file` works).
// A file secret follows its file: a [Watcher] re-reads it when the file
// changes and swaps the value for every copy of the Secret at once; an
// environment secret never changes.
// Their errors name the variable or the path and say what is wrong ("unset",
// "empty"); they never contain the value. [FromEnvFunc] and [FromFileFunc] are
// the same with the lookup injected, for configuration parsers and tests.
//
// # Caveats
//
// Redaction protects against formatting, not against code that calls Reveal
// and prints the result. Two Secrets made from the same value are not ==;
// compare Reveal() results if you must.
package secret

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
)

// redacted is what every printing path shows instead of the value.
const redacted = "[redacted]"

// MaxFileBytes bounds what FromFile and FromFileFunc accept, so that a
// huge file fails instead of eating memory (a path to something that is
// not a regular file, such as /dev/zero or a named pipe, is refused
// before it is opened: [ErrNotRegular]).
const MaxFileBytes = 64 << 10

// Errors wrapped by FromEnv, FromEnvFunc, FromFile and FromFileFunc; test with
// errors.Is. The wrapping error names the variable or path.
var (
	// ErrUnset: the environment variable does not exist.
	ErrUnset = errors.New("unset")
	// ErrEmpty: the variable or file exists but holds no value (a file holding
	// only the trimmed newline is empty too).
	ErrEmpty = errors.New("empty")
	// ErrTooLarge: the file is larger than MaxFileBytes.
	ErrTooLarge = errors.New("too large")
	// ErrControl: the value holds a control character (U+0000-U+001F or
	// U+007F), such as the newline of a file's second line. No credential
	// (an API key, a token, a password sent in a header or a proxy
	// handshake) contains one; sent anyway, it fails every request, which
	// would look like a provider or proxy failure.
	ErrControl = errors.New("contains a control character")
	// ErrNotRegular: the path names something other than a regular file
	// (a named pipe, a device, a socket, a directory). Opening a named
	// pipe blocks until a writer comes, and a device may never end: only
	// regular files are read, so a swapped file cannot stall the reload
	// loop or shutdown.
	ErrNotRegular = errors.New("not a regular file")
)

// control returns the first control character in v and whether there is
// one.
func control(v string) (rune, bool) {
	for _, c := range []byte(v) {
		if c < 0x20 || c == 0x7f {
			return rune(c), true
		}
	}
	return 0, false
}

// Secret is a credential value that prints as "[redacted]". The zero value is
// an empty secret. Copies share the value: a file secret re-read by a
// [Watcher] changes for every copy at once.
type Secret struct {
	// p is a pointer so that fmt's reflection fallback (unexported fields of
	// a containing struct) prints an address instead of the value.
	p *cell
}

// cell holds a Secret's value. v is swapped whole, so a reader sees the
// old value or the new one, never a mix.
type cell struct {
	v    atomic.Pointer[string]
	path string // the file a file secret was read from; "" otherwise
	doc  bool   // read by FromDocumentFile: the file's bytes as they are
}

// New wraps v.
func New(v string) Secret {
	c := &cell{}
	c.v.Store(&v)
	return Secret{p: c}
}

// Reveal returns the value. It is the only accessor: call it where the value
// is put on the wire, nowhere else. A caller that needs one value for a
// whole exchange calls it once.
func (s Secret) Reveal() string {
	if s.p == nil {
		return ""
	}
	return *s.p.v.Load()
}

// File returns the path a file secret was read from ([FromFile]); "" for
// any other secret, which never changes.
func (s Secret) File() string {
	if s.p == nil {
		return ""
	}
	return s.p.path
}

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s.Reveal() == "" }

// String returns "[redacted]".
func (s Secret) String() string { return redacted }

// GoString returns "[redacted]" (fmt %#v).
func (s Secret) GoString() string { return redacted }

// Format makes every fmt verb print "[redacted]" (%q prints it quoted).
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		_, _ = io.WriteString(f, `"`+redacted+`"`)
		return
	}
	_, _ = io.WriteString(f, redacted)
}

// MarshalJSON returns the JSON string "[redacted]".
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(redacted) }

// MarshalText returns "[redacted]".
func (s Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// LogValue makes log/slog print "[redacted]".
func (s Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// Interface guards: the printing paths this package promises to cover.
var (
	_ fmt.Stringer   = Secret{}
	_ fmt.GoStringer = Secret{}
	_ fmt.Formatter  = Secret{}
	_ json.Marshaler = Secret{}
	_ slog.LogValuer = Secret{}
)

// FromEnv reads the secret from the environment variable name. An unset or
// empty variable, or one holding a control character ([ErrControl]), is an
// error that names the variable.
func FromEnv(name string) (Secret, error) { return FromEnvFunc(name, os.LookupEnv) }

// FromEnvFunc is FromEnv with the lookup injected (os.LookupEnv in FromEnv).
func FromEnvFunc(name string, lookup func(string) (string, bool)) (Secret, error) {
	v, ok := lookup(name)
	if !ok {
		return Secret{}, fmt.Errorf("secret: environment variable %q is %w", name, ErrUnset)
	}
	if v == "" {
		return Secret{}, fmt.Errorf("secret: environment variable %q is %w", name, ErrEmpty)
	}
	if c, ok := control(v); ok {
		return Secret{}, fmt.Errorf("secret: environment variable %q %w (%U); a credential is one line of printable characters", name, ErrControl, c)
	}
	return New(v), nil
}

// FromFile reads the secret from the regular file at path, trimming one
// trailing "\n" or "\r\n". A missing, unreadable, empty or oversized file,
// anything but a regular file ([ErrNotRegular]), or one
// whose value then holds a control character ([ErrControl]: a second line,
// a lone "\r"), is an error that names the path.
func FromFile(path string) (Secret, error) { return FromFileFunc(path, readFile) }

// FromFileFunc is FromFile with the reader injected. The content is checked
// against MaxFileBytes after read returns, so read should bound itself too.
func FromFileFunc(path string, read func(string) ([]byte, error)) (Secret, error) {
	return fromFile(path, read, false)
}

// FromDocumentFile reads a secret that is a document rather than one line:
// a Google service-account key file, JSON over several lines. The file is
// read as FromFile reads it (regular files only, at most MaxFileBytes, not
// empty, re-read by a [Watcher] when it changes), but its bytes are kept
// as they are, line breaks included. Such a value is never sent as it is
// (a header cannot carry it): the credential kind that holds it reads it.
func FromDocumentFile(path string) (Secret, error) { return fromFile(path, readFile, true) }

// FromDocumentFileFunc is FromDocumentFile with the reader injected.
func FromDocumentFileFunc(path string, read func(string) ([]byte, error)) (Secret, error) {
	return fromFile(path, read, true)
}

// fromFile reads a file secret; doc keeps the bytes as they are
// (FromDocumentFile).
func fromFile(path string, read func(string) ([]byte, error), doc bool) (Secret, error) {
	b, err := read(path)
	if err != nil {
		// os errors repeat the path; keep only the cause so the message
		// names the path exactly once.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return Secret{}, fmt.Errorf("secret: read file %q: %w", path, err)
	}
	if len(b) > MaxFileBytes {
		return Secret{}, fmt.Errorf("secret: file %q is %w (limit %d bytes)", path, ErrTooLarge, MaxFileBytes)
	}
	v := string(b)
	if doc {
		if strings.TrimSpace(v) == "" {
			return Secret{}, fmt.Errorf("secret: file %q is %w", path, ErrEmpty)
		}
		sec := New(v)
		sec.p.path, sec.p.doc = path, true
		return sec, nil
	}
	if s, ok := strings.CutSuffix(v, "\r\n"); ok {
		v = s
	} else {
		v = strings.TrimSuffix(v, "\n")
	}
	if v == "" {
		return Secret{}, fmt.Errorf("secret: file %q is %w", path, ErrEmpty)
	}
	if c, ok := control(v); ok {
		return Secret{}, fmt.Errorf("secret: file %q %w (%U) after its one trailing newline is trimmed; a credential is one line of printable characters (a second line?)", path, ErrControl, c)
	}
	sec := New(v)
	sec.p.path = path
	return sec, nil
}

// readFile is os.ReadFile for regular files only ([ErrNotRegular]), which
// stops one byte past MaxFileBytes. The path is checked before it is
// opened, since opening a named pipe for reading blocks until a writer
// comes, and the open file again, in case the path was swapped between
// the two (a swap to a pipe inside that window still blocks the open:
// see docs/operations.md "Credentials").
func readFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w (%s)", ErrNotRegular, fileType(fi.Mode()))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w (%s)", ErrNotRegular, fileType(fi.Mode()))
	}
	return io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
}

// fileType names the kind of a file that is not regular, for errors.
func fileType(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return "mode " + m.Type().String()
}
