package proxy

import "errors"

// ErrShutdown is the cause the node cancels request contexts with
// (context.CancelCauseFunc) when it cuts the requests still running at
// the end of a drain or on a second signal. An attempt whose context ends
// with this cause was cut by the node, not abandoned by its client.
var ErrShutdown = errors.New("the node is shutting down")
