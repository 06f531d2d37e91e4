package cluster

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestRegisterEndpoints(t *testing.T) {
	e := openEnv(t, t.TempDir())
	endpoints := []Endpoint{
		{Listener: "INTERNAL", SecurityProtocol: "SSL", Host: "10.0.0.1", Port: 9093},
		{Listener: "EXTERNAL", SecurityProtocol: "SASL_SSL", Host: "::1", Port: 9094},
	}
	if err := e.c.RegisterEndpoints(endpoints, ""); err != nil {
		t.Fatal(err)
	}
	data, _, err := e.store.Get("/brokers/ids/0")
	if err != nil {
		t.Fatal(err)
	}
	var z struct {
		Host      string            `json:"host"`
		Port      int32             `json:"port"`
		Endpoints []string          `json:"endpoints"`
		Map       map[string]string `json:"listener_security_protocol_map"`
	}
	if err := json.Unmarshal(data, &z); err != nil {
		t.Fatal(err)
	}
	want := []string{"INTERNAL://10.0.0.1:9093", "EXTERNAL://[::1]:9094"}
	if z.Host != "10.0.0.1" || z.Port != 9093 || !reflect.DeepEqual(z.Endpoints, want) || z.Map["INTERNAL"] != "SSL" || z.Map["EXTERNAL"] != "SASL_SSL" {
		t.Fatalf("registration %s", data)
	}
	info, ok := e.c.Broker(0)
	if !ok || !reflect.DeepEqual(info.Endpoints, endpoints) || info.Host != "10.0.0.1" || info.Port != 9093 {
		t.Fatalf("broker model %+v", info)
	}
	if ep, ok := info.Endpoint("EXTERNAL"); !ok || ep.Port != 9094 {
		t.Fatalf("EXTERNAL endpoint %+v %v", ep, ok)
	}
	if _, ok := info.Endpoint("PLAINTEXT"); ok {
		t.Fatal("a listener the broker lacks was found")
	}
}

func TestDecodeBroker(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		want []Endpoint
		bad  bool
	}{
		{"host and port only", `{"version":1,"host":"h","port":9092}`,
			[]Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "h", Port: 9092}}, false},
		{"listener named after its protocol, no map", `{"host":"h","port":1,"endpoints":["SSL://h:9093"]}`,
			[]Endpoint{{Listener: "SSL", SecurityProtocol: "SSL", Host: "h", Port: 9093}}, false},
		{"endpoint without a name", `{"host":"h","port":1,"endpoints":["h:9093"]}`, nil, true},
		{"port out of range", `{"host":"h","port":1,"endpoints":["A://h:70000"]}`, nil, true},
		{"not JSON", `{`, nil, true},
	} {
		info, err := decodeBroker(3, []byte(tc.data))
		if (err != nil) != tc.bad {
			t.Errorf("%s: err %v", tc.name, err)
			continue
		}
		if !tc.bad && !reflect.DeepEqual(info.Endpoints, tc.want) {
			t.Errorf("%s: endpoints %+v, want %+v", tc.name, info.Endpoints, tc.want)
		}
	}
}
