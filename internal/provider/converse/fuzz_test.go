package converse

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/scootgate/scootgate/internal/provider"

	"github.com/scootgate/scootgate/internal/sse"
)

// FuzzModelSegment: a path either is not the door's, or names an id that
// re-encodes (as the AWS SDKs encode it) to a path that reads back as the
// same id, or is refused; an accepted id never holds a percent-escape.
func FuzzModelSegment(f *testing.F) {
	for _, s := range []string{
		"/model/demo-nova/converse", "/model/us.amazon.nova-pro-v1%3A0/converse-stream",
		"/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.nova/converse",
		"/model/a%252F/converse", "/model/a/b/converse", "/model//converse", "/model/%zz/converse",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		model, op, ok, berr := ModelSegment(path)
		if !ok || berr != nil {
			if !ok && berr != nil {
				t.Fatalf("not the door's, yet refused: %v", berr)
			}
			return
		}
		if model == "" || provider.DoublyEncoded(model) {
			t.Fatalf("accepted id %q", model)
		}
		again := "/model/" + ModelPath(model) + "/" + op
		m2, op2, ok2, berr2 := ModelSegment(again)
		if !ok2 || berr2 != nil || m2 != model || op2 != op {
			t.Fatalf("%q re-encoded as %q reads %q, %q, %v, %v", model, again, m2, op2, ok2, berr2)
		}
	})
}

// FuzzWriter: whatever SSE the relay writes, in whatever pieces, the
// client gets well-formed event-stream messages, one per SSE event that
// carries data, each with that event's type and data as its payload.
func FuzzWriter(f *testing.F) {
	f.Add([]byte("event: messageStart\ndata: {\"role\":\"assistant\"}\n\n: keepalive\n\nevent: metadata\ndata: {}\n\n"), uint8(3))
	f.Add([]byte("event: throttlingException\r\ndata: {\"message\":\"x\"}\r\n\r\n"), uint8(1))
	f.Add([]byte("data: a\ndata: b\n\nevent: x\n\n"), uint8(2))
	f.Fuzz(func(t *testing.T, in []byte, step uint8) {
		n := int(step%16) + 1
		rec := httptest.NewRecorder()
		rec.Header().Set("Content-Type", "text/event-stream")
		w := NewWriter(rec)
		w.WriteHeader(http.StatusOK)
		for i := 0; i < len(in); i += n {
			if _, err := w.Write(in[i:min(i+n, len(in))]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
		// What an SSE reader makes of the same bytes, completed as Finish
		// completes them.
		var want []sse.Event
		rd := sse.NewReader(bytes.NewReader(append(bytes.Clone(in), "\n\n"...)), 0)
		for {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			if ev.Data != nil {
				want = append(want, sse.Event{Type: ev.Type, Data: bytes.Clone(ev.Data)})
			}
		}
		dec := eventstream.NewDecoder()
		for i := 0; ; i++ {
			m, err := dec.Decode(rec.Body, nil)
			if err == io.EOF {
				if i != len(want) {
					t.Fatalf("%d messages, want %d", i, len(want))
				}
				return
			}
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			if i >= len(want) {
				t.Fatalf("more messages than events (%d)", len(want))
			}
			typ := provider.EventStreamHeader(m.Headers, ":event-type") + provider.EventStreamHeader(m.Headers, ":exception-type")
			wantType := want[i].Type
			if wantType == "" {
				wantType = "message"
			}
			if typ != wantType || !bytes.Equal(m.Payload, want[i].Data) || (provider.EventStreamHeader(m.Headers, ":message-type") == "exception") != strings.HasSuffix(typ, "Exception") {
				t.Fatalf("message %d = %q %q, want %q %q", i, typ, m.Payload, wantType, want[i].Data)
			}
		}
	})
}
