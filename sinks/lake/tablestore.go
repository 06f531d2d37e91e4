package lake

import (
	"context"
	"strings"

	"millrace/store"
)

// tableStore puts the worker's files into the tables' data directories:
// the worker names its objects by Layout ("<topic>/dt=…/hr=…/part-….parquet"),
// and tableStore keeps each under its table,
// "<namespace>.db/<topic>/data/dt=…/hr=…/part-….parquet", in a store rooted
// at the warehouse. So the files keep the deterministic names the
// exactly-once argument needs (doc.go), and the table's data files are
// where iceberg-go's own writers and the orphan sweep look for them. Names
// without a topic directory pass unchanged.
type tableStore struct {
	store.Store
	namespace string
}

// toTable maps a Layout name to its name in the warehouse.
func (s tableStore) toTable(name string) string {
	topic, rest, ok := strings.Cut(name, "/")
	if !ok {
		return name
	}
	return s.namespace + ".db/" + topic + "/data/" + rest
}

// fromTable is the inverse of toTable.
func (s tableStore) fromTable(name string) string {
	rest, ok := strings.CutPrefix(name, s.namespace+".db/")
	if !ok {
		return name
	}
	topic, rest, ok := strings.Cut(rest, "/data/")
	if !ok {
		return name
	}
	return topic + "/" + rest
}

func (s tableStore) Create(ctx context.Context, name string) (store.Object, error) {
	obj, err := s.Store.Create(ctx, s.toTable(name))
	if err != nil {
		return nil, err
	}
	return tableObject{Object: obj, s: s}, nil
}

func (s tableStore) Open(ctx context.Context, name string) (store.Reader, error) {
	return s.Store.Open(ctx, s.toTable(name))
}

func (s tableStore) List(ctx context.Context, prefix string) ([]store.ObjectInfo, error) {
	infos, err := s.Store.List(ctx, s.toTable(prefix))
	for i := range infos {
		infos[i].Name = s.fromTable(infos[i].Name)
	}
	return infos, err
}

func (s tableStore) Remove(ctx context.Context, name string) error {
	return s.Store.Remove(ctx, s.toTable(name))
}

func (s tableStore) Cleanup(ctx context.Context, prefix string, match func(string) bool) (int, error) {
	if match == nil {
		return s.Store.Cleanup(ctx, s.toTable(prefix), nil)
	}
	return s.Store.Cleanup(ctx, s.toTable(prefix), func(name string) bool { return match(s.fromTable(name)) })
}

// tableObject is an object of a tableStore: its names are Layout names.
type tableObject struct {
	store.Object
	s tableStore
}

func (o tableObject) Name() string { return o.s.fromTable(o.Object.Name()) }

func (o tableObject) PublishAs(ctx context.Context, name string) error {
	return o.Object.PublishAs(ctx, o.s.toTable(name))
}
