package appliance

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The appliance's own metrics are for top and the console, not the user's
// lake: no sink of the demo lands an internal _millrace.* topic.
func TestDemoLandsNoInternalTopic(t *testing.T) {
	data, err := os.ReadFile("../../deployments/demo/millrace.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var demo Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&demo); err != nil {
		t.Fatal(err)
	}
	landed := 0
	for _, s := range demo.Sinks {
		for _, topic := range s.Topics {
			landed++
			if strings.HasPrefix(topic, "_millrace.") {
				t.Errorf("sink %s lands the internal topic %s", s.Name, topic)
			}
		}
	}
	if landed == 0 {
		t.Fatal("the demo has no sink topics: the test reads the wrong file")
	}
}
