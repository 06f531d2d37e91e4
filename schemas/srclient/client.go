// Package srclient is how millrace's sinks, the beacon and the CLI talk to a
// Confluent-compatible schema registry (millrace's own, schemas/registry, or
// any other): franz-go's sr client for the REST API and its ConfluentHeader
// for the wire framing, plus what sr leaves to its users: a bounded cache
// from schema ID to a parsed format.Schema (with its references fetched
// transitively), Decode and Encode of Confluent-framed values with the
// schema languages of schemas/format, and errors classified so a consumer
// can tell a record to dead-letter from a registry to wait for.
//
// It never imports the server (schemas/registry): everything goes over
// HTTP, as it would to Confluent's registry or Karapace.
package srclient

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"millrace/internal/clientauth"
	"millrace/schemas/format"
	"millrace/schemas/format/languages"
)

// Defaults for Config.
const (
	DefaultURL              = "http://127.0.0.1:8081"
	DefaultTimeout          = 10 * time.Second
	DefaultCacheSize        = 1000
	DefaultRefresh          = time.Minute
	DefaultMaxResponseBytes = 64 << 20
)

// Config says how to reach a registry. The zero value is the registry of
// `millrace up` on this machine, without TLS or authentication.
type Config struct {
	// URLs are the registry's base URLs, tried in order on transport
	// errors. Default [http://127.0.0.1:8081].
	URLs []string `yaml:"urls"`
	// Username and Password are HTTP basic auth credentials; PasswordFile
	// names a file holding the password instead (its trailing newline
	// ignored). Default: none.
	Username     string `yaml:"username"`
	Password     string `yaml:"password"`
	PasswordFile string `yaml:"password_file"`
	// TLS verifies an https registry against a CA (ca) and presents a
	// client certificate (cert, key), as the Kafka clients' tls: does.
	// Default: the system's roots, no client certificate.
	TLS *clientauth.TLS `yaml:"tls"`
	// Timeout bounds one HTTP request. Default 10s.
	Timeout time.Duration `yaml:"timeout"`
	// CacheSize bounds the parsed schemas kept by ID. Default 1000.
	CacheSize int `yaml:"cache_size"`
	// Refresh is how long a subject's latest version is used before it is
	// asked again, so a new version applies without a restart. Default 1m.
	Refresh time.Duration `yaml:"refresh"`
	// MaxResponseBytes bounds what one answer may hold, so a wrong URL
	// cannot make the client read without end. Default 64 MiB.
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// Types are the schema languages, by schemaType. Default: AVRO,
	// PROTOBUF and JSON.
	Types map[string]format.Type `yaml:"-"`
	// Limits bound parsing one schema. Default format.DefaultLimits.
	Limits format.Limits `yaml:"-"`
}

// WithDefaults returns c with every unset field at its default.
func (c Config) WithDefaults() Config {
	if len(c.URLs) == 0 {
		c.URLs = []string{DefaultURL}
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.CacheSize == 0 {
		c.CacheSize = DefaultCacheSize
	}
	if c.Refresh == 0 {
		c.Refresh = DefaultRefresh
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.Types == nil {
		c.Types = languages.All()
	}
	if c.Limits == (format.Limits{}) {
		c.Limits = format.DefaultLimits
	}
	return c
}

// Validate reports settings that cannot work, each in a sentence saying
// why. It expects defaults applied.
func (c Config) Validate() error {
	var errs []error
	for _, u := range c.URLs {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			errs = append(errs, fmt.Errorf("schema registry: url %q must begin with http:// or https://", u))
		}
	}
	if c.Password != "" && c.PasswordFile != "" {
		errs = append(errs, errors.New("schema registry: set one of password and password_file, not both"))
	}
	if (c.Password != "" || c.PasswordFile != "") && c.Username == "" {
		errs = append(errs, errors.New("schema registry: a password needs a username"))
	}
	if c.TLS != nil && c.TLS.Key != "" && c.TLS.Cert == "" {
		errs = append(errs, errors.New("schema registry: tls: key is set without cert"))
	}
	if c.Timeout < 0 || c.Refresh < 0 {
		errs = append(errs, errors.New("schema registry: timeout and refresh must not be negative"))
	}
	if c.CacheSize < 1 {
		errs = append(errs, errors.New("schema registry: cache_size must be at least 1"))
	}
	if c.MaxResponseBytes < 1<<20 {
		errs = append(errs, errors.New("schema registry: max_response_bytes must be at least 1 MiB, the size of one schema"))
	}
	return errors.Join(errs...)
}

// Client is a registry client with a cache of parsed schemas. It is safe
// for concurrent use and starts no goroutine.
type Client struct {
	cfg Config
	api *sr.Client

	mu       sync.Mutex // guards the following
	byID     *lru
	inFlight map[int]*fetch          // IDs being fetched, so concurrent Decodes fetch once
	latest   map[string]*latestEntry // subject → its latest version, for Encode and Latest
	// unknown holds the IDs the registry answered 404 for, with when, so
	// a topic full of records with a wrong ID asks the registry once per
	// Refresh rather than once per record. At most CacheSize entries.
	unknown map[int]time.Time
}

// New checks cfg (after defaults), reads the password file and the TLS
// files, and returns a client. It sends nothing.
func New(cfg Config) (*Client, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.TLS != nil {
		tlsConfig, err := cfg.TLS.Config()
		if err != nil {
			return nil, fmt.Errorf("schema registry: %w", err)
		}
		transport.TLSClientConfig = tlsConfig
	}
	opts := []sr.ClientOpt{
		sr.URLs(cfg.URLs...),
		sr.UserAgent("millrace"),
		sr.HTTPClient(&http.Client{Timeout: cfg.Timeout, Transport: limitedTransport{transport, cfg.MaxResponseBytes}}),
	}
	if cfg.Username != "" {
		password := cfg.Password
		if cfg.PasswordFile != "" {
			b, err := os.ReadFile(cfg.PasswordFile)
			if err != nil {
				return nil, fmt.Errorf("schema registry: reading the password file: %w", err)
			}
			password = strings.TrimRight(string(b), "\r\n")
		}
		opts = append(opts, sr.BasicAuth(cfg.Username, password))
	}
	api, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("schema registry: %w", err)
	}
	return &Client{
		cfg:      cfg,
		api:      api,
		byID:     newLRU(cfg.CacheSize),
		inFlight: map[int]*fetch{},
		latest:   map[string]*latestEntry{},
		unknown:  map[int]time.Time{},
	}, nil
}

// API is the franz-go client underneath, for the registry's whole REST
// API (subjects, versions, config, mode, compatibility).
func (c *Client) API() *sr.Client { return c.api }

// URL is the first registry URL, for messages.
func (c *Client) URL() string { return c.cfg.URLs[0] }

// limitedTransport cuts every answer at max bytes: past it the body reads
// as an error rather than filling memory.
type limitedTransport struct {
	base http.RoundTripper
	max  int64
}

func (t limitedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: t.max}
	return resp, nil
}

// limitedBody reads at most left bytes, then fails.
type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// At the bound: only the end of the body may follow.
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, errors.New("the registry's answer exceeds max_response_bytes")
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
