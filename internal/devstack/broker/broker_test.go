package broker

import (
	"slices"
	"sync"
	"testing"
)

// TestFilter: OnMessage sees only the topics Filter matches. The broker's
// own $SYS statistics reach a "#" subscription here, so a consumer of
// usage events (make run's) must subscribe to the usage topic itself.
func TestFilter(t *testing.T) {
	for _, tt := range []struct {
		filter string
		want   []string
	}{
		{filter: "", want: []string{"$SYS/broker/uptime", "scootgate/usage"}}, // "#"
		{filter: "scootgate/usage", want: []string{"scootgate/usage"}},
	} {
		t.Run(tt.filter, func(t *testing.T) {
			var (
				mu  sync.Mutex
				got []string
			)
			b, err := Start(Options{Addr: "127.0.0.1:0", Filter: tt.filter, OnMessage: func(topic string, _ []byte) {
				mu.Lock()
				got = append(got, topic)
				mu.Unlock()
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			// Inline publishes reach inline subscribers before Publish
			// returns, in order.
			for _, topic := range []string{"$SYS/broker/uptime", "scootgate/usage"} {
				if err := b.Server().Publish(topic, []byte("x"), false, 0); err != nil {
					t.Fatal(err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(got, tt.want) {
				t.Errorf("OnMessage saw %q, want %q", got, tt.want)
			}
		})
	}
}
