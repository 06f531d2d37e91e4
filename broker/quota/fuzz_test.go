package quota

import "testing"

// FuzzDecode: any node data and any notification path decode or are
// refused without a panic, and a path that parses prints back the same.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"version":1,"config":{"producer_byte_rate":"1048576","SCRAM-SHA-256":"salt=..."}}`), "users/alice/clients/app")
	f.Add([]byte(`{"version":1,"config":{"request_percentage":"x"}}`), "clients/<default>")
	f.Add([]byte(``), "users/%zz")
	f.Fuzz(func(t *testing.T, data []byte, path string) {
		if values, err := decode(data); err == nil {
			for k := range values {
				if _, err := kindOf(string(k)); err != nil {
					t.Fatalf("decoded a non-quota key %q", k)
				}
			}
		}
		if e, ok := ParseEntityPath(path); ok && e.Path() != path {
			t.Fatalf("%q parsed as %v, which prints as %q", path, e, e.Path())
		}
	})
}
