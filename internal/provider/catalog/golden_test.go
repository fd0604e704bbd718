package catalog_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider/anthropic"
	"github.com/scootgate/scootgate/internal/provider/gemini"
	"github.com/scootgate/scootgate/internal/provider/openai"
	"github.com/scootgate/scootgate/internal/sse"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// tracker is what the relay sees of either stream tracker.
type tracker interface {
	Observe(ev *sse.Event) bool
	Usage() (usageevent.Usage, json.RawMessage, bool)
}

// newTracker picks the tracker for a transcript by its name's prefix.
func newTracker(t testing.TB, name string, hide bool) tracker {
	t.Helper()
	switch {
	case strings.HasPrefix(name, "openai_"):
		return openai.NewChatStream(hide)
	case strings.HasPrefix(name, "anthropic_"):
		return anthropic.NewStream()
	case strings.HasPrefix(name, "gemini_"):
		return gemini.NewStream()
	}
	t.Fatalf("transcript %s: name must start with openai_, anthropic_ or gemini_", name)
	return nil
}

// relay runs a transcript through sse.Reader and a tracker the way the
// request path does: every complete event is observed, in order; a partial
// event at a cut is not (it is never relayed either). It returns the
// client's view of the stream (the bytes of the events not hidden) and a
// rendering of what the tracker reported.
func relay(t testing.TB, name string, r io.Reader, hide bool) (client []byte, report string) {
	t.Helper()
	tr := newTracker(t, name, hide)
	rd := sse.NewReader(r, 0)
	var (
		hidden []int
		n      int
		end    string
		// Gemini streams have no terminator event of their own: the
		// report says which chunks end the stream or report a failure.
		terminal []string
	)
	for {
		ev, err := rd.Next()
		if err != nil {
			switch {
			case err == io.EOF:
				end = "EOF"
			case errors.Is(err, sse.ErrTruncated):
				end = "ErrTruncated"
			default:
				t.Fatalf("Next: %v", err)
			}
			break
		}
		if strings.HasPrefix(name, "gemini_") {
			switch done, failed := gemini.Terminal(&ev); {
			case done:
				terminal = append(terminal, fmt.Sprintf("%d done", n))
			case failed:
				terminal = append(terminal, fmt.Sprintf("%d failed", n))
			}
		}
		if tr.Observe(&ev) {
			hidden = append(hidden, n)
		} else {
			client = append(client, ev.Raw...)
		}
		n++
	}

	var b strings.Builder
	fmt.Fprintf(&b, "events: %d\nend: %s\nhidden: %v\n", n, end, hidden)
	if strings.HasPrefix(name, "gemini_") {
		fmt.Fprintf(&b, "terminal: %v\n", terminal)
	}
	u, raw, ok := tr.Usage()
	if !ok {
		if u != (usageevent.Usage{}) || raw != nil {
			t.Errorf("Usage() = %+v, %s, false: want zero values with false", u, raw)
		}
		b.WriteString("usage: none\n")
		return client, b.String()
	}
	nu, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "usage: %s\nprovider_usage: %s\n", nu, raw)
	return client, b.String()
}

func transcripts(t *testing.T) map[string][]byte {
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

// TestGolden extracts usage from recorded transcripts (CRLF, multi-line
// data, cuts, missing terminators, in-band errors, several message_delta
// events). Each runs whole, one byte per read and half a buffer per read:
// how the provider's bytes are split into reads must not matter.
func TestGolden(t *testing.T) {
	for name, in := range transcripts(t) {
		t.Run(name, func(t *testing.T) {
			client, got := relay(t, name, bytes.NewReader(in), true)
			for split, r := range map[string]io.Reader{
				"one byte per read": iotest.OneByteReader(bytes.NewReader(in)),
				"half reads":        iotest.HalfReader(bytes.NewReader(in)),
			} {
				c, g := relay(t, name, r, true)
				if g != got || !bytes.Equal(c, client) {
					t.Errorf("%s: result differs from a whole read:\n%s\nwant\n%s", split, g, got)
				}
			}

			// The client sees every byte except the hidden events; nothing
			// is hidden when the client asked for usage itself.
			if strings.HasPrefix(name, "openai_") {
				c, g := relay(t, name, bytes.NewReader(in), false)
				if !strings.Contains(g, "hidden: []\n") {
					t.Errorf("hideUsageChunk false hid events:\n%s", g)
				}
				if !bytes.HasPrefix(in, c) {
					t.Errorf("hideUsageChunk false: the client's stream is not the provider's")
				}
				if usageLines(g) != usageLines(got) {
					t.Errorf("hideUsageChunk changed the usage:\n%s\nwant\n%s", g, got)
				}
			}

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
				t.Errorf("report (-got +want):\n%s", diff)
			}
		})
	}
}

// usageLines returns the usage part of a report.
func usageLines(report string) string {
	_, after, _ := strings.Cut(report, "usage: ")
	return after
}
