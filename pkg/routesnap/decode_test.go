package routesnap_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/routesnap"
)

const backendB = `{"id": "b", "protocol": "openai", "base_url": "https://b.example/v1", "credential": "c", "max_inflight_per_node": 4}`

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		want    *routesnap.Snapshot
		wantErr *routesnap.DecodeError // Err is not compared
	}{
		{
			name: "full document",
			doc: `{"schema": 1, "version": 42, "generated_at": "2026-11-29T10:00:00Z",
			       "backends": [` + backendB + `],
			       "models": [{"name": "m", "targets": [
			           {"backend": "b", "model": "x", "weight": 3, "stream": true, "tools": true, "json_schema": true, "tier": 2},
			           {"backend": "b", "model": "y", "weight": 1}]}]}`,
			want: &routesnap.Snapshot{
				Schema: 1, Version: 42,
				GeneratedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC),
				Backends: []routesnap.Backend{{
					ID: "b", Protocol: "openai", BaseURL: "https://b.example/v1", Credential: "c", MaxInflightPerNode: 4,
				}},
				Models: []routesnap.Model{{Name: "m", Targets: []routesnap.Target{
					{Backend: "b", Model: "x", Weight: 3, Stream: true, Tools: true, JSONSchema: true, Tier: 2},
					{Backend: "b", Model: "y", Weight: 1},
				}}},
			},
		},
		{
			name: "empty arrays stay non-nil, missing ones are nil (Validate rejects both)",
			doc:  "\n {\"schema\": 1, \"version\": 3, \"backends\": [], \"models\": [{\"name\": \"m\"}], \"generated_at\": null} \r\n\t",
			want: &routesnap.Snapshot{Schema: 1, Version: 3, Backends: []routesnap.Backend{}, Models: []routesnap.Model{{Name: "m"}}},
		},
		{
			name: "include_usage: absent is nil, false and true are kept",
			doc: `{"schema": 1, "version": 1, "backends": [` + backendB + `,
			       {"id": "off", "protocol": "openai", "base_url": "https://b.example/v1", "credential": "c", "max_inflight_per_node": 4, "include_usage": false},
			       {"id": "on", "protocol": "openai", "base_url": "https://b.example/v1", "credential": "c", "max_inflight_per_node": 4, "include_usage": true}]}`,
			want: &routesnap.Snapshot{Schema: 1, Version: 1, Backends: []routesnap.Backend{
				{ID: "b", Protocol: "openai", BaseURL: "https://b.example/v1", Credential: "c", MaxInflightPerNode: 4},
				{ID: "off", Protocol: "openai", BaseURL: "https://b.example/v1", Credential: "c", MaxInflightPerNode: 4, IncludeUsage: new(false)},
				{ID: "on", Protocol: "openai", BaseURL: "https://b.example/v1", Credential: "c", MaxInflightPerNode: 4, IncludeUsage: new(true)},
			}},
		},
		{
			// The schema and the docs let a control plane set both; the
			// decoder used to refuse affinity as an unknown member.
			name: "affinity and prefix_affinity: absent is nil, false and true are kept",
			doc: `{"schema": 1, "version": 1, "models": [{"name": "a", "affinity": false},
			       {"name": "p", "affinity": true, "prefix_affinity": true}, {"name": "n"}]}`,
			want: &routesnap.Snapshot{Schema: 1, Version: 1, Models: []routesnap.Model{
				{Name: "a", Affinity: new(false)}, {Name: "p", Affinity: new(true), PrefixAffinity: new(true)}, {Name: "n"},
			}},
		},
		{
			name: "largest version",
			doc:  `{"schema": 1, "version": 18446744073709551615}`,
			want: &routesnap.Snapshot{Schema: 1, Version: 1<<64 - 1},
		},
		{name: "empty input", doc: " \n ", wantErr: &routesnap.DecodeError{Msg: "empty document"}},
		{name: "top-level null", doc: "null", wantErr: &routesnap.DecodeError{Msg: "expected an object, got null"}},
		{name: "top-level array", doc: "[]", wantErr: &routesnap.DecodeError{Msg: "expected an object, got array"}},
		{
			name:    "syntax error reports line and column",
			doc:     "{\n  \"schema\": 1,,\n}",
			wantErr: &routesnap.DecodeError{Line: 2, Column: 15, Msg: "invalid character ',' looking for beginning of object key string"},
		},
		{
			name:    "truncated",
			doc:     "{\"schema\": 1,\n \"models\": [",
			wantErr: &routesnap.DecodeError{Line: 2, Column: 13, Msg: "unexpected end of document (truncated?)"},
		},
		{
			name:    "truncated inside a target",
			doc:     `{"schema": 1, "models": [{"name": "m", "targets": [{"backend": "b", "wei`,
			wantErr: &routesnap.DecodeError{Line: 1, Column: 73, Msg: "unexpected end of document (truncated?)"},
		},
		{
			name:    "trailing data",
			doc:     "{\"schema\": 1}\n\n  x",
			wantErr: &routesnap.DecodeError{Line: 3, Column: 3, Msg: "unexpected data after the document"},
		},
		{
			name:    "two documents",
			doc:     `{"schema": 1}{"schema": 1}`,
			wantErr: &routesnap.DecodeError{Line: 1, Column: 14, Msg: "unexpected data after the document"},
		},
		{
			name:    "unknown top-level member",
			doc:     `{"schema": 1, "verison": 2}`,
			wantErr: &routesnap.DecodeError{Path: "verison", Line: 1, Column: 15, Msg: "unknown member"},
		},
		{
			name:    "unknown backend member names its index",
			doc:     `{"schema": 1, "backends": [` + backendB + `, {"id": "c", "weight": 1}]}`,
			wantErr: &routesnap.DecodeError{Path: "backends[1].weight", Line: 1, Column: 158, Msg: "unknown member"},
		},
		{
			name:    "unknown target member names both indices",
			doc:     `{"models": [{"name": "a", "targets": []}, {"name": "m", "targets": [{"backend": "b"}, {"backend": "b", "wieght": 1}]}]}`,
			wantErr: &routesnap.DecodeError{Path: "models[1].targets[1].wieght", Line: 1, Column: 104, Msg: "unknown member"},
		},
		{
			name:    "wrong type names the member with indices",
			doc:     `{"models": [{"name": "m", "targets": [{"backend": "b"}, {"backend": "b", "weight": "3"}]}]}`,
			wantErr: &routesnap.DecodeError{Path: "models[0].targets[1].weight", Msg: "expected an integer, got string"},
		},
		{
			name:    "fractional weight",
			doc:     `{"models": [{"name": "m", "targets": [{"weight": 1.5}]}]}`,
			wantErr: &routesnap.DecodeError{Path: "models[0].targets[0].weight", Msg: "expected an integer, got number 1.5"},
		},
		{
			name:    "negative version",
			doc:     `{"schema": 1, "version": -1}`,
			wantErr: &routesnap.DecodeError{Path: "version", Msg: "expected a non-negative integer, got number -1"},
		},
		{
			name:    "version string",
			doc:     `{"schema": 1, "version": "7"}`,
			wantErr: &routesnap.DecodeError{Path: "version", Msg: "expected a non-negative integer, got string"},
		},
		{
			name:    "backends not an array",
			doc:     `{"backends": {}}`,
			wantErr: &routesnap.DecodeError{Path: "backends", Msg: "expected an array, got object"},
		},
		{
			name:    "backend of the wrong type",
			doc:     `{"backends": [` + backendB + `, "b"]}`,
			wantErr: &routesnap.DecodeError{Path: "backends[1]", Msg: "expected an object, got string"},
		},
		{
			name:    "include_usage not a boolean",
			doc:     `{"backends": [{"id": "b", "include_usage": "no"}]}`,
			wantErr: &routesnap.DecodeError{Path: "backends[0].include_usage", Msg: "expected a boolean, got string"},
		},
		{
			name:    "null backend",
			doc:     `{"backends": [null]}`,
			wantErr: &routesnap.DecodeError{Path: "backends[0]", Msg: "expected an object, got null"},
		},
		{
			name:    "null model",
			doc:     `{"models": [{"name": "m", "targets": []}, null]}`,
			wantErr: &routesnap.DecodeError{Path: "models[1]", Msg: "expected an object, got null"},
		},
		{
			name:    "null target",
			doc:     `{"models": [{"name": "m", "targets": [{"backend": "b"}, null]}]}`,
			wantErr: &routesnap.DecodeError{Path: "models[0].targets[1]", Msg: "expected an object, got null"},
		},
		{
			name:    "bad timestamp",
			doc:     `{"generated_at": "yesterday"}`,
			wantErr: &routesnap.DecodeError{Path: "generated_at", Msg: "expected an RFC 3339 timestamp string such as \"2026-11-29T10:00:00Z\" (upper-case T and Z, two-digit fields, no leap second)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := routesnap.Decode([]byte(tt.doc))
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if diff := cmp.Diff(got, tt.want); diff != "" {
					t.Errorf("Decode mismatch (-got +want):\n%s", diff)
				}
				return
			}
			if got != nil {
				t.Errorf("Decode returned a snapshot with an error")
			}
			var de *routesnap.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v (%T) is not a *DecodeError", err, err)
			}
			gotErr := *de
			gotErr.Err = nil
			if diff := cmp.Diff(&gotErr, tt.wantErr); diff != "" {
				t.Errorf("DecodeError mismatch (-got +want):\n%s", diff)
			}
			if !strings.HasPrefix(err.Error(), "routesnap: decode: ") {
				t.Errorf("Error() = %q, want the routesnap: decode: prefix", err)
			}
		})
	}
}

func TestDecodeErrorString(t *testing.T) {
	e := &routesnap.DecodeError{Path: "models[1].name", Line: 3, Column: 7, Msg: "bad"}
	if diff := cmp.Diff(e.Error(), "routesnap: decode: line 3, column 7: models[1].name: bad"); diff != "" {
		t.Errorf("Error() mismatch (-got +want):\n%s", diff)
	}
}
