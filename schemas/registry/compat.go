package registry

import (
	"fmt"

	"millrace/schemas/format"
)

// Confluent's compatibility levels. BACKWARD: a reader of the new schema
// reads what the latest wrote; FORWARD: a reader of the latest reads what
// the new one writes; FULL: both. The _TRANSITIVE levels check against
// every live version instead of the latest; NONE checks nothing.
const (
	LevelBackward           = "BACKWARD"
	LevelBackwardTransitive = "BACKWARD_TRANSITIVE"
	LevelForward            = "FORWARD"
	LevelForwardTransitive  = "FORWARD_TRANSITIVE"
	LevelFull               = "FULL"
	LevelFullTransitive     = "FULL_TRANSITIVE"
	LevelNone               = "NONE"
)

// Confluent's modes: READWRITE takes registrations, READONLY refuses
// every write, IMPORT takes schemas with their IDs and versions as given
// (to copy another registry) and checks no compatibility.
const (
	ModeReadWrite = "READWRITE"
	ModeReadOnly  = "READONLY"
	ModeImport    = "IMPORT"
)

func validLevel(level string) bool {
	switch level {
	case LevelBackward, LevelBackwardTransitive, LevelForward, LevelForwardTransitive, LevelFull, LevelFullTransitive, LevelNone:
		return true
	}
	return false
}

func validMode(mode string) bool {
	return mode == ModeReadWrite || mode == ModeReadOnly || mode == ModeImport
}

// checkCompat checks candidate against previous (oldest first) at level,
// and returns the verbose messages of every problem (none when
// compatible). The non-transitive levels look at the last of previous
// only, as Confluent's checker does.
func checkCompat(level string, candidate format.Schema, previous []format.Schema) []string {
	if level == LevelNone || len(previous) == 0 {
		return nil
	}
	var backward, forward, transitive bool
	switch level {
	case LevelBackward:
		backward = true
	case LevelBackwardTransitive:
		backward, transitive = true, true
	case LevelForward:
		forward = true
	case LevelForwardTransitive:
		forward, transitive = true, true
	case LevelFull:
		backward, forward = true, true
	case LevelFullTransitive:
		backward, forward, transitive = true, true, true
	}
	if !transitive {
		previous = previous[len(previous)-1:]
	}
	var messages []string
	// Newest first, as Confluent reports: the latest is the one a user
	// most likely meant to evolve from.
	for i := len(previous) - 1; i >= 0; i-- {
		old := previous[i]
		if old.Type().Name() != candidate.Type().Name() {
			messages = append(messages, fmt.Sprintf("Incompatible because of different schema type: the new schema is %s, an earlier one is %s.", candidate.Type().Name(), old.Type().Name()))
			continue
		}
		if backward {
			for _, in := range candidate.ReadsFrom(old) {
				messages = append(messages, in.String())
			}
		}
		if forward {
			for _, in := range old.ReadsFrom(candidate) {
				messages = append(messages, in.String())
			}
		}
	}
	return messages
}
