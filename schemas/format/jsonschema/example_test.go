package jsonschema_test

import (
	"fmt"

	"millrace/schemas/format"
	"millrace/schemas/format/jsonschema"
)

// A reader that adds a constrained property to an open content model cannot
// read what the writer wrote: the writer's values may have that member with
// any value.
func Example_readsFrom() {
	writer, err := jsonschema.Type.Parse(`{"type":"object","properties":{"a":{"type":"string"}}}`, nil, format.DefaultLimits)
	if err != nil {
		panic(err)
	}
	reader, err := jsonschema.Type.Parse(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}}`, nil, format.DefaultLimits)
	if err != nil {
		panic(err)
	}
	for _, incompat := range reader.ReadsFrom(writer) {
		fmt.Println(incompat)
	}
	// Output:
	// {errorType:'PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL', description:'the reader adds "b", which the writer's open content model let have any value', path:'#/properties/b'}
}
