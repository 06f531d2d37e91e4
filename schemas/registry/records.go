package registry

import (
	"encoding/json"
	"fmt"
)

// The `_schemas` topic holds Confluent's records, so a topic written by
// Confluent's Schema Registry (or Karapace) can be served by millrace and
// back. Keys are JSON objects with a "keytype":
//
//	SCHEMA          {"keytype":"SCHEMA","subject":"s","version":1,"magic":1}
//	                value {"subject","version","id","schemaType" (absent for
//	                AVRO),"schema","references":[{"name","subject","version"}],
//	                "deleted":bool}; a nil value (tombstone) removes the
//	                version for good (permanent delete).
//	CONFIG          {"keytype":"CONFIG","subject":"s" or null,"magic":0}
//	                value {"compatibilityLevel":"BACKWARD"}; nil removes it.
//	MODE            {"keytype":"MODE","subject":"s" or null,"magic":0}
//	                value {"mode":"READWRITE|READONLY|IMPORT"}; nil removes it.
//	DELETE_SUBJECT  {"keytype":"DELETE_SUBJECT","subject":"s","magic":0}
//	                value {"subject":"s","version":N}: versions up to N are
//	                soft-deleted.
//	CLEAR_SUBJECT   {"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}
//	                value {"subject":"s"}: soft-deleted versions are removed.
//	NOOP            {"keytype":"NOOP","magic":0}: written by a new primary to
//	                learn the end of the log; changes nothing.
const (
	keySchema        = "SCHEMA"
	keyConfig        = "CONFIG"
	keyMode          = "MODE"
	keyDeleteSubject = "DELETE_SUBJECT"
	keyClearSubject  = "CLEAR_SUBJECT"
	keyNoop          = "NOOP"
)

// Reference is one schema a schema refers to: the name the referring text
// uses for it, and the subject and version holding it.
type Reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// recordKey is a record's key; Subject is nil for the global CONFIG and
// MODE records.
type recordKey struct {
	KeyType string  `json:"keytype"`
	Subject *string `json:"subject,omitempty"`
	Version int     `json:"version,omitempty"`
	Magic   int     `json:"magic"`
}

// schemaValue is a SCHEMA record's value.
type schemaValue struct {
	Subject    string      `json:"subject"`
	Version    int         `json:"version"`
	ID         int         `json:"id"`
	SchemaType string      `json:"schemaType,omitempty"`
	Schema     string      `json:"schema"`
	References []Reference `json:"references,omitempty"`
	Deleted    bool        `json:"deleted"`
}

type configValue struct {
	CompatibilityLevel string `json:"compatibilityLevel"`
}

type modeValue struct {
	Mode string `json:"mode"`
}

type deleteSubjectValue struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

type clearSubjectValue struct {
	Subject string `json:"subject"`
}

// subjectKey returns a key's subject, "" for a global key.
func (k recordKey) subject() string {
	if k.Subject == nil {
		return ""
	}
	return *k.Subject
}

// scopeKey returns the CONFIG or MODE key for subject ("" is global:
// Confluent writes a null subject).
func scopeKey(keyType, subject string) []byte {
	k := recordKey{KeyType: keyType}
	if subject != "" {
		k.Subject = &subject
	}
	return mustJSON(k)
}

func schemaKey(subject string, version int) []byte {
	return mustJSON(recordKey{KeyType: keySchema, Subject: &subject, Version: version, Magic: 1})
}

func deleteSubjectRecord(subject string, version int) Record {
	return Record{
		Key:   mustJSON(recordKey{KeyType: keyDeleteSubject, Subject: &subject}),
		Value: mustJSON(deleteSubjectValue{Subject: subject, Version: version}),
	}
}

func schemaRecord(v schemaValue) Record {
	return Record{Key: schemaKey(v.Subject, v.Version), Value: mustJSON(v)}
}

// mustJSON encodes values built here from plain fields, which cannot fail.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("registry: encoding a record of plain fields: %v", err))
	}
	return b
}
