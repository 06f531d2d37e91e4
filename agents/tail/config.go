// Package tail is millrace's file tailer: it follows service log files and
// ships every line to the broker through agents/ship, at least once, with a
// stable event id per line so duplicates can be dropped downstream.
//
// Delivery rule (docs/architecture.md §7): a file's checkpoint in the registry is the
// start of its oldest line the broker has not acknowledged, never the read
// position, so a crash or a broker outage loses nothing; lines read again
// after a crash carry the same event_id because the id is derived from the
// file's persisted identity and the line's byte offset.
package tail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// Defaults for Config.
const (
	DefaultKey                = "{host}:{path}"
	DefaultStartPosition      = "beginning"
	DefaultScanFrequency      = 10 * time.Second
	DefaultPollInterval       = 250 * time.Millisecond
	DefaultCloseInactive      = 5 * time.Minute
	DefaultMaxOpenFiles       = 1024
	DefaultMaxLineBytes       = 256 << 10
	DefaultFingerprintBytes   = 1024
	DefaultCheckpointInterval = time.Second
	DefaultForgetAfter        = 24 * time.Hour
	DefaultMultilineMaxLines  = 500
	DefaultMultilineTimeout   = 5 * time.Second
	registryFileName          = "tail-registry.json"
)

// Config configures a Tailer. Zero values mean "the default" (see
// WithDefaults); Validate rejects impossible combinations.
type Config struct {
	// Paths are glob patterns (filepath.Match syntax) of files to follow.
	Paths []string `yaml:"paths"`
	// Exclude are glob patterns matched against a candidate's full path
	// and its base name; a match drops the file (e.g. "*.gz").
	Exclude []string `yaml:"exclude"`
	// Topic receives the records. Required.
	Topic string `yaml:"topic"`
	// DataDir holds the checkpoint registry (tail-registry.json). Required.
	DataDir string `yaml:"data_dir"`
	// Host names this machine in records and keys. Default: os.Hostname.
	Host string `yaml:"host"`
	// Key is the record key template: {host} and {path} are replaced;
	// "none" sends records without a key. Default "{host}:{path}", which
	// keeps one file's lines in one partition, in order.
	Key string `yaml:"key"`
	// Fields are static labels added to every record as "fields".
	Fields map[string]string `yaml:"fields"`
	// StartPosition is where to start in files the registry does not know
	// that exist when the tailer starts: "beginning" (default) or "end".
	// Files that appear later are always read from the beginning, since
	// everything in them was written after the tailer started.
	StartPosition string `yaml:"start_position"`
	// ScanFrequency is how often globs are expanded again, a safety net
	// for file events fsnotify missed. Default 10s.
	ScanFrequency time.Duration `yaml:"scan_frequency"`
	// PollInterval is how often open files are read when no write event
	// arrived. Default 250ms.
	PollInterval time.Duration `yaml:"poll_interval"`
	// CloseInactive closes a file read to its end that produced no new
	// data for this long, releasing its descriptor (it is reopened by
	// identity when it grows, or finished by identity if it was renamed
	// out of the globs meanwhile). Deleted files are released this way
	// too, once read to their end. Default 5m.
	CloseInactive time.Duration `yaml:"close_inactive"`
	// MaxOpenFiles caps descriptors held. Files read to their end are
	// closed first (idle longest first), then files with bytes unread; a
	// closed file is reopened by identity and offset, and finished under
	// its identity if it was renamed meanwhile. A file closed with bytes
	// unread and deleted before it is reopened loses that unread rest:
	// without a descriptor nothing can read a deleted file. Keep the cap
	// above the number of files written at once. Default 1024.
	MaxOpenFiles int `yaml:"max_open_files"`
	// MaxLineBytes caps one line (or one multiline event); the rest is
	// dropped and the record has "truncated": true. Default 256 KiB.
	MaxLineBytes int `yaml:"max_line_bytes"`
	// FingerprintBytes is how many leading bytes identify a file's content
	// beside its device and inode, so a reused inode is not mistaken for
	// the old file. Default 1024.
	FingerprintBytes int `yaml:"fingerprint_bytes"`
	// CheckpointInterval is how often the registry is written when it
	// changed. Default 1s.
	CheckpointInterval time.Duration `yaml:"checkpoint_interval"`
	// ForgetAfter drops registry entries of files not seen for this long.
	// Default 24h.
	ForgetAfter time.Duration `yaml:"forget_after"`
	// Symlinks follows symbolic links the globs match (Filebeat's
	// prospector.scanner.symlinks). Off by default: a link matched by a glob
	// is skipped (logged once per path and counted in
	// millrace_tail_symlinks_skipped_total), and files are opened without
	// following a link at their last path component, so a link planted
	// where a log file was cannot make the tailer ship another file (say
	// one outside the log directory) to the broker. When on, a file is
	// known by its target's device and inode, so a file reached through a
	// link and directly, or through two links, is read once.
	Symlinks bool `yaml:"symlinks"`
	// Multiline joins continuation lines to the line that starts an event.
	Multiline Multiline `yaml:"multiline"`
	// Timestamp takes each line's ts from its text (timestamp.go). Off by
	// default: ts is the time the line was read.
	Timestamp Timestamp `yaml:"timestamp"`
}

// Multiline joins lines into one event: a line matching StartPattern begins
// a new event; any other line continues the current one (Java stack traces).
type Multiline struct {
	// StartPattern is a Go regular expression; empty turns joining off.
	StartPattern string `yaml:"start_pattern"`
	// MaxLines caps lines per event; further lines are dropped and the
	// event is marked truncated. Default 500.
	MaxLines int `yaml:"max_lines"`
	// Timeout sends a pending event after this long without a new line.
	// Default 5s.
	Timeout time.Duration `yaml:"timeout"`
}

// WithDefaults returns c with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.Host == "" {
		if h, err := os.Hostname(); err == nil {
			c.Host = h
		} else {
			c.Host = "localhost"
		}
	}
	if c.Key == "" {
		c.Key = DefaultKey
	}
	if c.StartPosition == "" {
		c.StartPosition = DefaultStartPosition
	}
	if c.ScanFrequency == 0 {
		c.ScanFrequency = DefaultScanFrequency
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.CloseInactive == 0 {
		c.CloseInactive = DefaultCloseInactive
	}
	if c.MaxOpenFiles == 0 {
		c.MaxOpenFiles = DefaultMaxOpenFiles
	}
	if c.MaxLineBytes == 0 {
		c.MaxLineBytes = DefaultMaxLineBytes
	}
	if c.FingerprintBytes == 0 {
		c.FingerprintBytes = DefaultFingerprintBytes
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = DefaultCheckpointInterval
	}
	if c.ForgetAfter == 0 {
		c.ForgetAfter = DefaultForgetAfter
	}
	if c.Multiline.MaxLines == 0 {
		c.Multiline.MaxLines = DefaultMultilineMaxLines
	}
	if c.Multiline.Timeout == 0 {
		c.Multiline.Timeout = DefaultMultilineTimeout
	}
	c.Timestamp = c.Timestamp.withDefaults()
	return c
}

// Validate reports every impossible setting. It expects defaults applied.
func (c Config) Validate() error {
	var errs []error
	if len(c.Paths) == 0 {
		errs = append(errs, errors.New("tail: paths: at least one glob is needed, or there is nothing to follow"))
	}
	for _, p := range append(append([]string(nil), c.Paths...), c.Exclude...) {
		if _, err := filepath.Match(p, ""); err != nil {
			errs = append(errs, fmt.Errorf("tail: pattern %q: %w", p, err))
		}
	}
	if c.Topic == "" {
		errs = append(errs, errors.New("tail: topic: records need a topic"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("tail: data_dir: the checkpoint registry needs a directory"))
	}
	if c.StartPosition != "beginning" && c.StartPosition != "end" {
		errs = append(errs, fmt.Errorf("tail: start_position: %q is not beginning or end", c.StartPosition))
	}
	if c.MaxOpenFiles < 1 {
		errs = append(errs, errors.New("tail: max_open_files: must be at least 1"))
	}
	if c.MaxLineBytes < 16 {
		errs = append(errs, fmt.Errorf("tail: max_line_bytes: %d is too small to hold a line", c.MaxLineBytes))
	}
	if c.FingerprintBytes < 1 {
		errs = append(errs, errors.New("tail: fingerprint_bytes: must be at least 1"))
	}
	for name, d := range map[string]time.Duration{
		"scan_frequency": c.ScanFrequency, "poll_interval": c.PollInterval,
		"close_inactive": c.CloseInactive, "checkpoint_interval": c.CheckpointInterval,
		"forget_after": c.ForgetAfter, "multiline.timeout": c.Multiline.Timeout,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("tail: %s: must not be negative", name))
		}
	}
	if c.Multiline.StartPattern != "" {
		if _, err := regexp.Compile(c.Multiline.StartPattern); err != nil {
			errs = append(errs, fmt.Errorf("tail: multiline.start_pattern: %w", err))
		}
	}
	if c.Multiline.MaxLines < 1 {
		errs = append(errs, errors.New("tail: multiline.max_lines: must be at least 1"))
	}
	if err := c.Timestamp.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
