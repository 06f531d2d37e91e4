package cli

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"millrace/sinks/parquet"
	"millrace/sinks/store"
)

func init() {
	addCommand("lake", func(e *env) *cobra.Command {
		cmd := &cobra.Command{
			Use:         "inspect FILE|DIR|file:///PATH|s3://BUCKET/KEY [--s3-endpoint URL] [--s3-region R]",
			Short:       "show what an independent Parquet reader sees in landed files",
			Args:        exactArgs(1),
			Annotations: noClient,
		}
		f := cmd.Flags()
		s3Endpoint := f.String("s3-endpoint", "", "S3 endpoint URL for an s3:// target (default https://s3.amazonaws.com)")
		s3Region := f.String("s3-region", "", "S3 region (default us-east-1)")
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			return lakeInspect(cmd.Context(), e, args[0], store.Options{S3Endpoint: *s3Endpoint, S3Region: *s3Region})
		}
		return cmd
	})
}

// lakeInspect prints what an independent reader (xitongsys/parquet-go) sees
// in a landed file, or in every file under a directory or S3 prefix: schema,
// rows, row groups, codec, min/max of the time column, footer metadata.
func lakeInspect(ctx context.Context, e *env, target string, s3 store.Options) error {
	var (
		infos []*parquet.FileInfo
		err   error
	)
	if strings.HasPrefix(target, "s3://") {
		// Credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY,
		// as for `millrace sink`.
		infos, err = inspectS3(ctx, target, s3)
	} else {
		infos, err = inspectLocal(strings.TrimPrefix(target, "file://"))
	}
	if err != nil {
		return err
	}
	var rows int64
	for i, info := range infos {
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		if err := info.WriteText(e.stdout); err != nil {
			return err
		}
		rows += info.Rows
	}
	if len(infos) > 1 {
		fmt.Fprintf(e.stdout, "\ntotal: %d files, %d rows\n", len(infos), rows)
	}
	return nil
}

// inspectLocal inspects a file, or every .parquet file under a directory.
func inspectLocal(path string) ([]*parquet.FileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		info, err := parquet.Inspect(path)
		if err != nil {
			return nil, err
		}
		return []*parquet.FileInfo{info}, nil
	}
	infos, err := parquet.InspectDir(path)
	if err == nil && len(infos) == 0 {
		err = fmt.Errorf("no .parquet files under %s", path)
	}
	return infos, err
}

// inspectS3 inspects the object s3://BUCKET/KEY, or every .parquet object
// under it taken as a directory, reading only each footer (ranged GETs).
func inspectS3(ctx context.Context, target string, opts store.Options) ([]*parquet.FileInfo, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, usageError("%q: want s3://BUCKET/KEY", target)
	}
	st, err := store.Open(ctx, "s3://"+u.Host, opts)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	key := strings.TrimPrefix(u.Path, "/")
	dir := strings.TrimSuffix(key, "/") + "/"
	objs, err := st.List(ctx, strings.TrimSuffix(key, "/"))
	if err != nil {
		return nil, err
	}
	var infos []*parquet.FileInfo
	for _, o := range objs {
		// The object named, or the .parquet objects below it: not
		// "clicks2/..." for "clicks", not the _SUCCESS markers.
		under := key == "" || strings.HasPrefix(o.Name, dir)
		if o.Name != key && !(under && strings.HasSuffix(o.Name, ".parquet")) {
			continue
		}
		info, err := inspectObject(ctx, st, "s3://"+u.Host+"/", o.Name)
		if err != nil {
			return infos, err
		}
		infos = append(infos, info)
	}
	if len(infos) == 0 {
		return nil, fmt.Errorf("no .parquet objects under %s", target)
	}
	return infos, nil
}

// inspectObject reads the footer of one published object; root prefixes its
// name in the result.
func inspectObject(ctx context.Context, st store.Store, root, name string) (*parquet.FileInfo, error) {
	r, err := st.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return parquet.InspectReader(root+name, r, r.Size())
}
