package proxy

import (
	"bytes"
	"io"
	"mime"
	"strings"
	"testing"
	"testing/iotest"
)

func TestIsEventStream(t *testing.T) {
	for _, ct := range []string{
		"text/event-stream", "text/event-stream; charset=utf-8", "Text/Event-Stream",
		" text/event-stream ;charset=utf-8", "text/event-stream;", "application/json",
		"application/json; charset=utf-8", "text/event-streams", "text/plain", "",
		"text/event-stream; charset=\"utf-8\"",
	} {
		mt, _, err := mime.ParseMediaType(ct)
		want := err == nil && mt == "text/event-stream"
		if got := isEventStream(ct); got != want {
			t.Errorf("isEventStream(%q) = %t, mime.ParseMediaType says %t", ct, got, want)
		}
	}
	// The one intended difference: malformed parameters do not hide the
	// media type.
	if !isEventStream("text/event-stream; ===") {
		t.Error("malformed parameters turned a stream into a whole answer")
	}
}

func TestReadAllLimit(t *testing.T) {
	data := bytes.Repeat([]byte("abcdefgh"), 1000) // 8000 bytes
	for _, tt := range []struct {
		name        string
		size, limit int
		want        int
	}{
		{"sized exactly", len(data) + 1, 1 << 20, len(data)},
		{"sized too small grows", 16, 1 << 20, len(data)},
		{"sized too large", 1 << 16, 1 << 20, len(data)},
		{"limit below the body", 4096, 5000, 5000},
		{"limit equals the body", 4096, len(data), len(data)},
		{"limit one past the body", len(data) + 1, len(data) + 1, len(data)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// OneByteReader: every short read path is taken.
			got, err := readAll(iotest.OneByteReader(bytes.NewReader(data)), tt.size, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data[:tt.want]) {
				t.Fatalf("read %d bytes, want the first %d", len(got), tt.want)
			}
			ref, _ := io.ReadAll(io.LimitReader(bytes.NewReader(data), int64(tt.limit)))
			if !bytes.Equal(got, ref) {
				t.Fatal("differs from io.ReadAll(io.LimitReader(...))")
			}
		})
	}
	if _, err := readAll(iotest.ErrReader(io.ErrUnexpectedEOF), 10, 100); err != io.ErrUnexpectedEOF {
		t.Fatalf("error = %v, want the reader's", err)
	}
	if got, err := readAll(strings.NewReader(""), 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("empty: %q, %v", got, err)
	}
}
