package authz

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSwapIfNewer covers the re-check Load relies on when another Load
// swapped an index in after its own version pre-check.
func TestSwapIfNewer(t *testing.T) {
	v5 := &Index{version: 5}
	tests := []struct {
		name        string
		cur         *Index
		next        *Index
		wantSwapped bool
		wantErr     error
		wantCur     *Index
	}{
		{name: "into empty store", cur: nil, next: v5, wantSwapped: true, wantCur: v5},
		{name: "newer", cur: &Index{version: 4}, next: v5, wantSwapped: true, wantCur: v5},
		{name: "equal", cur: v5, next: &Index{version: 5}, wantCur: v5},
		{name: "older", cur: v5, next: &Index{version: 4}, wantErr: ErrOlderVersion, wantCur: v5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &Store{}
			st.Swap(tt.cur)
			swapped, err := st.swapIfNewer(tt.next)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("swapIfNewer error = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(swapped, tt.wantSwapped); diff != "" {
				t.Errorf("swapped mismatch (-got +want):\n%s", diff)
			}
			if st.ix.Load() != tt.wantCur {
				t.Errorf("current index is %p, want %p", st.ix.Load(), tt.wantCur)
			}
		})
	}
}
