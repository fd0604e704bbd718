package cpserver

// NewWithHoldHook is New with a func called each time a request starts
// to be held, so that tests publish only once a poll is waiting.
func NewWithHoldHook(dir string, onHold func()) *Handler {
	return &Handler{dir: dir, onHold: onHold}
}
