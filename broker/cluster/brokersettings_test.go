package cluster

import (
	"reflect"
	"testing"
)

// TestBrokerSettingLayers: a dynamic broker setting's value for this
// broker is its own dynamic value over the cluster-wide one (Kafka's
// DYNAMIC_BROKER_CONFIG over DYNAMIC_DEFAULT_BROKER_CONFIG); the default
// resource describes the cluster-wide one only; with neither, the
// properties file's value applies (ok false).
func TestBrokerSettingLayers(t *testing.T) {
	e := openEnv(t, t.TempDir())
	const name = "leader.replication.throttled.rate"
	calls := 0
	e.c.OnBrokerSettings(func() { calls++ })
	if _, ok := e.c.BrokerSetting(name); ok {
		t.Fatal("a setting nobody set has a dynamic value")
	}
	if err := e.c.SetBrokerConfig("", map[string]string{name: "2000"}, false); err != nil {
		t.Fatal(err)
	}
	if err := e.c.SetBrokerConfig("0", map[string]string{name: "1000"}, false); err != nil {
		t.Fatal(err)
	}
	if v, ok := e.c.BrokerSetting(name); !ok || v != "1000" || calls != 2 {
		t.Fatalf("after both layers: %q %v with %d notifications, want this broker's 1000 and 2", v, ok, calls)
	}
	layers, err := e.c.BrokerSettingLayers("0", name)
	if want := []ConfigSynonym{{name, "1000", SourceDynamicBroker}, {name, "2000", SourceDynamicDefaultBroker}}; err != nil || !reflect.DeepEqual(layers, want) {
		t.Fatalf("broker 0's layers: %+v %v, want %+v", layers, err, want)
	}
	wide, err := e.c.BrokerConfigSources("")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, v := range wide {
		found = found || (v.Name == name && v.Value == "2000" && v.Source == SourceDynamicDefaultBroker)
	}
	if !found {
		t.Fatalf("the default resource does not describe the cluster-wide %s: %+v", name, wide)
	}
	if err := e.c.SetBrokerConfig("0", nil, false); err != nil {
		t.Fatal(err)
	}
	if v, _ := e.c.BrokerSetting(name); v != "2000" {
		t.Fatalf("with broker 0's value removed: %q, want the cluster-wide 2000", v)
	}
}
