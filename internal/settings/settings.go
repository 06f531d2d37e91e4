// Package settings is the registry type of the broker's settings: each
// component (broker/log, broker/kafka, broker/group, ...) exports one List
// of its settings, each defined once with its Kafka name, type, parser,
// formatter, one line of documentation and whether it can change at
// runtime. The broker composes the lists (Lift) and drives Set, Names,
// Values, DescribeConfigs, AlterConfigs validation and docs/settings.md
// from them (docs/architecture.md §1, "Settings").
package settings

import (
	"fmt"
	"sort"
	"strconv"
	"time"
)

// Type is Kafka's config type, as DescribeConfigs v3+ reports it.
type Type int8

// Kafka's config types.
const (
	Unknown  Type = 0
	Boolean  Type = 1
	String   Type = 2
	Int      Type = 3
	Short    Type = 4
	Long     Type = 5
	Double   Type = 6
	ListType Type = 7
	Class    Type = 8
	Password Type = 9
)

// Setting is one setting of a config struct C.
type Setting[C any] struct {
	// Name is Kafka's name for it (a topic config name for a topic
	// setting, a broker config name otherwise).
	Name string
	// Type is Kafka's type for it.
	Type Type
	// Doc is one line of documentation, as docs/settings.md gives it.
	Doc string
	// Synonym, on a topic setting, is the broker config that holds its
	// broker-wide default (Kafka's LogConfig synonyms); on a broker
	// setting, the topic config whose default it is. Empty for neither.
	Synonym string
	// Dynamic is true when AlterConfigs and IncrementalAlterConfigs may
	// change it on a broker resource at runtime (the broker-wide topic
	// defaults Kafka's DynamicLogConfig lists). On a topic setting it says
	// so of the broker synonym: every topic config changes per topic.
	Dynamic bool
	// Parse stores a value in c; the error says why the value is refused,
	// without the name (List.Set adds it).
	Parse func(c *C, value string) error
	// Format returns c's value as Kafka prints it.
	Format func(c C) string
}

// List is a component's settings, in the order it defines them, with the
// way its errors name a setting.
type List[C any] struct {
	items  []Setting[C]
	byName map[string]int
	wrap   func(name, value string, err error) error
}

// NewList makes a List. wrap turns a Parse error into the component's
// message (e.g. "kafka: name=value: ..."); nil keeps Parse's error.
func NewList[C any](wrap func(name, value string, err error) error, items ...Setting[C]) List[C] {
	l := List[C]{byName: make(map[string]int, len(items)), wrap: wrap}
	for _, s := range items {
		l = l.add(s)
	}
	return l
}

func (l List[C]) add(s Setting[C]) List[C] {
	if _, dup := l.byName[s.Name]; dup {
		panic("settings: " + s.Name + " defined twice")
	}
	if l.wrap != nil {
		parse, wrap, name := s.Parse, l.wrap, s.Name
		s.Parse = func(c *C, v string) error {
			if err := parse(c, v); err != nil {
				return wrap(name, v, err)
			}
			return nil
		}
	}
	l.byName[s.Name] = len(l.items)
	l.items = append(l.items, s)
	return l
}

// Join returns one List of l's settings and others' (each keeps its own
// error wrapping). A name defined twice panics: that is a programming error.
func Join[C any](lists ...List[C]) List[C] {
	out := List[C]{byName: map[string]int{}}
	for _, l := range lists {
		for _, s := range l.items {
			out = out.add(s)
		}
	}
	return out
}

// Lift makes a List of an outer config O from a component's List of P,
// the field of O that holds P.
func Lift[O, P any](l List[P], field func(*O) *P) List[O] {
	out := List[O]{byName: make(map[string]int, len(l.items))}
	for _, s := range l.items {
		parse, format := s.Parse, s.Format
		out = out.add(Setting[O]{
			Name: s.Name, Type: s.Type, Doc: s.Doc, Synonym: s.Synonym, Dynamic: s.Dynamic,
			Parse:  func(o *O, v string) error { return parse(field(o), v) },
			Format: func(o O) string { return format(*field(&o)) },
		})
	}
	return out
}

// All returns the settings in definition order.
func (l List[C]) All() []Setting[C] { return l.items }

// Lookup returns the setting of that name.
func (l List[C]) Lookup(name string) (Setting[C], bool) {
	i, ok := l.byName[name]
	if !ok {
		return Setting[C]{}, false
	}
	return l.items[i], true
}

// Names returns every name, sorted.
func (l List[C]) Names() []string {
	names := make([]string, 0, len(l.items))
	for _, s := range l.items {
		names = append(names, s.Name)
	}
	sort.Strings(names)
	return names
}

// Set applies one setting; ok is false when l has no such name.
func (l List[C]) Set(c *C, name, value string) (ok bool, err error) {
	s, ok := l.Lookup(name)
	if !ok {
		return false, nil
	}
	return true, s.Parse(c, value)
}

// Values returns every setting's value in c, by name.
func (l List[C]) Values(c C) map[string]string {
	out := make(map[string]string, len(l.items))
	for _, s := range l.items {
		out[s.Name] = s.Format(c)
	}
	return out
}

// The constructors below cover the common shapes: a field set from the
// value as written, or parsed as an integer, a boolean or milliseconds.

// Str is a setting kept as written; the config's Validate judges it.
func Str[C any](name string, typ Type, doc string, dst func(*C) *string) Setting[C] {
	return Setting[C]{Name: name, Type: typ, Doc: doc,
		Parse:  func(c *C, v string) error { *dst(c) = v; return nil },
		Format: func(c C) string { return *dst(&c) },
	}
}

// Checked is a string setting whose values check accepts or refuses.
func Checked[C any](name string, typ Type, doc string, check func(string) error, dst func(*C) *string) Setting[C] {
	s := Str(name, typ, doc, dst)
	s.Parse = func(c *C, v string) error {
		if err := check(v); err != nil {
			return err
		}
		*dst(c) = v
		return nil
	}
	return s
}

// Integer is an integer setting of bits bits, 0 for Go's int ("must be an
// integer: ...").
func Integer[C any, T int | int16 | int32 | int64](name string, typ Type, bits int, doc string, dst func(*C) *T) Setting[C] {
	return Setting[C]{Name: name, Type: typ, Doc: doc,
		Parse: func(c *C, v string) error {
			var n int64
			var err error
			if bits == 0 { // an int as Atoi takes it, with Atoi's errors
				var i int
				i, err = strconv.Atoi(v)
				n = int64(i)
			} else {
				n, err = strconv.ParseInt(v, 10, bits)
			}
			if err != nil {
				return fmt.Errorf("must be an integer: %w", err)
			}
			*dst(c) = T(n)
			return nil
		},
		Format: func(c C) string { return strconv.FormatInt(int64(*dst(&c)), 10) },
	}
}

// Bool is a true-or-false setting; notBool is the error for anything else.
func Bool[C any](name, doc string, notBool func(error) error, dst func(*C) *bool) Setting[C] {
	return Setting[C]{Name: name, Type: Boolean, Doc: doc,
		Parse: func(c *C, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return notBool(err)
			}
			*dst(c) = b
			return nil
		},
		Format: func(c C) string { return strconv.FormatBool(*dst(&c)) },
	}
}

// Duration is a setting of a whole number of unit (time.Millisecond for
// Kafka's *.ms names) held as a Duration; notNumber is the error for a
// value that is not one.
func Duration[C any](name string, unit time.Duration, doc string, notNumber func(error) error, dst func(*C) *time.Duration) Setting[C] {
	return Setting[C]{Name: name, Type: Long, Doc: doc,
		Parse: func(c *C, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil && (n > int64(time.Duration(1<<63-1)/unit) || n < int64(-1<<63)/int64(unit)) {
				err = strconv.ErrRange
			}
			if err != nil {
				return notNumber(err)
			}
			*dst(c) = time.Duration(n) * unit
			return nil
		},
		Format: func(c C) string { return strconv.FormatInt(int64(*dst(&c)/unit), 10) },
	}
}

// Info is what a setting is, apart from the struct that holds it: what
// DescribeConfigs and docs/settings.md tell of it.
type Info struct {
	Name, Doc, Synonym string
	Type               Type
	Dynamic            bool
	// Default is the value in the component's default config.
	Default string
}

// Infos describes l's settings, sorted by name, with their values in def
// as defaults.
func (l List[C]) Infos(def C) []Info {
	out := make([]Info, 0, len(l.items))
	for _, s := range l.items {
		out = append(out, Info{Name: s.Name, Doc: s.Doc, Synonym: s.Synonym, Type: s.Type, Dynamic: s.Dynamic, Default: s.Format(def)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Ms is a setting of milliseconds held as a Duration ("must be an integer
// number of milliseconds: ...").
func Ms[C any](name, doc string, dst func(*C) *time.Duration) Setting[C] {
	return Duration(name, time.Millisecond, doc, func(err error) error {
		return fmt.Errorf("must be an integer number of milliseconds: %w", err)
	}, dst)
}

// TrueFalse is a boolean setting ("must be true or false: ...").
func TrueFalse[C any](name, doc string, dst func(*C) *bool) Setting[C] {
	return Bool(name, doc, func(err error) error { return fmt.Errorf("must be true or false: %w", err) }, dst)
}
