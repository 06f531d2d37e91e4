package otlp

import (
	"fmt"

	"millrace/internal/jsondepth"
)

// maxJSONDepth bounds a JSON body's nesting: an AnyValue kvlist nests
// four JSON levels a level ({"kvlistValue":{"values":[{"value":{...), so
// this allows what pdata's protobuf decoder allows (100 nested messages)
// with room for the envelope.
const maxJSONDepth = 410

// checkJSONDepth refuses a body nested deeper than limit objects and
// arrays, so a body of a few megabytes of brackets cannot make the decoder
// recurse millions deep.
func checkJSONDepth(b []byte, limit int) error {
	if _, deeper := jsondepth.Exceeds(b, limit); deeper {
		return fmt.Errorf("the JSON body nests deeper than %d levels", limit)
	}
	return nil
}
