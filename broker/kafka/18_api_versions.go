package kafka

// ApiVersions (key 18), versions 0–4.
//
// Answers with every API in the registry and the version range served. A
// version above 4 gets UNSUPPORTED_VERSION in a v0 body (KIP-511), handled in
// the connection loop because such a body cannot be decoded. Responses always
// use the v0 header, even for the flexible versions 3 and 4, so a client can
// read the answer before it knows what the broker speaks.
//
// Unsupported: supported and finalized features (v3+) are left empty: millrace
// has no feature flags. The client software name and version (v3+) are not
// validated, so older or unusual clients are not refused over a label.
// Version 5 (KRaft broker registration fields) is not served.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(18, 0, 4, handleAPIVersions) }

func handleAPIVersions(_ context.Context, _ *Broker, r *request) (kmsg.Response, error) {
	resp := r.body.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = servedAPIs()
	return resp, nil
}
