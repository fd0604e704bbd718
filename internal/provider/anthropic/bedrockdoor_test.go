package anthropic

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
)

// TestSSEFramesAnySplit: the events read from an SSE stream are the same
// however the stream is cut into writes, CRLF pairs included.
func TestSSEFramesAnySplit(t *testing.T) {
	stream := "event: message_start\r\ndata: {\"a\":1}\r\n\r\n: comment\n\nevent: ping\ndata: {}\n\ndata: x\ndata: y\n\n" +
		"event: message_stop\rdata: {\"type\":\"message_stop\"}\r\r"
	want := []string{"message_start {\"a\":1}", "ping {}", " x\ny", "message_stop {\"type\":\"message_stop\"}"}
	for cut := 0; cut <= len(stream); cut++ {
		for cut2 := cut; cut2 <= len(stream); cut2++ {
			var got []string
			var f provider.SSEFrames
			emit := func(typ string, data []byte) { got = append(got, typ+" "+string(data)) }
			f.Feed([]byte(stream[:cut]), emit)
			f.Feed([]byte(stream[cut:cut2]), emit)
			f.Feed([]byte(stream[cut2:]), emit)
			if diff := cmp.Diff(got, want); diff != "" {
				t.Fatalf("cut at %d and %d (-got +want):\n%s", cut, cut2, diff)
			}
		}
	}
}

// TestFromEnvelopeKeepsMembers: every member but the envelope's keeps its
// bytes and order; the model and stream lead.
func TestFromEnvelopeKeepsMembers(t *testing.T) {
	h := http.Header{}
	body := `{ "max_tokens" : 5 , "anthropic_version":"bedrock-2023-05-31", "messages":[ {"role":"user"} ],"x\u0041":"é"}`
	out, pathModel, berr := bedrockDoorRequest([]byte(body), `m"1`, true, h)
	if berr != nil {
		t.Fatal(berr)
	}
	want := `{"model":"m\"1","stream":true,"max_tokens":5,"messages":[ {"role":"user"} ],"x\u0041":"é"}`
	if diff := cmp.Diff(string(out), want); diff != "" || pathModel != "" {
		t.Errorf("body (-got +want):\n%s\npath model %q", diff, pathModel)
	}
}
