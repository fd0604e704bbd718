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
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/catalog"
	"github.com/scootgate/scootgate/internal/sse"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// streamOf returns how a transcript is read: its name starts with its
// protocol's name and "_", and the first streaming endpoint of that
// protocol's API reads it (openai: chat completions).
func streamOf(t testing.TB, name string) *provider.StreamSpec {
	t.Helper()
	for _, a := range catalog.APIs() {
		if !strings.HasPrefix(name, a.Protocol.String()+"_") {
			continue
		}
		for _, s := range a.Endpoints {
			if s.Stream != nil {
				return s.Stream
			}
		}
	}
	t.Fatalf("transcript %s: name must start with the name of a protocol that streams and \"_\"", name)
	return nil
}

// TestGoldenCoversEveryAPI: every API that streams has transcripts, so
// that a new API's streams are read from recorded bytes too.
func TestGoldenCoversEveryAPI(t *testing.T) {
	in := transcripts(t)
	for _, a := range catalog.APIs() {
		streams := slices.ContainsFunc(a.Endpoints, func(s *provider.Spec) bool { return s.Stream != nil })
		n := 0
		for name := range in {
			if strings.HasPrefix(name, a.Protocol.String()+"_") {
				n++
			}
		}
		if streams && n == 0 {
			t.Errorf("no testdata/%s_*.sse transcript", a.Protocol)
		}
	}
}

// relay runs a transcript through sse.Reader and a tracker the way the
// request path does: every complete event is observed, in order; a partial
// event at a cut is not (it is never relayed either). It returns the
// client's view of the stream (the bytes of the events not hidden) and a
// rendering of what the tracker reported.
func relay(t testing.TB, name string, r io.Reader, hide bool) (client []byte, report string) {
	t.Helper()
	ss := streamOf(t, name)
	tr := ss.NewTracker(hide)
	rd := sse.NewReader(r, 0)
	var (
		hidden []int
		n      int
		end    string
		// Streams without a terminator event of their own (Gemini's):
		// the report says which chunks end the stream or report a failure.
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
		if ss.EndsAtEOF {
			switch done, failed := ss.Terminal(&ev); {
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
	if ss.EndsAtEOF {
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
