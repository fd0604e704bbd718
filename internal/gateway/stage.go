package gateway

import "github.com/scootgate/scootgate/pkg/usageevent"

// stage is where an attempt failed: the usage event's failure_stage
// (docs/usage-events.md) and the request log's stage. The request path
// decides with these values; their wire names are in one place,
// stageNames.
type stage uint8

const (
	stageNone                stage = iota // the attempt succeeded
	stageSelect                           // no target could take the request (logged; no attempt, no event)
	stageConnect                          // egress proxy or provider TLS failed; nothing sent
	stageSend                             // failed after sending may have begun, before the response status
	stageTimeout                          // a configured timeout fired
	stageProviderAuth                     // the provider refused the backend's credential
	stageProviderStatus                   // the provider answered with an error status
	stageResponseBody                     // reading a non-stream answer failed
	stageFirstEvent                       // a stream failed before its first event
	stageStream                           // a stream ended without its terminator
	stageProviderStreamError              // the provider sent an in-band error event
	stageClientCancelled                  // the client went away
	stageShutdown                         // the node cut the attempt at the end of its drain or on a second signal
	stageClientWrite                      // writing the answer to the client failed
	stageInternal                         // a gateway bug stopped the attempt
	stageStreamTotal                      // a stream ran past timeouts.stream_total
	stageNoProgress                       // a stream sent only keepalives for longer than timeouts.stream_progress
	stageClientStalled                    // the client stopped reading: a write to it did not go out within the stream idle limit
	numStages
)

var stageNames = [numStages]string{
	stageNone:                "",
	stageSelect:              "select",
	stageConnect:             usageevent.StageConnect,
	stageSend:                usageevent.StageSend,
	stageTimeout:             usageevent.StageTimeout,
	stageProviderAuth:        usageevent.StageProviderAuth,
	stageProviderStatus:      usageevent.StageProviderStatus,
	stageResponseBody:        usageevent.StageResponseBody,
	stageFirstEvent:          usageevent.StageFirstEvent,
	stageStream:              usageevent.StageStream,
	stageProviderStreamError: usageevent.StageProviderStreamError,
	stageClientCancelled:     usageevent.StageClientCancelled,
	stageShutdown:            usageevent.StageShutdown,
	stageClientWrite:         usageevent.StageClientWrite,
	stageInternal:            usageevent.StageInternal,
	stageStreamTotal:         usageevent.StageStreamTotal,
	stageNoProgress:          usageevent.StageNoProgress,
	stageClientStalled:       usageevent.StageClientStalled,
}

// String returns the stage's wire name, "" for stageNone.
func (s stage) String() string { return stageNames[s] }

// cancelled reports whether the attempt ended because the request did:
// the client went away, the node cut it, the answer could not be written,
// the client stopped reading, or a bug. None of these says anything about the backend.
func (s stage) cancelled() bool {
	return s == stageClientCancelled || s == stageShutdown || s == stageClientWrite || s == stageInternal || s == stageClientStalled
}
