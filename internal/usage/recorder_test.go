package usage

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

type sliceAppender struct {
	accept bool
	got    [][]byte
}

func (s *sliceAppender) Append(p []byte) bool {
	if s.accept {
		s.got = append(s.got, p)
	}
	return s.accept
}

func validEvent() *usageevent.Event {
	return &usageevent.Event{
		EventID: NewEventID(time.Unix(1700000000, 0)), Schema: usageevent.Schema,
		NodeID: "n", RequestID: "sg-1", TenantID: "t", KeyID: "k",
		PublicModel: "m", ProviderModel: "p", Backend: "b", Protocol: usageevent.ProtocolOpenAI,
		Attempt: 1, SendState: usageevent.SendResponseReceived, HTTPStatus: 200,
		StartedAt: time.Unix(1700000000, 0).UTC(),
	}
}

func TestRecorder(t *testing.T) {
	out := &sliceAppender{accept: true}
	r := NewRecorder(out, 4096)
	ev := validEvent()
	r.Record(ev)
	if len(out.got) != 1 {
		t.Fatalf("appended %d events, want 1", len(out.got))
	}
	var back usageevent.Event
	if err := json.Unmarshal(out.got[0], &back); err != nil || back.EventID != ev.EventID {
		t.Fatalf("appended payload does not decode to the event: %v", err)
	}

	big := validEvent()
	big.PublicModel = strings.Repeat("m", 200)
	small := NewRecorder(out, 100)
	small.Record(big)

	bad := validEvent()
	bad.SendState = "sent-ish"
	r.Record(bad)

	full := NewRecorder(&sliceAppender{accept: false}, 4096)
	full.Record(validEvent())

	got := []RecorderStats{r.Stats(), small.Stats(), full.Stats()}
	want := []RecorderStats{{Recorded: 1, Invalid: 1}, {Oversize: 1}, {Dropped: 1}}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Fatalf("stats (-got +want):\n%s", diff)
	}
}
