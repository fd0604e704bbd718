package sse_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/sse"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// goldenInputs returns the transcripts in testdata/*.sse by file name.
func goldenInputs(t testing.TB) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*.sse"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no testdata/*.sse transcripts")
	}
	in := make(map[string][]byte, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		in[filepath.Base(p)] = b
	}
	return in
}

// errClass names the end of a stream by sentinel.
func errClass(err error) string {
	switch {
	case err == io.EOF:
		return "EOF"
	case errors.Is(err, sse.ErrTruncated):
		return "ErrTruncated"
	case errors.Is(err, sse.ErrTooLarge):
		return "ErrTooLarge"
	}
	return fmt.Sprintf("error %v", err)
}

// render prints events one field per line with every byte quoted, so that
// line endings are visible in the golden files.
func render(evs []sse.Event, err error) string {
	var b strings.Builder
	for i, ev := range evs {
		fmt.Fprintf(&b, "# event %d\n", i+1)
		fmt.Fprintf(&b, "type: %q\n", ev.Type)
		fmt.Fprintf(&b, "comment: %v\n", ev.Comment)
		if ev.Data == nil {
			b.WriteString("data: none\n")
		} else {
			fmt.Fprintf(&b, "data: %s\n", strconv.Quote(string(ev.Data)))
		}
		fmt.Fprintf(&b, "raw: %s\n", strconv.Quote(string(ev.Raw)))
	}
	fmt.Fprintf(&b, "# end: %s\n", errClass(err))
	return b.String()
}

func TestGolden(t *testing.T) {
	for name, in := range goldenInputs(t) {
		t.Run(name, func(t *testing.T) {
			evs, err := oneShot(in, 0)
			if !bytes.Equal(concatRaw(evs), in) {
				t.Errorf("concatenated Raw differs from the transcript")
			}
			got := render(evs, err)
			path := filepath.Join("testdata", strings.TrimSuffix(name, ".sse")+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if diff := cmp.Diff(got, string(want)); diff != "" {
				t.Errorf("events (-got +want):\n%s", diff)
			}
		})
	}
}
