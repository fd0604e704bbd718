package sse_test

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/sse"
)

// reference parses a whole transcript at once, by the WHATWG rules, as an
// independent model of what Reader must return for any split of the input.
func reference(in []byte) ([]sse.Event, error) {
	var (
		evs      []sse.Event
		cur      sse.Event
		comments bool
		fields   bool
		start    int
		first    = true
	)
	finish := func(end int) {
		cur.Raw = in[start:end]
		cur.Comment = comments && !fields
		evs = append(evs, cur)
		cur, comments, fields, start = sse.Event{}, false, false, end
	}
	pos := 0
	for {
		i := bytes.IndexAny(in[pos:], "\r\n")
		if i < 0 {
			break // a partial line at the end: never parsed
		}
		line := in[pos : pos+i]
		pos += i + 1
		if in[pos-1] == '\r' && pos < len(in) && in[pos] == '\n' {
			pos++
		}
		if first {
			first = false
			line = bytes.TrimPrefix(line, []byte("\ufeff"))
		}
		switch {
		case len(line) == 0:
			finish(pos)
			continue
		case line[0] == ':':
			comments = true
			continue
		}
		fields = true
		name, value, found := bytes.Cut(line, []byte(":"))
		if found {
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		switch string(name) {
		case "event":
			cur.Type = string(value)
		case "data":
			if cur.Data != nil {
				cur.Data = append(cur.Data, '\n')
			}
			cur.Data = append(append([]byte{}, cur.Data...), value...)
		}
	}
	if start == len(in) {
		return evs, io.EOF
	}
	finish(len(in))
	return evs, sse.ErrTruncated
}

func FuzzReader(f *testing.F) {
	for _, tc := range readerCases {
		f.Add([]byte(tc.in), uint8(7))
	}
	for _, in := range goldenInputs(f) {
		f.Add(in, uint8(200))
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		want, wantErr := reference(in)
		got, err := oneShot(in, 0)
		if errClass(err) != errClass(wantErr) {
			t.Fatalf("final error = %v, reference %v", err, wantErr)
		}
		if diff := cmp.Diff(got, want); diff != "" {
			t.Fatalf("events (-got +reference):\n%s", diff)
		}
		if !bytes.Equal(concatRaw(got), in) {
			t.Fatalf("concatenated Raw = %q, want the input", concatRaw(got))
		}
		checkSame(t, "chunked", in, 0, &chunkReader{b: in, n: 1 + int(chunk)%32})
		checkSame(t, "one byte", in, 0, iotest.OneByteReader(bytes.NewReader(in)))
		checkBuffered(t, &chunkReader{b: in, n: 1 + int(chunk)}, 0)
		checkBuffered(t, bytes.NewReader(in), 1+int(chunk))
		if len(in) > 0 {
			i := int(chunk) % (len(in) + 1)
			checkSame(t, "split", in, 0, io.MultiReader(bytes.NewReader(in[:i]), bytes.NewReader(in[i:])))
		}
		checkSame(t, "large reads", in, 0, &chunkReader{b: in, n: 400 + 2*int(chunk)}) // around the buffer's growth

		// With a limit, every event returned fits it and the stream is a
		// prefix of the input.
		limit := 1 + int(chunk)
		evs, err := readAll(bytes.NewReader(in), limit)
		for _, ev := range evs {
			if len(ev.Raw) > limit {
				t.Fatalf("event of %d bytes passed a limit of %d", len(ev.Raw), limit)
			}
		}
		if !bytes.HasPrefix(in, concatRaw(evs)) {
			t.Fatalf("events under a limit are not a prefix of the input")
		}
		tooLarge, complete := errors.Is(err, sse.ErrTooLarge), bytes.Equal(concatRaw(evs), in)
		if tooLarge == complete {
			t.Fatalf("limit %d: error %v after %d of %d bytes", limit, err, len(concatRaw(evs)), len(in))
		}
	})
}
