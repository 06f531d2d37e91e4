package cli

import (
	"context"
	"fmt"
	"os"

	"millrace/sinks/parquet"
)

func init() {
	register("lake inspect", "lake inspect FILE|DIR", lakeInspect)
}

// lakeInspect prints what an independent reader (xitongsys/parquet-go) sees
// in a landed file, or in every file under a directory: schema, rows, row
// groups, codec, min/max of the time column, footer metadata.
func lakeInspect(_ context.Context, e env, args []string) error {
	f := newFlags("lake inspect")
	pos, err := f.parse(args, 1)
	if err != nil {
		return err
	}
	st, err := os.Stat(pos[0])
	if err != nil {
		return err
	}
	var infos []*parquet.FileInfo
	if st.IsDir() {
		infos, err = parquet.InspectDir(pos[0])
		if err != nil {
			return err
		}
		if len(infos) == 0 {
			return fmt.Errorf("no .parquet files under %s", pos[0])
		}
	} else {
		info, err := parquet.Inspect(pos[0])
		if err != nil {
			return err
		}
		infos = append(infos, info)
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
