package routesnap

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSince: a member introduced by a schema is refused in a document of
// an older one, at its own path, and accepted from that schema on; routes
// without a document (ValidateRoutes) follow the newest rules.
func TestSince(t *testing.T) {
	for _, tc := range []struct {
		schema int
		want   []Problem
	}{
		{1, []Problem{{Path: "models[0].x", Msg: "needs schema 2 or later (this document is schema 1); raise schema or remove the member"}}},
		{2, nil},
		{Schema, nil},
	} {
		v := validator{schema: tc.schema}
		v.since(2, "models[0].x")
		if diff := cmp.Diff(v.ps, tc.want); diff != "" {
			t.Errorf("schema %d (-got +want):\n%s", tc.schema, diff)
		}
	}
	if Schema < 2 {
		t.Fatalf("Schema = %d: schema 2 members would be refused in static routes", Schema)
	}
}
