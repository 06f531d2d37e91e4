package registry

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"millrace/schemas/format"
)

// State is the registry's view of the `_schemas` topic: subjects and their
// versions, schemas by ID, compatibility levels and modes. It is a pure
// function of the records applied in order (no I/O, no clock), so the same
// log gives the same view on every registry and a sequence of records can
// be golden-tested. It is not safe for concurrent use; Server guards it.
type State struct {
	parse  ParseFunc
	limits format.Limits
	logger *slog.Logger

	next  int64 // offset of the next record to apply
	maxID int   // highest schema ID seen: IDs are never given out twice

	schemas      map[int]*schemaEntry
	byCanonical  map[string]int // identity key (type, references, canonical text) → ID
	byNormalized map[string]int // the same with Confluent's normalize
	subjects     map[string]*subjectEntry
	// uses counts the versions (soft-deleted too) holding each ID: an ID
	// no version holds any more answers 404, though it is never given to
	// another schema.
	uses map[int]int
	// referrers maps a subject version to the versions whose schemas
	// reference it, for `referencedby` and the delete check.
	referrers map[subjectVersion]map[subjectVersion]struct{}

	compat string // global compatibility level; "" is the default, BACKWARD
	mode   string // global mode; "" is the default, READWRITE
}

// ParseFunc parses a schema of schemaType with the texts of everything it
// references, by reference name.
type ParseFunc func(schemaType, text string, refs map[string]string) (format.Schema, error)

// schemaEntry is one schema ID.
type schemaEntry struct {
	id         int
	schemaType string // always spelled out; AVRO when the record omits it
	text       string
	refs       []Reference
	parsed     format.Schema // nil when it could not be parsed here
}

// subjectEntry is one subject: its versions in order, and its own
// compatibility level and mode ("" when not set).
type subjectEntry struct {
	versions []versionEntry
	compat   string
	mode     string
}

type versionEntry struct {
	version int
	id      int
	deleted bool
}

type subjectVersion struct {
	subject string
	version int
}

// NewState returns an empty view. parse may be nil: schemas are then known
// by their text alone (as in tests of the record rules).
func NewState(parse ParseFunc, limits format.Limits, logger *slog.Logger) *State {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if limits == (format.Limits{}) {
		limits = format.DefaultLimits
	}
	return &State{
		parse:        parse,
		limits:       limits,
		logger:       logger,
		schemas:      map[int]*schemaEntry{},
		byCanonical:  map[string]int{},
		byNormalized: map[string]int{},
		subjects:     map[string]*subjectEntry{},
		uses:         map[int]int{},
		referrers:    map[subjectVersion]map[subjectVersion]struct{}{},
	}
}

// Next is the offset of the next record the view will apply: every record
// before it is in the view.
func (st *State) Next() int64 { return st.next }

// Apply applies one record. A record that does not parse is skipped with a
// log line: one bad record (written by a newer registry, or damaged) must
// not stop every registry's view.
func (st *State) Apply(rec Record) {
	if rec.Offset >= st.next {
		st.next = rec.Offset + 1
	}
	if rec.Key == nil {
		return // a placeholder for an offset holding no record (see Log.Read)
	}
	var key recordKey
	if err := json.Unmarshal(rec.Key, &key); err != nil {
		st.skip(rec, "its key is not JSON: "+err.Error())
		return
	}
	var err error
	switch key.KeyType {
	case keySchema:
		err = st.applySchema(key, rec.Value)
	case keyConfig:
		err = st.applyConfig(key, rec.Value)
	case keyMode:
		err = st.applyMode(key, rec.Value)
	case keyDeleteSubject:
		err = st.applyDeleteSubject(key, rec.Value)
	case keyClearSubject:
		err = st.applyClearSubject(key, rec.Value)
	case keyNoop:
	default:
		st.skip(rec, "its keytype "+key.KeyType+" is unknown")
		return
	}
	if err != nil {
		st.skip(rec, err.Error())
	}
}

func (st *State) skip(rec Record, why string) {
	st.logger.Warn("skipped a _schemas record", "offset", rec.Offset, "reason", why)
}

func (st *State) applySchema(key recordKey, value []byte) error {
	subject := key.subject()
	if value == nil {
		st.removeVersion(subject, key.Version)
		return nil
	}
	var v schemaValue
	if err := json.Unmarshal(value, &v); err != nil {
		return fmt.Errorf("its value is not a schema: %v", err)
	}
	if v.ID <= 0 || v.Version <= 0 || v.Subject == "" {
		return fmt.Errorf("its subject %q, version %d or id %d is not valid", v.Subject, v.Version, v.ID)
	}
	if v.SchemaType == "" {
		v.SchemaType = format.Avro
	}
	if e, ok := st.schemas[v.ID]; ok {
		if e.schemaType != v.SchemaType || e.text != v.Schema || !slices.Equal(e.refs, v.References) {
			return fmt.Errorf("id %d is already another schema's", v.ID)
		}
	} else {
		st.addSchema(v)
	}
	st.maxID = max(st.maxID, v.ID)
	sub := st.subject(v.Subject)
	i, found := sub.find(v.Version)
	if found {
		st.unlinkReferences(subjectVersion{v.Subject, v.Version}, sub.versions[i].id)
		st.uses[sub.versions[i].id]--
		sub.versions[i] = versionEntry{version: v.Version, id: v.ID, deleted: v.Deleted}
	} else {
		sub.versions = slices.Insert(sub.versions, i, versionEntry{version: v.Version, id: v.ID, deleted: v.Deleted})
	}
	st.uses[v.ID]++
	from := subjectVersion{v.Subject, v.Version}
	for _, r := range v.References {
		to := subjectVersion{r.Subject, r.Version}
		if st.referrers[to] == nil {
			st.referrers[to] = map[subjectVersion]struct{}{}
		}
		st.referrers[to][from] = struct{}{}
	}
	return nil
}

// addSchema records a new ID, parsed when it can be so the identity of
// later registrations is by canonical form.
func (st *State) addSchema(v schemaValue) {
	e := &schemaEntry{id: v.ID, schemaType: v.SchemaType, text: v.Schema, refs: v.References}
	st.schemas[v.ID] = e
	canonical, normalized := v.Schema, v.Schema
	if st.parse != nil {
		refs, err := st.resolve(v.References)
		if err == nil {
			e.parsed, err = st.parse(v.SchemaType, v.Schema, refs)
		}
		if err != nil {
			st.logger.Warn("a schema in _schemas does not parse here; it is known by its text", "id", v.ID, "reason", err)
		} else {
			canonical, normalized = e.parsed.Canonical(false), e.parsed.Canonical(true)
		}
	}
	if _, ok := st.byCanonical[identity(v.SchemaType, v.References, canonical)]; !ok {
		st.byCanonical[identity(v.SchemaType, v.References, canonical)] = v.ID
	}
	if _, ok := st.byNormalized[identity(v.SchemaType, v.References, normalized)]; !ok {
		st.byNormalized[identity(v.SchemaType, v.References, normalized)] = v.ID
	}
}

// identity is the key two registrations are the same schema by: the same
// type, the same references and the same canonical text.
func identity(schemaType string, refs []Reference, canonical string) string {
	var b strings.Builder
	b.WriteString(schemaType)
	b.WriteByte(0)
	b.Write(mustJSON(refs))
	b.WriteByte(0)
	b.WriteString(canonical)
	return b.String()
}

func (st *State) removeVersion(subject string, version int) {
	sub, ok := st.subjects[subject]
	if !ok {
		return
	}
	i, found := sub.find(version)
	if !found {
		return
	}
	st.unlinkReferences(subjectVersion{subject, version}, sub.versions[i].id)
	st.uses[sub.versions[i].id]--
	sub.versions = slices.Delete(sub.versions, i, i+1)
	st.dropIfEmpty(subject)
}

// unlinkReferences forgets that the version from referenced what the
// schema id references.
func (st *State) unlinkReferences(from subjectVersion, id int) {
	e, ok := st.schemas[id]
	if !ok {
		return
	}
	for _, r := range e.refs {
		to := subjectVersion{r.Subject, r.Version}
		delete(st.referrers[to], from)
		if len(st.referrers[to]) == 0 {
			delete(st.referrers, to)
		}
	}
}

// dropIfEmpty forgets a subject left with no version and no setting.
func (st *State) dropIfEmpty(subject string) {
	if sub := st.subjects[subject]; sub != nil && len(sub.versions) == 0 && sub.compat == "" && sub.mode == "" {
		delete(st.subjects, subject)
	}
}

func (st *State) applyConfig(key recordKey, value []byte) error {
	level := ""
	if value != nil {
		var v configValue
		if err := json.Unmarshal(value, &v); err != nil {
			return fmt.Errorf("its value is not a compatibility config: %v", err)
		}
		if !validLevel(v.CompatibilityLevel) {
			return fmt.Errorf("compatibility level %q is unknown", v.CompatibilityLevel)
		}
		level = v.CompatibilityLevel
	}
	if key.Subject == nil {
		st.compat = level
		return nil
	}
	st.subject(*key.Subject).compat = level
	st.dropIfEmpty(*key.Subject)
	return nil
}

func (st *State) applyMode(key recordKey, value []byte) error {
	mode := ""
	if value != nil {
		var v modeValue
		if err := json.Unmarshal(value, &v); err != nil {
			return fmt.Errorf("its value is not a mode: %v", err)
		}
		if !validMode(v.Mode) {
			return fmt.Errorf("mode %q is unknown", v.Mode)
		}
		mode = v.Mode
	}
	if key.Subject == nil {
		st.mode = mode
		return nil
	}
	st.subject(*key.Subject).mode = mode
	st.dropIfEmpty(*key.Subject)
	return nil
}

func (st *State) applyDeleteSubject(key recordKey, value []byte) error {
	if value == nil {
		return nil
	}
	var v deleteSubjectValue
	if err := json.Unmarshal(value, &v); err != nil {
		return fmt.Errorf("its value is not a subject deletion: %v", err)
	}
	sub, ok := st.subjects[v.Subject]
	if !ok {
		return nil
	}
	for i := range sub.versions {
		if sub.versions[i].version <= v.Version {
			sub.versions[i].deleted = true
		}
	}
	return nil
}

func (st *State) applyClearSubject(key recordKey, value []byte) error {
	if value == nil {
		return nil
	}
	var v clearSubjectValue
	if err := json.Unmarshal(value, &v); err != nil {
		return fmt.Errorf("its value is not a subject clearing: %v", err)
	}
	sub, ok := st.subjects[v.Subject]
	if !ok {
		return nil
	}
	for _, ve := range slices.Clone(sub.versions) {
		if ve.deleted {
			st.removeVersion(v.Subject, ve.version)
		}
	}
	return nil
}

func (st *State) subject(name string) *subjectEntry {
	sub, ok := st.subjects[name]
	if !ok {
		sub = &subjectEntry{}
		st.subjects[name] = sub
	}
	return sub
}

// find returns where version is or would be in the ordered versions.
func (sub *subjectEntry) find(version int) (int, bool) {
	return slices.BinarySearchFunc(sub.versions, version, func(v versionEntry, n int) int { return v.version - n })
}

// live returns the versions not soft-deleted, or all with deleted.
func (sub *subjectEntry) live(deleted bool) []versionEntry {
	var out []versionEntry
	for _, v := range sub.versions {
		if deleted || !v.deleted {
			out = append(out, v)
		}
	}
	return out
}

// subjectNames returns the subjects with a version (a live one unless
// deleted; only deleted ones with deletedOnly), in order.
func (st *State) subjectNames(prefix string, deleted, deletedOnly bool) []string {
	out := []string{}
	for name, sub := range st.subjects {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		hasLive := len(sub.live(false)) > 0
		hasDeleted := len(sub.live(true)) > len(sub.live(false))
		if (deletedOnly && hasDeleted) || (!deletedOnly && (hasLive || deleted && hasDeleted)) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// lookup returns the ID of a schema of identical identity, if any.
func (st *State) lookup(schemaType string, refs []Reference, parsed format.Schema, normalize bool) (int, bool) {
	if normalize {
		id, ok := st.byNormalized[identity(schemaType, refs, parsed.Canonical(true))]
		return id, ok
	}
	id, ok := st.byCanonical[identity(schemaType, refs, parsed.Canonical(false))]
	return id, ok
}

// referencedBy returns the IDs of the versions (live ones unless all)
// whose schemas reference subject's version, in order.
func (st *State) referencedBy(subject string, version int, all bool) []int {
	ids := []int{}
	for from := range st.referrers[subjectVersion{subject, version}] {
		sub := st.subjects[from.subject]
		if sub == nil {
			continue
		}
		if i, ok := sub.find(from.version); ok && (all || !sub.versions[i].deleted) {
			ids = append(ids, sub.versions[i].id)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// effectiveCompat is the level that applies to subject: its own, else the
// global one, else BACKWARD.
func (st *State) effectiveCompat(subject string) string {
	if sub := st.subjects[subject]; sub != nil && sub.compat != "" {
		return sub.compat
	}
	if st.compat != "" {
		return st.compat
	}
	return LevelBackward
}

// effectiveMode is the mode that applies to subject: its own, else the
// global one, else READWRITE.
func (st *State) effectiveMode(subject string) string {
	if sub := st.subjects[subject]; sub != nil && sub.mode != "" {
		return sub.mode
	}
	if st.mode != "" {
		return st.mode
	}
	return ModeReadWrite
}
