package provider

import (
	"strconv"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// SendState is how far an attempt got (docs/failures.md "Send state"); a
// request's is the one of its last attempt. The request path sets it and
// metrics labels requests with it.
type SendState uint8

const (
	// NoAttempt is the state of a request that never reached an attempt:
	// refused by the node itself before any pick. It is the zero value.
	NoAttempt SendState = iota
	// NotSent: no request byte was handed to the provider's connection.
	NotSent
	// PossiblySent: request bytes may have reached the provider, but no
	// response status came back.
	PossiblySent
	// ResponseReceived: the provider's response status and headers arrived.
	ResponseReceived
	// NumSendStates is the number of send states, for arrays indexed by one.
	NumSendStates
)

// sendStateNames are the usage event's names (usageevent.Send*) and
// "none" for NoAttempt, which no event carries.
var sendStateNames = [NumSendStates]string{
	NoAttempt:        "none",
	NotSent:          usageevent.SendDefinitelyNotSent,
	PossiblySent:     usageevent.SendPossiblySent,
	ResponseReceived: usageevent.SendResponseReceived,
}

// String returns the state's name as usage events and logs write it
// ("definitely_not_sent", "possibly_sent", "response_received"), "none"
// for NoAttempt, and "send_state(N)" for a value outside the set.
func (s SendState) String() string {
	if s < NumSendStates {
		return sendStateNames[s]
	}
	return "send_state(" + strconv.Itoa(int(s)) + ")"
}
