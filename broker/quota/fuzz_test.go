package quota

import "testing"

// FuzzDecode: any node data and any notification path decode or are
// refused without a panic, and a path that parses prints back the same.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"version":1,"config":{"producer_byte_rate":"1048576","SCRAM-SHA-256":"salt=..."}}`), "users/alice/clients/app")
	f.Add([]byte(`{"version":1,"config":{"request_percentage":"x"}}`), "clients/<default>")
	f.Add([]byte(``), "users/%zz")
	f.Add([]byte(`{"version":1,"config":{"connection_creation_rate":"10"}}`), "ips/::ffff:10.0.0.1")
	f.Fuzz(func(t *testing.T, data []byte, path string) {
		for _, e := range []Entity{UserEntity("u"), IPEntity(Default)} {
			if values, err := decode(e, data); err == nil {
				for k := range values {
					if !holds(e, k) {
						t.Fatalf("decoded %q, not a quota of %s", k, e)
					}
				}
			}
		}
		if e, ok := ParseEntityPath(path); ok && e.Path() != path {
			t.Fatalf("%q parsed as %v, which prints as %q", path, e, e.Path())
		}
	})
}
