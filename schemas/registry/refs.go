package registry

import (
	"fmt"
	"strings"
)

// maxReferences bounds how many schemas one registration may pull in,
// directly and transitively, so a hostile chain costs a bounded amount of
// work; Limits.MaxBytes bounds their total text.
const maxReferences = 1000

// resolve turns references into the texts Parse needs: every schema
// reached from refs, directly or through the references of those, keyed by
// reference name. A version that does not exist, a cycle, a name used for
// two different schemas, or more than maxReferences schemas or
// Limits.MaxBytes of text is refused with a sentence saying which.
func (st *State) resolve(refs []Reference) (map[string]string, error) {
	r := resolver{st: st, texts: map[string]string{}, done: map[subjectVersion]bool{}}
	for _, ref := range refs {
		if err := r.visit(ref, nil); err != nil {
			return nil, err
		}
	}
	return r.texts, nil
}

type resolver struct {
	st    *State
	texts map[string]string
	done  map[subjectVersion]bool // versions fully visited
	bytes int
}

// visit adds ref and what it references; path is the chain of versions
// being visited, for cycle detection.
func (r *resolver) visit(ref Reference, path []subjectVersion) error {
	if ref.Name == "" || ref.Subject == "" {
		return fmt.Errorf("a reference needs a name and a subject; got name %q, subject %q", ref.Name, ref.Subject)
	}
	at := subjectVersion{ref.Subject, ref.Version}
	for i, p := range path {
		if p == at {
			return fmt.Errorf("the references form a cycle: %s", cycleString(append(path[i:], at)))
		}
	}
	e, err := r.st.versionSchema(ref.Subject, ref.Version)
	if err != nil {
		return err
	}
	if prev, ok := r.texts[ref.Name]; ok && prev != e.text {
		return fmt.Errorf("the reference name %q names two different schemas", ref.Name)
	}
	if r.done[at] {
		return nil
	}
	if len(r.done) >= maxReferences {
		return fmt.Errorf("the schema references more than %d schemas", maxReferences)
	}
	r.bytes += len(e.text)
	if r.bytes > r.st.limits.MaxBytes {
		return fmt.Errorf("the referenced schemas exceed %d bytes in total", r.st.limits.MaxBytes)
	}
	r.texts[ref.Name] = e.text
	for _, next := range e.refs {
		if err := r.visit(next, append(path, at)); err != nil {
			return err
		}
	}
	r.done[at] = true
	return nil
}

// versionSchema returns the schema of a subject version, soft-deleted or
// not: a soft-deleted version stays resolvable for those referencing it.
func (st *State) versionSchema(subject string, version int) (*schemaEntry, error) {
	sub, ok := st.subjects[subject]
	if !ok {
		return nil, fmt.Errorf("the referenced subject %q does not exist", subject)
	}
	i, ok := sub.find(version)
	if !ok {
		return nil, fmt.Errorf("the referenced subject %q has no version %d", subject, version)
	}
	return st.schemas[sub.versions[i].id], nil
}

func cycleString(path []subjectVersion) string {
	parts := make([]string, len(path))
	for i, p := range path {
		parts[i] = fmt.Sprintf("%s version %d", p.subject, p.version)
	}
	return strings.Join(parts, " → ")
}
