package limits_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/internal/secret"
)

// TestRedisPasswordIsSecret: the Redis password is a secret.Secret like
// every other credential: printing the options shows "[redacted]", and
// the value still reaches Redis's AUTH (a real redis-server with
// requirepass).
func TestRedisPasswordIsSecret(t *testing.T) {
	const password = "redis-pw-canary-7d1f"
	rs := startRedis(t)
	if got, err := rs.do("CONFIG SET requirepass " + password); err != nil || got != "+OK" {
		t.Fatalf("CONFIG SET requirepass: %q, %v", got, err)
	}
	ups := make(chan bool, 4)
	o := limits.RedisOptions{
		Address: rs.addr(), Password: secret.New(password), Timeout: time.Second,
		OnChange: func(up bool) { ups <- up },
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(verb, o); strings.Contains(s, password) {
			t.Errorf("%s of the options shows the password", verb)
		}
	}
	store := limits.NewRedis(o)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { store.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	select {
	case up := <-ups:
		if !up {
			t.Fatal("the store reported down: AUTH failed")
		}
	case <-time.After(15 * time.Second): // only when it fails
		t.Fatal("the store never came up with the password")
	}
}
