package cluster

import "fmt"

// MaxTopicNameLength is Kafka's limit: 249 characters, so that the partition
// directory name "<topic>-<partition>" (plus a deletion suffix) fits in the 255
// bytes most filesystems allow.
const MaxTopicNameLength = 249

// ValidateTopicName applies Kafka's topic naming rules: 1 to 249 characters of
// [a-zA-Z0-9._-], and not "." or ".." (they would name the data directory or
// its parent). The error wraps ErrInvalidTopic.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the name is empty", ErrInvalidTopic)
	case name == "." || name == "..":
		return fmt.Errorf("%w: %q is not allowed", ErrInvalidTopic, name)
	case len(name) > MaxTopicNameLength:
		return fmt.Errorf("%w: the name is %d characters long, the limit is %d", ErrInvalidTopic, len(name), MaxTopicNameLength)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		legal := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !legal {
			return fmt.Errorf("%w: %q contains a character other than ASCII letters, digits, '.', '_' and '-'", ErrInvalidTopic, name)
		}
	}
	return nil
}
