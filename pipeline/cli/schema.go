package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/sr"

	"millrace/schemas/format"
	"millrace/schemas/srclient"
)

// The schema commands speak Confluent's Schema Registry REST API, to
// millrace's registry or any other, through schemas/srclient; they make no
// Kafka client. Import is in schema_import.go.
func init() {
	addCommand("schema", schemaRegisterCommand)
	addCommand("schema", schemaGetCommand)
	addCommand("schema", schemaListCommand)
	addCommand("schema", schemaDeleteCommand)
	addCommand("schema", schemaCompatCommand)
	addCommand("schema", schemaConfigCommand)
	addCommand("schema", schemaModeCommand)
}

// schemaFile is a schema read from --file with its --type and
// --reference flags.
type schemaFile struct {
	path, typ  string
	references []string
}

func addSchemaFileFlags(cmd *cobra.Command, s *schemaFile) {
	f := cmd.Flags()
	f.StringVar(&s.path, "file", "", "`file` holding the schema text (- for standard input)")
	f.StringVar(&s.typ, "type", "", "AVRO, PROTOBUF or JSON (default: PROTOBUF for a .proto file, else AVRO)")
	f.StringArrayVar(&s.references, "reference", nil, "a referenced schema as `name=subject:version` (repeatable)")
}

// read returns the schema to send.
func (s schemaFile) read(e *env) (sr.Schema, error) {
	if s.path == "" {
		return sr.Schema{}, usageError("--file is required")
	}
	var text []byte
	var err error
	if s.path == "-" {
		text, err = readAllLimited(e.stdin, format.DefaultLimits.MaxBytes)
	} else {
		text, err = os.ReadFile(s.path)
	}
	if err != nil {
		return sr.Schema{}, err
	}
	typ := strings.ToUpper(s.typ)
	if typ == "" && filepath.Ext(s.path) == ".proto" {
		typ = format.Protobuf
	}
	var out sr.Schema
	if err := out.Type.UnmarshalText([]byte(typ)); err != nil {
		return sr.Schema{}, usageError("--type must be AVRO, PROTOBUF or JSON, not %q", s.typ)
	}
	out.Schema = string(text)
	for _, r := range s.references {
		name, target, ok1 := strings.Cut(r, "=")
		subject, version, ok2 := strings.Cut(target, ":")
		n, err := strconv.Atoi(version)
		if !ok1 || !ok2 || name == "" || subject == "" || err != nil || n < 1 {
			return sr.Schema{}, usageError("--reference %q is not name=subject:version (a version number from 1)", r)
		}
		out.References = append(out.References, sr.SchemaReference{Name: name, Subject: subject, Version: n})
	}
	return out, nil
}

func schemaRegisterCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:         "register SUBJECT --file F [--type AVRO|PROTOBUF|JSON] [--reference name=subject:version ...] [--normalize]",
		Short:       "register a schema under a subject (or find it there) and print its version and ID",
		Args:        exactArgs(1),
		Annotations: noClient,
	}
	reg := addRegistryFlags(cmd.Flags())
	var file schemaFile
	addSchemaFileFlags(cmd, &file)
	normalize := cmd.Flags().Bool("normalize", false, "compare and store the schema's normalized form")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		s, err := file.read(e)
		if err != nil {
			return err
		}
		c, err := reg.client()
		if err != nil {
			return err
		}
		got, err := c.Register(cmd.Context(), args[0], srclient.Registration{
			Text: s.Schema, Type: s.Type.String(), References: s.References, Normalize: *normalize})
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "subject %s version %d id %d\n", got.Subject, got.Version, got.ID)
		return nil
	}
	return cmd
}

// shownSchema is how get prints a schema: Confluent's fields, schemaType
// always named.
type shownSchema struct {
	Subject    string               `json:"subject,omitempty"`
	Version    int                  `json:"version,omitempty"`
	ID         int                  `json:"id"`
	SchemaType string               `json:"schemaType"`
	References []sr.SchemaReference `json:"references,omitempty"`
	Schema     string               `json:"schema"`
}

func schemaGetCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:         "get SUBJECT [--version N|latest] | --id N",
		Short:       "print a subject's version, or the schema of an ID, as JSON",
		Args:        cobra.MaximumNArgs(1),
		Annotations: noClient,
	}
	reg := addRegistryFlags(cmd.Flags())
	version := cmd.Flags().String("version", "latest", "the version to print: a number or latest")
	id := cmd.Flags().Int("id", 0, "print the schema with this ID instead of a subject's")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if (len(args) == 1) == (*id > 0) {
			return usageError("give a SUBJECT or --id, one of them")
		}
		c, err := reg.client()
		if err != nil {
			return err
		}
		var shown shownSchema
		if *id > 0 {
			s, err := c.API().SchemaByID(cmd.Context(), *id)
			if err != nil {
				return err
			}
			shown = shownSchema{ID: *id, SchemaType: s.Type.String(), References: s.References, Schema: s.Schema}
		} else {
			v, err := parseVersion(*version)
			if err != nil {
				return err
			}
			s, err := c.API().SchemaByVersion(cmd.Context(), args[0], v)
			if err != nil {
				return err
			}
			shown = shownSchema{Subject: s.Subject, Version: s.Version, ID: s.ID, SchemaType: s.Type.String(), References: s.References, Schema: s.Schema.Schema}
		}
		return printJSON(e, shown)
	}
	return cmd
}

func printJSON(e *env, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "%s\n", b)
	return err
}

func schemaListCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:         "list [--prefix P] [--deleted]",
		Short:       "list the registry's subjects, one per line",
		Args:        exactArgs(0),
		Annotations: noClient,
	}
	reg := addRegistryFlags(cmd.Flags())
	prefix := cmd.Flags().String("prefix", "", "only subjects beginning with this")
	deleted := cmd.Flags().Bool("deleted", false, "include soft-deleted subjects")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := reg.client()
		if err != nil {
			return err
		}
		params := []sr.Param{sr.SubjectPrefix(*prefix)}
		if *deleted {
			params = append(params, sr.ShowDeleted)
		}
		subjects, err := c.API().Subjects(sr.WithParams(cmd.Context(), params...))
		if err != nil {
			return err
		}
		for _, s := range subjects {
			fmt.Fprintln(e.stdout, s)
		}
		return nil
	}
	return cmd
}

func schemaDeleteCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:         "delete SUBJECT [--version N|latest] [--permanent]",
		Short:       "soft-delete a subject or one version; --permanent removes a soft-deleted one for good",
		Args:        exactArgs(1),
		Annotations: noClient,
	}
	reg := addRegistryFlags(cmd.Flags())
	version := cmd.Flags().String("version", "", "delete only this version (a number or latest)")
	permanent := cmd.Flags().Bool("permanent", false, "delete for good what is already soft-deleted")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := reg.client()
		if err != nil {
			return err
		}
		how, word := sr.SoftDelete, "soft-deleted"
		if *permanent {
			how, word = sr.HardDelete, "permanently deleted"
		}
		if *version != "" {
			v, err := parseVersion(*version)
			if err != nil {
				return err
			}
			if err := c.API().DeleteSchema(cmd.Context(), args[0], v, how); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s %s version %s\n", word, args[0], *version)
			return nil
		}
		versions, err := c.API().DeleteSubject(cmd.Context(), args[0], how)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s %s versions %v\n", word, args[0], versions)
		return nil
	}
	return cmd
}

// errIncompatible is compat's failure: exit 1, so a script can gate on it.
type errIncompatible struct{ subject, version string }

func (e errIncompatible) Error() string {
	return fmt.Sprintf("the schema is not compatible with %s version %s", e.subject, e.version)
}

func schemaCompatCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:         "compat SUBJECT --file F [--version N|latest] [--verbose]",
		Short:       "check a schema against a subject's version by the subject's compatibility level (exit 1 when not compatible)",
		Args:        exactArgs(1),
		Annotations: noClient,
	}
	reg := addRegistryFlags(cmd.Flags())
	var file schemaFile
	addSchemaFileFlags(cmd, &file)
	version := cmd.Flags().String("version", "latest", "the version to check against: a number or latest")
	verbose := cmd.Flags().Bool("verbose", false, "print each reason the schemas are not compatible")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		v, err := parseVersion(*version)
		if err != nil {
			return err
		}
		s, err := file.read(e)
		if err != nil {
			return err
		}
		c, err := reg.client()
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		if *verbose {
			ctx = sr.WithParams(ctx, sr.Verbose)
		}
		res, err := c.API().CheckCompatibility(ctx, args[0], v, s)
		if err != nil {
			return err
		}
		if res.Is {
			fmt.Fprintln(e.stdout, "compatible")
			return nil
		}
		fmt.Fprintln(e.stdout, "not compatible")
		for _, m := range res.Messages {
			fmt.Fprintln(e.stdout, "  "+m)
		}
		return errIncompatible{args[0], *version}
	}
	return cmd
}

func schemaConfigCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:         "config [SUBJECT] [--set LEVEL]",
		Short:       "print or set the compatibility level, the registry's or a subject's",
		Args:        cobra.MaximumNArgs(1),
		Annotations: noClient,
	}
	reg := addRegistryFlags(cmd.Flags())
	set := cmd.Flags().String("set", "", "set the level: NONE, BACKWARD, FORWARD, FULL, or one of them _TRANSITIVE")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		subject := sr.GlobalSubject
		if len(args) == 1 {
			subject = args[0]
		}
		c, err := reg.client()
		if err != nil {
			return err
		}
		var res sr.CompatibilityResult
		if *set != "" {
			var level sr.CompatibilityLevel
			if err := level.UnmarshalText([]byte(*set)); err != nil {
				return usageError("--set: %q is not a compatibility level (NONE, BACKWARD, FORWARD, FULL, or one of them _TRANSITIVE)", *set)
			}
			res = c.API().SetCompatibility(cmd.Context(), sr.SetCompatibility{Level: level}, subject)[0]
		} else {
			// A subject without a level of its own has the registry's.
			res = c.API().Compatibility(sr.WithParams(cmd.Context(), sr.DefaultToGlobal), subject)[0]
		}
		if res.Err != nil {
			return res.Err
		}
		fmt.Fprintln(e.stdout, res.Level)
		return nil
	}
	return cmd
}

func schemaModeCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:         "mode [SUBJECT] [--set READWRITE|READONLY|IMPORT] [--force]",
		Short:       "print or set the mode, the registry's or a subject's",
		Args:        cobra.MaximumNArgs(1),
		Annotations: noClient,
	}
	reg := addRegistryFlags(cmd.Flags())
	set := cmd.Flags().String("set", "", "set the mode: READWRITE, READONLY or IMPORT")
	force := cmd.Flags().Bool("force", false, "set IMPORT even though schemas exist")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		subject := sr.GlobalSubject
		if len(args) == 1 {
			subject = args[0]
		}
		c, err := reg.client()
		if err != nil {
			return err
		}
		var res sr.ModeResult
		if *set != "" {
			var mode sr.Mode
			if err := mode.UnmarshalText([]byte(*set)); err != nil {
				return usageError("--set: %q is not a mode (READWRITE, READONLY or IMPORT)", *set)
			}
			ctx := cmd.Context()
			if *force {
				ctx = sr.WithParams(ctx, sr.Force)
			}
			res = c.API().SetMode(ctx, mode, subject)[0]
		} else {
			res = c.API().Mode(sr.WithParams(cmd.Context(), sr.DefaultToGlobal), subject)[0]
		}
		if res.Err != nil {
			return res.Err
		}
		fmt.Fprintln(e.stdout, res.Mode)
		return nil
	}
	return cmd
}
