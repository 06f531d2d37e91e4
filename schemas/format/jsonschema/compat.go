package jsonschema

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	santhosh "github.com/santhosh-tekuri/jsonschema/v6"

	"millrace/schemas/format"
)

// The compatibility check follows Confluent's JSON Schema diff
// (io.confluent.kafka.schemaregistry.json.diff): walk the writer's schema
// (Confluent's "original") and the reader's ("update") side by side, name
// every change with Confluent's Difference type, and call the pair
// compatible when every change is one of compatibleChanges. BACKWARD is
// new.ReadsFrom(old): every document the old schema accepted must be one the
// new schema accepts. The model is the compiled schema (santhosh's), so $ref
// is already resolved and drafts are already told apart:
//
//   - A schema without "type" has the types its keywords imply ("properties"
//     implies object, "maxLength" string, an enum the types of its values),
//     as Confluent's loader (everit) reads it.
//   - Several types are compared as sets: a superset is TYPE_EXTENDED, a
//     subset TYPE_NARROWED, anything else TYPE_CHANGED. integer is within
//     number. (Confluent models ["string","null"] as anyOf and reports
//     SUM_TYPE_EXTENDED or TYPE_CHANGED; the verdicts are the same.)
//   - "const" is a one-value enum.
//   - unevaluatedProperties and unevaluatedItems close or partially open a
//     content model where additionalProperties or additionalItems is absent.
//   - From draft 2019-09 on, a $ref beside other keywords is compared by
//     those keywords only.
//   - "format", the "contains" schema, "if"/"then"/"else" and annotations
//     other than "default" are not compared, as in Confluent.
//   - A name the reader requires and the writer did not is incompatible even
//     when no property declares it (Confluent checks only declared ones):
//     the writer's values may lack it.
//   - additionalItems without tuple items, which validates nothing, changes
//     nothing (Confluent compares it all the same).

// compatibleChanges are Confluent's SchemaDiff.COMPATIBLE_CHANGES_STRICT
// (its default; the lenient set is not offered): the changes after which the
// reader still accepts everything the writer did. Annotation changes (title,
// description, $id, default) are not reported at all.
var compatibleChanges = map[string]bool{
	"SCHEMA_REMOVED": true, "TYPE_EXTENDED": true,
	"MAX_LENGTH_INCREASED": true, "MAX_LENGTH_REMOVED": true,
	"MIN_LENGTH_DECREASED": true, "MIN_LENGTH_REMOVED": true, "PATTERN_REMOVED": true,
	"MAXIMUM_INCREASED": true, "MAXIMUM_REMOVED": true,
	"MINIMUM_DECREASED": true, "MINIMUM_REMOVED": true,
	"EXCLUSIVE_MAXIMUM_INCREASED": true, "EXCLUSIVE_MAXIMUM_REMOVED": true,
	"EXCLUSIVE_MINIMUM_DECREASED": true, "EXCLUSIVE_MINIMUM_REMOVED": true,
	"MULTIPLE_OF_REDUCED": true, "MULTIPLE_OF_REMOVED": true,
	"REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED": true, "REQUIRED_ATTRIBUTE_REMOVED": true,
	"DEPENDENCY_ARRAY_NARROWED": true, "DEPENDENCY_ARRAY_REMOVED": true, "DEPENDENCY_SCHEMA_REMOVED": true,
	"MAX_PROPERTIES_INCREASED": true, "MAX_PROPERTIES_REMOVED": true,
	"MIN_PROPERTIES_DECREASED": true, "MIN_PROPERTIES_REMOVED": true,
	"ADDITIONAL_PROPERTIES_ADDED": true, "ADDITIONAL_PROPERTIES_EXTENDED": true,
	"PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL":       true,
	"REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL": true,
	"OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL":              true,
	"PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL":        true,
	"PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL":                     true,
	"PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL":    true,
	"PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL":  true,
	"MAX_ITEMS_INCREASED": true, "MAX_ITEMS_REMOVED": true,
	"MIN_ITEMS_DECREASED": true, "MIN_ITEMS_REMOVED": true, "UNIQUE_ITEMS_REMOVED": true,
	"MAX_CONTAINS_INCREASED": true, "MAX_CONTAINS_REMOVED": true,
	"MIN_CONTAINS_DECREASED": true, "MIN_CONTAINS_REMOVED": true,
	"ADDITIONAL_ITEMS_ADDED": true, "ADDITIONAL_ITEMS_EXTENDED": true,
	"ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL":      true,
	"ITEM_ADDED_TO_CLOSED_CONTENT_MODEL":                      true,
	"ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL":       true,
	"ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL":                    true,
	"ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL":   true,
	"ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": true,
	"ENUM_ARRAY_EXTENDED":                                     true,
	"COMBINED_TYPE_EXTENDED":                                  true,
	"PRODUCT_TYPE_NARROWED":                                   true,
	"SUM_TYPE_EXTENDED":                                       true,
	"NOT_TYPE_NARROWED":                                       true,
}

// maxComparisons bounds the comparisons of subschemas (memoized ones too)
// and properties one check makes. Pairs are memoized, but a combination
// compares every branch with every branch; a hostile pair of schemas must
// not make a registration take minutes. Real schemas need thousands.
const maxComparisons = 200_000

// tooComplex is the Kind reported when maxComparisons is reached. It is not
// one of Confluent's: Confluent has no such bound.
const tooComplex = "COMPARISON_TOO_COMPLEX"

// gaveUp is the tooComplex difference.
func gaveUp() difference {
	return change(tooComplex, "", "the schemas need more than %d comparisons of subschemas to check; simplify their combinations (oneOf, anyOf, allOf)", maxComparisons)
}

// difference is one change, at a path relative to the pair compared
// ("/properties/x"; "" is the pair itself).
type difference struct {
	kind, path, message string
}

// schemaPair keys the memo: compiled schemas are shared by pointer, so
// recursive schemas ($ref to an enclosing schema) meet the same pair again.
type schemaPair struct{ writer, reader *santhosh.Schema }

// comparer holds one check's memo; it is used by one goroutine.
type comparer struct {
	memo        map[schemaPair][]difference
	inProgress  map[schemaPair]bool
	comparisons int
}

// compare returns the incompatible changes from writer to reader, sorted by
// path.
func compare(writer, reader *santhosh.Schema) []format.Incompat {
	c := &comparer{memo: map[schemaPair][]difference{}, inProgress: map[schemaPair]bool{}}
	diffs := c.compare(writer, reader)
	if c.comparisons > maxComparisons && !slices.ContainsFunc(diffs, func(d difference) bool { return d.kind == tooComplex }) {
		// The refusal may have been absorbed by a combination's matching:
		// say why the check gave up, wherever it did.
		diffs = append(diffs, gaveUp())
	}
	var out []format.Incompat
	for _, d := range diffs {
		if !compatibleChanges[d.kind] {
			out = append(out, format.Incompat{Kind: d.kind, Path: "#/" + strings.TrimPrefix(d.path, "/"), Message: d.message})
		}
	}
	slices.SortStableFunc(out, func(a, b format.Incompat) int { return cmp.Compare(a.Path, b.Path) })
	return out
}

// compatible reports whether every change in diffs is a compatible one.
func compatible(diffs []difference) bool {
	for _, d := range diffs {
		if !compatibleChanges[d.kind] {
			return false
		}
	}
	return true
}

// change makes a difference at path.
func change(kind, path, message string, args ...any) difference {
	return difference{kind: kind, path: path, message: fmt.Sprintf(message, args...)}
}

// under prefixes the paths of diffs with prefix.
func under(prefix string, diffs []difference) []difference {
	out := make([]difference, len(diffs))
	for i, d := range diffs {
		d.path = prefix + d.path
		out[i] = d
	}
	return out
}

// compare compares one pair, memoized. A pair met again while it is being
// compared is a recursion through $ref and counts as compatible, as in
// Confluent's Context.
func (c *comparer) compare(writer, reader *santhosh.Schema) []difference {
	writer, reader = resolve(writer), resolve(reader)
	switch {
	case writer == nil && reader == nil:
		return nil
	case writer == nil:
		return []difference{change("SCHEMA_ADDED", "", "the reader adds a schema where the writer had none")}
	case reader == nil:
		return []difference{change("SCHEMA_REMOVED", "", "the reader removes the writer's schema")}
	}
	c.comparisons++
	if c.comparisons > maxComparisons {
		return []difference{gaveUp()}
	}
	key := schemaPair{writer, reader}
	if diffs, ok := c.memo[key]; ok {
		return diffs
	}
	if c.inProgress[key] {
		return nil
	}
	c.inProgress[key] = true
	diffs := c.compareResolved(writer, reader)
	delete(c.inProgress, key)
	c.memo[key] = diffs
	return diffs
}

// maxRefHops bounds following a chain of $ref (a $ref to a $ref ...).
const maxRefHops = 32

// resolve follows $ref from a schema that has nothing else to compare.
func resolve(s *santhosh.Schema) *santhosh.Schema {
	for hops := 0; s != nil && s.Ref != nil && hops < maxRefHops; hops++ {
		if s.DraftVersion >= 2019 && constrainsBesidesRef(s) {
			return s
		}
		s = s.Ref
	}
	return s
}

// compareResolved compares a pair neither of which is a bare $ref.
func (c *comparer) compareResolved(writer, reader *santhosh.Schema) []difference {
	// A reader accepting everything reads any writer; a writer accepting
	// nothing is read by any reader (Confluent: FalseSchema original or
	// EmptySchema update).
	if isFalse(writer) || !constrains(reader) {
		return nil
	}
	if isFalse(reader) {
		return []difference{change("TYPE_CHANGED", "", "the reader accepts no value at all")}
	}
	if !constrains(writer) {
		return []difference{change("TYPE_CHANGED", "", "the writer accepts any value and the reader does not")}
	}
	wCriterion, wSubs := pureCombined(writer)
	rCriterion, rSubs := pureCombined(reader)
	switch {
	case wCriterion == "" && (rCriterion == "anyOf" || rCriterion == "oneOf" || len(rSubs) == 1):
		// The reader became a union: compatible when one branch reads
		// the writer (Confluent's SUM_TYPE_EXTENDED).
		for i, sub := range rSubs {
			diffs := c.compare(writer, sub)
			if !compatible(diffs) {
				continue
			}
			if len(rSubs) == 1 {
				return diffs
			}
			return append(under(fmt.Sprintf("/%s/%d", rCriterion, i), diffs),
				change("SUM_TYPE_EXTENDED", "", "the reader is a union (%s) with a branch that reads the writer's values", rCriterion))
		}
		return []difference{change("TYPE_CHANGED", "", "the reader is a combination (%s) none of whose branches reads the writer's values", rCriterion)}
	case rCriterion == "" && len(wSubs) == 1:
		if diffs := c.compare(wSubs[0], reader); compatible(diffs) {
			return diffs
		}
		return []difference{change("TYPE_CHANGED", "", "the writer's single-branch %s is not read by the reader", wCriterion)}
	case wCriterion != "" && rCriterion != "":
		return c.compareCombined(wCriterion, wSubs, rCriterion, rSubs)
	case wCriterion != "" || rCriterion != "":
		return []difference{change("TYPE_CHANGED", "", "one schema is a combination (%s%s) and the other is not", wCriterion, rCriterion)}
	}
	return c.compareKeywords(writer, reader)
}

// compareKeywords compares two schemas that are not bare combinations: their
// types, the keywords of the types both accept, enum, not, and the
// combinations beside them.
func (c *comparer) compareKeywords(writer, reader *santhosh.Schema) []difference {
	var diffs []difference
	wTypes, rTypes := typesOf(writer), typesOf(reader)
	if wTypes != rTypes {
		switch {
		case rTypes == anyType || rTypes&wTypes == wTypes:
			diffs = append(diffs, change("TYPE_EXTENDED", "", "the reader accepts the types %s where the writer accepted %s", rTypes, wTypes))
		case rTypes&wTypes == rTypes:
			diffs = append(diffs, change("TYPE_NARROWED", "", "the reader accepts only the types %s where the writer accepted %s", rTypes, wTypes))
		default:
			return []difference{change("TYPE_CHANGED", "", "the reader accepts the types %s where the writer accepted %s", rTypes, wTypes)}
		}
	}
	common := wTypes & rTypes
	if common&typeString != 0 {
		diffs = append(diffs, compareString(writer, reader)...)
	}
	if common&(typeNumber|typeInteger) != 0 {
		diffs = append(diffs, compareNumber(writer, reader)...)
	}
	if common&typeObject != 0 {
		diffs = append(diffs, c.compareObject(writer, reader)...)
	}
	if common&typeArray != 0 {
		diffs = append(diffs, c.compareArray(writer, reader)...)
	}
	diffs = append(diffs, compareEnum(writer, reader)...)
	diffs = append(diffs, c.compareNot(writer, reader)...)
	for _, criterion := range []string{"allOf", "anyOf", "oneOf"} {
		wSubs, rSubs := subschemas(writer, criterion), subschemas(reader, criterion)
		switch {
		case len(wSubs) == 0 && len(rSubs) == 0:
		case len(wSubs) == 0:
			diffs = append(diffs, change("SCHEMA_ADDED", "/"+criterion, "the reader adds %s beside its other keywords", criterion))
		case len(rSubs) == 0:
			diffs = append(diffs, change("SCHEMA_REMOVED", "/"+criterion, "the reader removes the writer's %s", criterion))
		default:
			diffs = append(diffs, c.compareCombined(criterion, wSubs, criterion, rSubs)...)
		}
	}
	return diffs
}

// compareNot compares "not" the other way round: the reader may exclude
// less than the writer did, not more (Confluent's NotSchemaDiff).
func (c *comparer) compareNot(writer, reader *santhosh.Schema) []difference {
	switch {
	case writer.Not == nil && reader.Not == nil:
		return nil
	case writer.Not == nil:
		return []difference{change("NOT_TYPE_EXTENDED", "/not", "the reader adds \"not\", refusing values the writer accepted")}
	case reader.Not == nil:
		return []difference{change("NOT_TYPE_NARROWED", "/not", "the reader removes \"not\"")}
	}
	if compatible(c.compare(reader.Not, writer.Not)) {
		return []difference{change("NOT_TYPE_NARROWED", "/not", "the reader's \"not\" excludes no more than the writer's")}
	}
	return []difference{change("NOT_TYPE_EXTENDED", "/not", "the reader's \"not\" excludes values the writer's did not")}
}

// compareCombined compares two combinations (Confluent's CombinedSchemaDiff):
// the criterion may only widen (to anyOf, or from a single branch), and the
// branches must pair up, each writer branch read by its own reader branch,
// for as many pairs as the smaller side has branches.
func (c *comparer) compareCombined(wCriterion string, wSubs []*santhosh.Schema, rCriterion string, rSubs []*santhosh.Schema) []difference {
	var diffs []difference
	if wCriterion != rCriterion {
		widened := rCriterion == "anyOf" ||
			(len(wSubs) == 1 && len(rSubs) == 1) ||
			(len(wSubs) == 1 && rCriterion == "oneOf") ||
			(len(rSubs) == 1 && wCriterion == "allOf")
		if !widened {
			return []difference{change("COMBINED_TYPE_CHANGED", "", "the reader combines with %s where the writer combined with %s", rCriterion, wCriterion)}
		}
		diffs = append(diffs, change("COMBINED_TYPE_EXTENDED", "", "the reader combines with %s where the writer combined with %s", rCriterion, wCriterion))
	}
	// Repeated branches count once, as in Confluent's sets of subschemas.
	wSubs, rSubs = c.distinct(wSubs), c.distinct(rSubs)
	switch {
	case len(wSubs) < len(rSubs) && rCriterion == "allOf":
		diffs = append(diffs, change("PRODUCT_TYPE_EXTENDED", "", "the reader's allOf has more branches (%d) than the writer's (%d)", len(rSubs), len(wSubs)))
	case len(wSubs) < len(rSubs):
		diffs = append(diffs, change("SUM_TYPE_EXTENDED", "", "the reader's %s has more branches (%d) than the writer's (%d)", rCriterion, len(rSubs), len(wSubs)))
	case len(wSubs) > len(rSubs) && wCriterion == "allOf":
		diffs = append(diffs, change("PRODUCT_TYPE_NARROWED", "", "the reader's %s has fewer branches (%d) than the writer's allOf (%d)", rCriterion, len(rSubs), len(wSubs)))
	case len(wSubs) > len(rSubs):
		diffs = append(diffs, change("SUM_TYPE_NARROWED", "", "the reader's %s has fewer branches (%d) than the writer's %s (%d)", rCriterion, len(rSubs), wCriterion, len(wSubs)))
	}
	// edges[i][j] holds the changes when reader branch j reads writer
	// branch i compatibly; nil where it does not.
	edges := make([][][]difference, len(wSubs))
	for i, w := range wSubs {
		edges[i] = make([][]difference, len(rSubs))
		for j, r := range rSubs {
			if d := c.compare(w, r); compatible(d) {
				edges[i][j] = append([]difference{}, d...)
			}
		}
	}
	matchOf := matchBranches(edges, len(rSubs))
	matched := 0
	for j, i := range matchOf {
		if i >= 0 {
			matched++
			diffs = append(diffs, under(fmt.Sprintf("/%s/%d", wCriterion, i), edges[i][j])...)
		}
	}
	if matched < min(len(wSubs), len(rSubs)) {
		diffs = append(diffs, change("COMBINED_TYPE_SUBSCHEMAS_CHANGED", "/"+wCriterion, "only %d of the writer's %s branches are read by distinct branches of the reader's %s", matched, wCriterion, rCriterion))
	}
	return diffs
}

// distinct drops branches equal to an earlier one: no change either way.
func (c *comparer) distinct(subs []*santhosh.Schema) []*santhosh.Schema {
	var kept []*santhosh.Schema
	for _, sub := range subs {
		if !slices.ContainsFunc(kept, func(k *santhosh.Schema) bool {
			return len(c.compare(k, sub)) == 0 && len(c.compare(sub, k)) == 0
		}) {
			kept = append(kept, sub)
		}
	}
	return kept
}

// matchBranches is a maximum bipartite matching (Kuhn's augmenting paths)
// of writer branches to reader branches over the compatible pairs; it
// returns, for each reader branch, its writer branch or -1.
func matchBranches(edges [][][]difference, readers int) []int {
	matchOf := make([]int, readers)
	for j := range matchOf {
		matchOf[j] = -1
	}
	var augment func(i int, seen []bool) bool
	augment = func(i int, seen []bool) bool {
		for j := range readers {
			if edges[i][j] == nil || seen[j] {
				continue
			}
			seen[j] = true
			if matchOf[j] < 0 || augment(matchOf[j], seen) {
				matchOf[j] = i
				return true
			}
		}
		return false
	}
	for i := range edges {
		augment(i, make([]bool, readers))
	}
	return matchOf
}
