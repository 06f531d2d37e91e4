package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestSchemaRegistryBeaconValidation: a beacon process validates click
// events against the JSON Schema subject of a broker process's registry:
// an event that does not match is answered 400 with the schema's reason,
// one that matches is accepted.
func TestSchemaRegistryBeaconValidation(t *testing.T) {
	t.Parallel()
	b := startRegistryBroker(t)
	schema := `{"type":"object","properties":{"x":{"type":"integer","minimum":0}},"required":["x"]}`
	if code, body, err := srCall(b.url, http.MethodPost, "/subjects/clicks-value/versions",
		`{"schemaType":"JSON","schema":`+strconv.Quote(schema)+`}`); err != nil || code != http.StatusOK {
		t.Fatalf("register the click JSON Schema: %d %s %v", code, body, err)
	}
	for _, topic := range []string{"clicks", "clicks.dlq"} {
		b.createTopic(t, topic, 1, nil)
	}
	bp := startBeacon(t, b.broker, "beacon:\n  topic: clicks\n  schemas:\n    click: clicks-value\n  schema_registry:\n    urls: ["+b.url+"]\n")

	bad := request(t, "POST", bp.url+"/v1/events", "application/json", `{"type":"click","x":-1}`, nil)
	errs, _ := bad.body["errors"].([]any)
	if bad.status != http.StatusBadRequest || len(errs) != 1 || !strings.Contains(fmt.Sprint(errs[0]), "clicks-value") {
		t.Errorf("an event below the schema's minimum: %d %v; want 400 naming clicks-value", bad.status, bad.body)
	}
	good := request(t, "POST", bp.url+"/v1/events", "application/json", `{"type":"click","x":3}`, nil)
	if good.status/100 != 2 || good.body["accepted"] != float64(1) {
		t.Errorf("a matching event: %d %v; want it accepted", good.status, good.body)
	}
}
