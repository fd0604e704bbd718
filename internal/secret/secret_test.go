package secret

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// canary is the value every redaction test hides; it must never show up in
// any output.
const canary = "sk-canary-7f3a9c"

func TestRevealAndIsZero(t *testing.T) {
	tests := []struct {
		name     string
		s        Secret
		want     string
		wantZero bool
	}{
		{name: "zero value", s: Secret{}, want: "", wantZero: true},
		{name: "new empty", s: New(""), want: "", wantZero: true},
		{name: "value", s: New(canary), want: canary, wantZero: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.s.Reveal() != tt.want {
				t.Errorf("Reveal() = %d bytes, want %d bytes", len(tt.s.Reveal()), len(tt.want))
			}
			if got := tt.s.IsZero(); got != tt.wantZero {
				t.Errorf("IsZero() = %v, want %v", got, tt.wantZero)
			}
		})
	}
}

type exported struct {
	Name string
	Key  Secret
}

type unexported struct {
	name string
	key  Secret
}

type pointer struct {
	Key *Secret
}

func TestFormatting(t *testing.T) {
	s := New(canary)
	tests := []struct {
		name string
		got  func() (string, error)
		want string
	}{
		{name: "String", got: func() (string, error) { return s.String(), nil }, want: "[redacted]"},
		{name: "GoString", got: func() (string, error) { return s.GoString(), nil }, want: "[redacted]"},
		{name: "%v", got: sprintf("%v", s), want: "[redacted]"},
		{name: "%s", got: sprintf("%s", s), want: "[redacted]"},
		{name: "%+v", got: sprintf("%+v", s), want: "[redacted]"},
		{name: "%#v", got: sprintf("%#v", s), want: "[redacted]"},
		{name: "%q", got: sprintf("%q", s), want: `"[redacted]"`},
		{name: "%x", got: sprintf("%x", s), want: "[redacted]"},
		{name: "%d", got: sprintf("%d", s), want: "[redacted]"},
		{name: "%10s", got: sprintf("%10s", s), want: "[redacted]"},
		{name: "pointer %v", got: sprintf("%v", &s), want: "[redacted]"},
		{name: "slice %v", got: sprintf("%v", []Secret{s, s}), want: "[[redacted] [redacted]]"},
		{name: "map %v", got: sprintf("%v", map[string]Secret{"k": s}), want: "map[k:[redacted]]"},
		{name: "exported field %v", got: sprintf("%v", exported{"a", s}), want: "{a [redacted]}"},
		{name: "exported field %+v", got: sprintf("%+v", exported{"a", s}), want: "{Name:a Key:[redacted]}"},
		{name: "exported field %#v", got: sprintf("%#v", exported{"a", s}), want: `secret.exported{Name:"a", Key:[redacted]}`},
		{name: "pointer field %+v", got: sprintf("%+v", &pointer{Key: &s}), want: "&{Key:[redacted]}"},
		{name: "Errorf %v", got: func() (string, error) { return fmt.Errorf("bad key %v", s).Error(), nil }, want: "bad key [redacted]"},
		{name: "json.Marshal", got: marshal(s), want: `"[redacted]"`},
		{name: "json.Marshal struct", got: marshal(exported{"a", s}), want: `{"Name":"a","Key":"[redacted]"}`},
		{name: "json.Marshal map key", got: marshal(map[string]Secret{"k": s}), want: `{"k":"[redacted]"}`},
		{name: "MarshalJSON", got: func() (string, error) { b, err := s.MarshalJSON(); return string(b), err }, want: `"[redacted]"`},
		{name: "MarshalText", got: func() (string, error) { b, err := s.MarshalText(); return string(b), err }, want: "[redacted]"},
		{name: "slog JSON", got: slogJSON(slog.Any("key", s)), want: `{"level":"INFO","msg":"m","key":"[redacted]"}` + "\n"},
		{name: "slog JSON struct", got: slogJSON(slog.Any("v", exported{"a", s})), want: `{"level":"INFO","msg":"m","v":{"Name":"a","Key":"[redacted]"}}` + "\n"},
		{name: "slog text", got: slogText(slog.Any("key", s)), want: "level=INFO msg=m key=[redacted]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.got()
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if strings.Contains(got, canary) {
				t.Fatalf("output reveals the secret")
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
		})
	}
}

// TestUnexportedFieldHidden covers fmt's reflection fallback: it cannot call
// methods on unexported fields, so the value itself must not be reachable.
func TestUnexportedFieldHidden(t *testing.T) {
	v := unexported{name: "a", key: New(canary)}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		got := fmt.Sprintf(verb, v)
		if strings.Contains(got, canary) || strings.Contains(got, fmt.Sprintf("%x", canary)) {
			t.Errorf("Sprintf(%q) of a struct with an unexported Secret reveals the secret", verb)
		}
	}
}

func sprintf(format string, v any) func() (string, error) {
	return func() (string, error) { return fmt.Sprintf(format, v), nil }
}

func marshal(v any) func() (string, error) {
	return func() (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	}
}

func slogJSON(attr slog.Attr) func() (string, error) {
	return func() (string, error) {
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropTime})).Info("m", attr)
		return buf.String(), nil
	}
}

func slogText(attr slog.Attr) func() (string, error) {
	return func() (string, error) {
		var buf bytes.Buffer
		slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropTime})).Info("m", attr)
		return buf.String(), nil
	}
}

func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

func TestFromEnvFunc(t *testing.T) {
	env := map[string]string{"SET": canary, "EMPTY": "", "NL": canary + "\n", "DEL": "a\x7fb"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name    string
		varName string
		want    string
		wantErr error
		wantMsg string
	}{
		{name: "set", varName: "SET", want: canary},
		{name: "unset", varName: "NOPE", wantErr: ErrUnset, wantMsg: `secret: environment variable "NOPE" is unset`},
		{name: "empty", varName: "EMPTY", wantErr: ErrEmpty, wantMsg: `secret: environment variable "EMPTY" is empty`},
		{name: "newline", varName: "NL", wantErr: ErrControl, wantMsg: `secret: environment variable "NL" contains a control character (U+000A); a credential is one line of printable characters`},
		{name: "DEL", varName: "DEL", wantErr: ErrControl, wantMsg: `secret: environment variable "DEL" contains a control character (U+007F); a credential is one line of printable characters`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := FromEnvFunc(tt.varName, lookup)
			checkErr(t, err, tt.wantErr, tt.wantMsg)
			if s.Reveal() != tt.want {
				t.Errorf("Reveal() = %d bytes, want %d bytes", len(s.Reveal()), len(tt.want))
			}
		})
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv("SCOOTGATE_SECRET_TEST", canary)
	s, err := FromEnv("SCOOTGATE_SECRET_TEST")
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	if s.Reveal() != canary {
		t.Errorf("Reveal() does not return the variable's value")
	}
	t.Setenv("SCOOTGATE_SECRET_TEST", "")
	_, err = FromEnv("SCOOTGATE_SECRET_TEST")
	checkErr(t, err, ErrEmpty, `secret: environment variable "SCOOTGATE_SECRET_TEST" is empty`)
	_, err = FromEnv("SCOOTGATE_SECRET_TEST_SURELY_UNSET")
	checkErr(t, err, ErrUnset, `secret: environment variable "SCOOTGATE_SECRET_TEST_SURELY_UNSET" is unset`)
}

func TestFromFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		name    string
		path    string
		want    string
		wantErr error
		wantMsg string
	}{
		{name: "plain", path: write("plain", canary), want: canary},
		{name: "trailing LF", path: write("lf", canary+"\n"), want: canary},
		{name: "trailing CRLF", path: write("crlf", canary+"\r\n"), want: canary},
		{
			name: "only one LF trimmed", path: write("lflf", canary+"\n\n"), wantErr: ErrControl,
			wantMsg: fmt.Sprintf("secret: file %q contains a control character (U+000A) after its one trailing newline is trimmed; a credential is one line of printable characters (a second line?)", filepath.Join(dir, "lflf")),
		},
		{
			name: "second line", path: write("two", canary+"\nsecond\n"), wantErr: ErrControl,
			wantMsg: fmt.Sprintf("secret: file %q contains a control character (U+000A) after its one trailing newline is trimmed; a credential is one line of printable characters (a second line?)", filepath.Join(dir, "two")),
		},
		{
			name: "lone CR", path: write("cr", canary+"\r"), wantErr: ErrControl,
			wantMsg: fmt.Sprintf("secret: file %q contains a control character (U+000D) after its one trailing newline is trimmed; a credential is one line of printable characters (a second line?)", filepath.Join(dir, "cr")),
		},
		{
			name: "tab", path: write("tab", "a\tb"), wantErr: ErrControl,
			wantMsg: fmt.Sprintf("secret: file %q contains a control character (U+0009) after its one trailing newline is trimmed; a credential is one line of printable characters (a second line?)", filepath.Join(dir, "tab")),
		},
		{name: "spaces kept", path: write("spaces", " "+canary+" \n"), want: " " + canary + " "},
		{name: "empty", path: write("empty", ""), wantErr: ErrEmpty, wantMsg: fmt.Sprintf("secret: file %q is empty", filepath.Join(dir, "empty"))},
		{name: "only newline", path: write("nl", "\n"), wantErr: ErrEmpty, wantMsg: fmt.Sprintf("secret: file %q is empty", filepath.Join(dir, "nl"))},
		{name: "only CRLF", path: write("crlfonly", "\r\n"), wantErr: ErrEmpty, wantMsg: fmt.Sprintf("secret: file %q is empty", filepath.Join(dir, "crlfonly"))},
		{name: "missing", path: missing, wantErr: os.ErrNotExist, wantMsg: fmt.Sprintf("secret: read file %q: no such file or directory", missing)},
		{name: "directory", path: dir, wantErr: ErrNotRegular, wantMsg: fmt.Sprintf("secret: read file %q: not a regular file (a directory)", dir)},
		{
			name: "too large", path: write("big", strings.Repeat("x", MaxFileBytes+1)), wantErr: ErrTooLarge,
			wantMsg: fmt.Sprintf("secret: file %q is too large (limit %d bytes)", filepath.Join(dir, "big"), MaxFileBytes),
		},
		{name: "at limit", path: write("limit", strings.Repeat("x", MaxFileBytes)), want: strings.Repeat("x", MaxFileBytes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := FromFile(tt.path)
			checkErr(t, err, tt.wantErr, tt.wantMsg)
			if s.Reveal() != tt.want {
				t.Errorf("Reveal() = %d bytes, want %d bytes", len(s.Reveal()), len(tt.want))
			}
		})
	}
}

func TestFromFileFuncErrorNamesPath(t *testing.T) {
	boom := errors.New("boom")
	_, err := FromFileFunc("/run/secrets/x", func(string) ([]byte, error) { return nil, boom })
	checkErr(t, err, boom, `secret: read file "/run/secrets/x": boom`)
}

// checkErr fails unless err matches wantErr (errors.Is) and wantMsg exactly;
// wantMsg == "" means no error is expected. It never prints the canary.
func checkErr(t *testing.T, err, wantErr error, wantMsg string) {
	t.Helper()
	if wantMsg == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("got no error, want %q", wantMsg)
	}
	if strings.Contains(err.Error(), canary) {
		t.Fatalf("error reveals the secret")
	}
	if wantErr != nil && !errors.Is(err, wantErr) {
		t.Errorf("errors.Is(err, %v) = false for %v", wantErr, err)
	}
	if diff := cmp.Diff(err.Error(), wantMsg); diff != "" {
		t.Errorf("error (-got +want):\n%s", diff)
	}
}
