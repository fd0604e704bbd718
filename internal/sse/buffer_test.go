package sse_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/sse"
)

// recordingReader serves its chunks one Read at a time and records how
// many bytes each Read was offered (len(p)), which is the Reader's free
// buffer space at that moment.
type recordingReader struct {
	chunks  []string
	err     error // returned with the last chunk
	offered []int
}

func (r *recordingReader) Read(p []byte) (int, error) {
	r.offered = append(r.offered, len(p))
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	if r.chunks[0] = r.chunks[0][n:]; r.chunks[0] == "" {
		r.chunks = r.chunks[1:]
		if len(r.chunks) == 0 && r.err != nil {
			return n, r.err
		}
	}
	return n, nil
}

// event returns a data event of exactly n bytes.
func event(n int) string {
	return "data: " + strings.Repeat("x", n-len("data: \n\n")) + "\n\n"
}

// readEvents reads r to its end and returns the events' bytes.
func readEvents(t *testing.T, r io.Reader) string {
	t.Helper()
	rd := sse.NewReader(r, 0)
	var got strings.Builder
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return got.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		got.Write(ev.Raw)
	}
}

// TestIdleStreamHoldsSmallBuffer: a stream whose first read is one short
// event waits for the next bytes in a buffer of a few hundred bytes, not
// bufio's 4 KiB (docs/performance.md "Memory per idle stream"); a read
// that fills that buffer brings back the 4 KiB one.
func TestIdleStreamHoldsSmallBuffer(t *testing.T) {
	first, burst, last := event(200), strings.Repeat(event(128), 8), event(100) // the burst: 1 KiB at once
	r := &recordingReader{chunks: []string{first, event(300), burst, last}}
	if got := readEvents(t, r); got != first+event(300)+burst+last {
		t.Fatalf("events %q, want the input unchanged", got)
	}
	if r.offered[0] != 4096 {
		t.Errorf("the first read was offered %d bytes, want 4096: a first burst is read at once", r.offered[0])
	}
	if r.offered[1] > 512 || r.offered[2] > 512 {
		t.Errorf("after a short first read, reads were offered %v bytes: an idle stream holds a buffer that large", r.offered[1:3])
	}
	if n := r.offered[len(r.offered)-1]; n != 4096 {
		t.Errorf("after a read filled the small buffer, reads were offered %d bytes, want 4096 (offered: %v)", n, r.offered)
	}
}

// TestBusyStreamKeepsLargeBuffer: a first read of a burst keeps the 4 KiB
// buffer.
func TestBusyStreamKeepsLargeBuffer(t *testing.T) {
	burst := strings.Repeat(event(128), 8)
	r := &recordingReader{chunks: []string{burst, event(100), event(100)}}
	if got := readEvents(t, r); got != burst+event(100)+event(100) {
		t.Fatalf("events %q, want the input unchanged", got)
	}
	for i, n := range r.offered {
		if n != 4096 {
			t.Errorf("read %d was offered %d bytes, want 4096 (offered: %v)", i, n, r.offered)
		}
	}
}

// TestResizeKeepsSourceError: a source that returns its last bytes
// together with an error, in a read after which the buffer would change
// size, has that error reported; the Reader does not switch buffers and
// read the source again (which would answer io.EOF here).
func TestResizeKeepsSourceError(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name   string
		chunks []string
		events int
	}{
		{"short first read", []string{event(100)}, 1},
		{"the small buffer filled", []string{event(100), strings.Repeat(event(128), 4)}, 5}, // exactly 512 bytes
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &recordingReader{chunks: tc.chunks, err: errBoom}
			rd := sse.NewReader(r, 0)
			for i := range tc.events {
				if _, err := rd.Next(); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
			}
			if _, err := rd.Next(); !errors.Is(err, errBoom) {
				t.Fatalf("after the last event: %v, want %v", err, errBoom)
			}
			if len(r.offered) != len(tc.chunks) {
				t.Errorf("the source was read %d times after it failed, want 0", len(r.offered)-len(tc.chunks))
			}
		})
	}
}

// TestReaderReadSizes: every input reads the same in chunks around the
// small buffer's size, where the buffer grows.
func TestReaderReadSizes(t *testing.T) {
	inputs := map[string][]byte{"many events": []byte(strings.Repeat(event(100), 40) + event(3000) + strings.Repeat(event(500), 5))}
	for _, tc := range readerCases {
		if tc.max == 0 {
			inputs[tc.name] = []byte(tc.in)
		}
	}
	for name, in := range goldenInputs(t) {
		inputs[name] = in
	}
	for name, in := range inputs {
		for _, n := range []int{100, 511, 512, 513, 700, 1024, 4096, 5000} {
			checkSame(t, fmt.Sprintf("%s, reads of %d", name, n), in, 0, &chunkReader{b: in, n: n})
		}
		// Data and EOF in one read, in large reads.
		got, err := readAll(&recordingReader{chunks: []string{string(in)}, err: io.EOF}, 0)
		want, wantErr := oneShot(in, 0)
		if errClass(err) != errClass(wantErr) || !bytes.Equal(concatRaw(got), concatRaw(want)) {
			t.Errorf("%s, data with EOF: %v, %s", name, err, cmp.Diff(concatRaw(got), concatRaw(want)))
		}
	}
}

// eventsReader serves one event per Read, as a provider that sends its
// events apart does; reset starts it over without allocating.
type eventsReader struct {
	events [][]byte
	i, off int
}

func (r *eventsReader) Read(p []byte) (int, error) {
	if r.i == len(r.events) {
		return 0, io.EOF
	}
	n := copy(p, r.events[r.i][r.off:])
	if r.off += n; r.off == len(r.events[r.i]) {
		r.i, r.off = r.i+1, 0
	}
	return n, nil
}

func (r *eventsReader) reset() { r.i, r.off = 0, 0 }

// TestStreamAllocs: a stream whose events each arrive whole is read in
// place: reading all of it allocates the Reader and nothing else (no
// copy of an event, no buffer of its own), and Release gives the read
// buffer to the next stream.
func TestStreamAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	stream := append(openAIStream(20), anthropicSample...)
	src := &eventsReader{events: bytes.SplitAfter(stream, []byte("\n\n"))}
	types := []string{"message_start", "ping", "content_block_delta", "message_stop"}
	var got []byte
	read := func() {
		src.reset()
		got = got[:0]
		rd := sse.NewReader(src, 0)
		rd.KnownTypes(types)
		defer rd.Release()
		for {
			ev, err := rd.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ev.Raw...)
		}
	}
	read()
	if !bytes.Equal(got, stream) {
		t.Fatalf("read %q, want the input unchanged", got)
	}
	if n := testing.AllocsPerRun(100, read); n > 1 {
		t.Errorf("a stream read in place: %v allocations, want 1 (the Reader)", n)
	}
}

// TestRelease: after Release, Next fails and nothing is buffered.
func TestRelease(t *testing.T) {
	rd := sse.NewReader(strings.NewReader(event(100)+event(100)), 0)
	if _, err := rd.Next(); err != nil {
		t.Fatal(err)
	}
	rd.Release()
	rd.Release() // a second time does nothing
	if rd.Buffered() {
		t.Error("Buffered after Release")
	}
	if _, err := rd.Next(); err == nil || err == io.EOF {
		t.Errorf("Next after Release = %v, want an error", err)
	}
}
