package settings

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

type inner struct {
	Wait  time.Duration
	Count int
	On    bool
}

type outer struct {
	Name  string
	Inner inner
}

var innerSettings = NewList(func(name, value string, err error) error {
	return fmt.Errorf("inner: %s=%q: %w", name, value, err)
},
	Ms("wait.ms", "how long", func(c *inner) *time.Duration { return &c.Wait }),
	Integer("count", Int, 0, "how many", func(c *inner) *int { return &c.Count }),
	TrueFalse("on", "whether", func(c *inner) *bool { return &c.On }),
)

// TestLiftJoinSetValues: a lifted list sets and formats the outer struct's
// field, keeps its own error wrapping, and a joined list finds every name.
func TestLiftJoinSetValues(t *testing.T) {
	all := Join(
		NewList[outer](nil, Checked("name", String, "a name", func(v string) error {
			if v == "" {
				return fmt.Errorf("must not be empty")
			}
			return nil
		}, func(c *outer) *string { return &c.Name })),
		Lift(innerSettings, func(c *outer) *inner { return &c.Inner }),
	)
	var c outer
	for name, value := range map[string]string{"name": "x", "wait.ms": "1500", "count": "3", "on": "true"} {
		if ok, err := all.Set(&c, name, value); !ok || err != nil {
			t.Fatalf("Set(%s, %s) = %v, %v", name, value, ok, err)
		}
	}
	if want := (outer{Name: "x", Inner: inner{Wait: 1500 * time.Millisecond, Count: 3, On: true}}); c != want {
		t.Fatalf("got %+v, want %+v", c, want)
	}
	if v := all.Values(c); v["wait.ms"] != "1500" || v["count"] != "3" || v["on"] != "true" || v["name"] != "x" || len(v) != 4 {
		t.Errorf("Values = %v", v)
	}
	if got := strings.Join(all.Names(), ","); got != "count,name,on,wait.ms" {
		t.Errorf("Names = %s", got)
	}
	if ok, _ := all.Set(&c, "nope", "1"); ok {
		t.Error("Set of an unknown name reported ok")
	}
	for _, tc := range []struct{ name, value, err string }{
		{"wait.ms", "x", `inner: wait.ms="x": must be an integer number of milliseconds: strconv.ParseInt: parsing "x": invalid syntax`},
		{"wait.ms", "9223372036854775807", `inner: wait.ms="9223372036854775807": must be an integer number of milliseconds: value out of range`},
		{"count", "x", `inner: count="x": must be an integer: strconv.Atoi: parsing "x": invalid syntax`},
		{"on", "maybe", `inner: on="maybe": must be true or false: strconv.ParseBool: parsing "maybe": invalid syntax`},
		{"name", "", "must not be empty"},
	} {
		before := c
		if _, err := all.Set(&c, tc.name, tc.value); err == nil || err.Error() != tc.err {
			t.Errorf("Set(%s, %q) = %v, want %s", tc.name, tc.value, err, tc.err)
		}
		if c != before {
			t.Errorf("a refused %s changed the config", tc.name)
		}
	}
	if infos := all.Infos(outer{Inner: inner{Count: 7}}); infos[0].Name != "count" || infos[0].Default != "7" || infos[0].Type != Int {
		t.Errorf("Infos[0] = %+v", infos[0])
	}
}

func TestJoinRefusesADuplicate(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a name defined twice did not panic")
		}
	}()
	Join(innerSettings, innerSettings)
}
