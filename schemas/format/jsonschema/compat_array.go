package jsonschema

import santhosh "github.com/santhosh-tekuri/jsonschema/v6"

// arrayItems reads an array schema the same way across drafts: the schema
// every item matches, or the tuple of schemas for the first items ("items"
// as an array before draft 2020-12, prefixItems from it on).
func arrayItems(s *santhosh.Schema) (all *santhosh.Schema, tuple []*santhosh.Schema) {
	switch items := s.Items.(type) {
	case *santhosh.Schema:
		all = items
	case []*santhosh.Schema:
		tuple = items
	}
	if len(s.PrefixItems) > 0 {
		tuple = s.PrefixItems
	} else if s.Items2020 != nil {
		all = s.Items2020
	}
	return all, tuple
}

// additionalItems is openness of the items after a tuple: additionalItems
// before draft 2020-12, "items" beside prefixItems from it on, else
// unevaluatedItems.
func additionalItems(s *santhosh.Schema) (bool, *santhosh.Schema) {
	switch {
	case len(s.PrefixItems) > 0 && s.Items2020 != nil:
		return openness(s.Items2020)
	case s.AdditionalItems != nil:
		return openness(s.AdditionalItems)
	case s.UnevaluatedItems != nil:
		return openness(s.UnevaluatedItems)
	}
	return true, nil
}

// openArray reports whether s's tuple is an open content model.
func openArray(s *santhosh.Schema) bool {
	permitted, schema := additionalItems(s)
	return permitted && schema == nil
}

// compareArray is Confluent's ArraySchemaDiff: items compared, tuple items
// added or removed judged by the content model, bounds that may only widen
// (the "contains" schema itself is not compared, as in Confluent).
func (c *comparer) compareArray(writer, reader *santhosh.Schema) []difference {
	wAll, wTuple := arrayItems(writer)
	rAll, rTuple := arrayItems(reader)
	diffs := under("/items", c.compare(wAll, rAll))
	for i := range max(len(wTuple), len(rTuple)) {
		switch {
		case i < len(wTuple) && i < len(rTuple):
			diffs = append(diffs, under(itemPath(i), c.compare(wTuple[i], rTuple[i]))...)
		case i < len(wTuple):
			diffs = append(diffs, c.itemRemoved(i, wTuple[i], reader)...)
		default:
			diffs = append(diffs, c.itemAdded(i, writer, rTuple[i])...)
		}
	}
	diffs = append(diffs, c.compareAdditional("ITEMS", "/additionalItems", writer, reader, additionalItems)...)
	diffs = append(diffs, intBound("MAX_ITEMS", "maxItems", writer.MaxItems, reader.MaxItems)...)
	diffs = append(diffs, intBound("MIN_ITEMS", "minItems", writer.MinItems, reader.MinItems)...)
	diffs = append(diffs, intBound("MAX_CONTAINS", "maxContains", writer.MaxContains, reader.MaxContains)...)
	diffs = append(diffs, intBound("MIN_CONTAINS", "minContains", writer.MinContains, reader.MinContains)...)
	switch {
	case writer.UniqueItems && !reader.UniqueItems:
		diffs = append(diffs, change("UNIQUE_ITEMS_REMOVED", "/uniqueItems", "the reader no longer requires unique items"))
	case !writer.UniqueItems && reader.UniqueItems:
		diffs = append(diffs, change("UNIQUE_ITEMS_ADDED", "/uniqueItems", "the reader requires unique items"))
	}
	return diffs
}

// itemRemoved judges a tuple item the reader no longer names by the
// reader's content model.
func (c *comparer) itemRemoved(i int, w, reader *santhosh.Schema) []difference {
	path := itemPath(i)
	if openArray(reader) {
		return []difference{change("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", path, "the reader's tuple drops item %d and lets it be anything", i)}
	}
	if _, covering := additionalItems(reader); covering != nil {
		sub := under(path, c.compare(w, covering))
		if compatible(sub) {
			return append(sub, change("ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", path, "the reader's tuple drops item %d and its additional items accept the writer's", i))
		}
		return append(sub, change("ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", path, "the reader's tuple drops item %d and its additional items refuse the writer's", i))
	}
	if isFalse(resolve(w)) {
		return []difference{change("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", path, "the reader's tuple drops item %d, which the writer forbade", i)}
	}
	return []difference{change("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", path, "the reader's closed tuple drops item %d, so it refuses the writer's arrays that have it", i)}
}

// itemAdded judges a tuple item the reader adds by the writer's content
// model.
func (c *comparer) itemAdded(i int, writer, r *santhosh.Schema) []difference {
	path := itemPath(i)
	if openArray(writer) {
		if !constrains(resolve(r)) {
			return []difference{change("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", path, "the reader's tuple adds item %d with an empty schema", i)}
		}
		return []difference{change("ITEM_ADDED_TO_OPEN_CONTENT_MODEL", path, "the reader's tuple adds item %d, which the writer's open tuple let be anything", i)}
	}
	if _, covering := additionalItems(writer); covering != nil {
		sub := under(path, c.compare(covering, r))
		if compatible(sub) {
			return append(sub, change("ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", path, "the reader's tuple adds item %d and reads the writer's additional items", i))
		}
		return append(sub, change("ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", path, "the reader's tuple adds item %d and refuses some of the writer's additional items", i))
	}
	return []difference{change("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", path, "the reader's tuple adds item %d, which the writer's closed tuple never had", i)}
}
