package schemas

import (
	"errors"
	"strconv"
	"testing"
	"time"
)

func TestParseFieldDecl(t *testing.T) {
	good := map[string]Field{
		"campaign:string":    {Name: "campaign", Type: TypeString, Dictionary: true},
		"cart_value:double":  {Name: "cart_value", Type: TypeFloat64},
		"items:int64":        {Name: "items", Type: TypeInt64},
		"logged_in:bool":     {Name: "logged_in", Type: TypeBool},
		"_shipped:timestamp": {Name: "_shipped", Type: TypeTimestamp},
		"A9:string":          {Name: "A9", Type: TypeString, Dictionary: true},
	}
	for decl, want := range good {
		f, err := ParseFieldDecl(decl)
		if err != nil {
			t.Errorf("%q: %v", decl, err)
			continue
		}
		if f.Name != want.Name || f.Type != want.Type || f.Dictionary != want.Dictionary || f.Required || f.Doc == "" {
			t.Errorf("%q: %+v", decl, f)
		}
	}
	for _, decl := range []string{"", "campaign", "campaign:", ":string", "campaign:text", "campaign:String",
		"9lives:int64", "a-b:string", "a.b:string", "a b:string", "a:string:dict", "é:string"} {
		if f, err := ParseFieldDecl(decl); err == nil {
			t.Errorf("%q accepted: %+v", decl, f)
		}
	}
}

func decls(t *testing.T, ds ...string) []Field {
	t.Helper()
	var out []Field
	for _, d := range ds {
		f, err := ParseFieldDecl(d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

func TestExtendVersionsAndFingerprints(t *testing.T) {
	if s, err := Click.Extend(); err != nil || s != Click {
		t.Fatalf("Extend() = %v, %v; want Click itself", s, err)
	}
	v2, err := Click.Extend(decls(t, "campaign:string")...)
	if err != nil {
		t.Fatal(err)
	}
	v3, err := Click.Extend(decls(t, "campaign:string", "cart_value:double")...)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Click.Extend(decls(t, "screen:string")...)
	if err != nil {
		t.Fatal(err)
	}
	if v2.Version != Click.Version+1 || v3.Version != Click.Version+2 || other.Version != Click.Version+1 || v2.Name != "click" {
		t.Fatalf("versions %d %d %d", v2.Version, v3.Version, other.Version)
	}
	if f, _ := v3.Field("cart_value"); f.Since != Click.Version+2 || f.Required {
		t.Errorf("cart_value: %+v", f)
	}
	if f, _ := v3.Field("campaign"); f.Since != Click.Version+1 {
		t.Errorf("campaign: %+v", f)
	}
	// Appending declarations over time is a chain of valid evolutions.
	if err := CheckEvolution(Click, v2); err != nil {
		t.Error(err)
	}
	if err := CheckEvolution(v2, v3); err != nil {
		t.Error(err)
	}
	// Same version, different columns: the fingerprint tells them apart;
	// the same declarations give the same fingerprint.
	again, _ := Click.Extend(decls(t, "campaign:string")...)
	fps := map[string]string{}
	for name, s := range map[string]*Schema{"v1": Click, "v2": v2, "v3": v3, "other": other, "log": Log, "metric": Metric} {
		fp := s.Fingerprint()
		if len(fp) != 16 {
			t.Errorf("%s: fingerprint %q", name, fp)
		}
		if prev, dup := fps[fp]; dup {
			t.Errorf("%s and %s share fingerprint %s", name, prev, fp)
		}
		fps[fp] = name
	}
	if again.Fingerprint() != v2.Fingerprint() {
		t.Error("the same declarations gave different fingerprints")
	}
	md := v3.Arrow().Metadata()
	if v, _ := md.GetValue(MetaSchemaVersion); v != strconv.Itoa(Click.Version+2) {
		t.Errorf("arrow metadata version %q", v)
	}
	if v, _ := md.GetValue(MetaSchemaFingerprint); v != v3.Fingerprint() {
		t.Errorf("arrow metadata fingerprint %q", v)
	}
	if af := v3.Arrow().Field(len(v3.Fields) - 1); af.Name != "cart_value" || !af.Nullable {
		t.Errorf("last arrow field %v", af)
	}
}

func TestExtendRejects(t *testing.T) {
	cases := map[string][]Field{
		"existing field":         decls(t, "url:string"),
		"existing in other case": decls(t, "URL:string"),
		"twice":                  decls(t, "a:string", "A:int64"),
		"hive dt":                decls(t, "dt:string"),
		"hive hr":                decls(t, "HR:int64"),
		"required":               {{Name: "a", Type: TypeString, Required: true}},
		"enum":                   {{Name: "a", Type: TypeString, Enum: []string{"x"}}},
		"catch-all":              {{Name: "a", Type: TypeJSON, CatchAll: true}},
	}
	for name, fields := range cases {
		if _, err := Click.Extend(fields...); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestDecodeDeclaredFields: declared fields decode to typed values, are null
// when absent or null, are checked for type, and no longer reach the
// catch-all column; unknown fields still do.
func TestDecodeDeclaredFields(t *testing.T) {
	s, err := Click.Extend(decls(t, "campaign:string", "items:int64", "cart_value:double", "logged_in:bool", "shipped:timestamp")...)
	if err != nil {
		t.Fatal(err)
	}
	r := s.NewRow()
	ev := `{"type":"click","campaign":"spring","items":3,"cart_value":19.5,"logged_in":true,"shipped":1714557600123,"plan":"pro"}`
	if err := r.Decode([]byte(ev)); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"campaign": "spring", "items": int64(3), "cart_value": 19.5, "logged_in": true,
		"shipped": time.UnixMilli(1714557600123).UTC(), "properties": `{"plan":"pro"}`}
	for name, v := range want {
		if got := r.Get(name); got != v {
			t.Errorf("%s = %#v, want %#v", name, got, v)
		}
	}
	if err := r.Decode([]byte(`{"type":"click","campaign":null,"properties":{"a":1}}`)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"campaign", "items", "cart_value", "logged_in", "shipped"} {
		if r.Get(name) != nil {
			t.Errorf("%s = %v, want null", name, r.Get(name))
		}
	}
	for ev, class := range map[string]error{
		`{"type":"click","items":1.5}`:       ErrWrongType,
		`{"type":"click","campaign":7}`:      ErrWrongType,
		`{"type":"click","logged_in":"yes"}`: ErrWrongType,
		`{"type":"click","shipped":"soon"}`:  ErrBadTimestamp,
	} {
		var ve *ValidationError
		if err := r.Decode([]byte(ev)); !errors.As(err, &ve) || !errors.Is(err, class) {
			t.Errorf("%s: %v, want %v", ev, err, class)
		}
	}
}
