package protobuf

// builtinImports are the files Confluent's registry lets every Protobuf
// schema import without a reference, beyond google/protobuf/*.proto: its
// metadata options (field tags such as "PII", docs, parameters, used by
// data contracts) and its decimal type. A reference of the same name takes
// their place.
var builtinImports = map[string]string{
	"confluent/meta.proto": `syntax = "proto3";
package confluent;
import "google/protobuf/descriptor.proto";
option go_package = "../confluent";
option java_package = "io.confluent.protobuf";
option java_outer_classname = "MetaProto";

message Meta {
  string doc = 1;
  map<string, string> params = 2;
  repeated string tags = 3;
}

extend google.protobuf.FileOptions { Meta file_meta = 1088; }
extend google.protobuf.MessageOptions { Meta message_meta = 1088; }
extend google.protobuf.FieldOptions { Meta field_meta = 1088; }
extend google.protobuf.EnumOptions { Meta enum_meta = 1088; }
extend google.protobuf.EnumValueOptions { Meta enum_value_meta = 1088; }
`,
	"confluent/type/decimal.proto": `syntax = "proto3";
package confluent.type;
option go_package = "../type";
option java_package = "io.confluent.protobuf.type";
option java_outer_classname = "DecimalProto";

message Decimal {
  // The two's-complement big-endian unscaled value.
  bytes value = 1;
  uint32 precision = 2;
  int32 scale = 3;
}
`,
}
