package iceberg

import (
	"fmt"

	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// DataFile describes a Parquet file millrace wrote, at location (as the
// table's file IO spells it: file:///… or s3://…), of size bytes, for
// CommitRoll. Its column statistics and partition value come from the
// file's footer: the file must hold rows of one partition only (one hour
// of event time under the default spec), as the sink's files do.
func DataFile(tbl *table.Table, location string, size int64, footer *metadata.FileMetaData) (iceberg.DataFile, error) {
	return dataFile(tbl, location, size, footer, nil)
}

// DataFileWithIdentity is DataFile for a table partitioned by identity on
// a field, whose rows in the file all have value (string, int64, bool, or
// nil for null): it is the file's partition value, which the footer's
// statistics cannot give (strings truncated, none for nulls).
func DataFileWithIdentity(tbl *table.Table, location string, size int64, footer *metadata.FileMetaData, value any) (iceberg.DataFile, error) {
	values := map[int]any{}
	spec := tbl.Spec()
	for _, f := range spec.Fields() {
		if _, ok := f.Transform.(iceberg.IdentityTransform); ok {
			values[f.FieldID] = value
		}
	}
	return dataFile(tbl, location, size, footer, values)
}

func dataFile(tbl *table.Table, location string, size int64, footer *metadata.FileMetaData, partition map[int]any) (iceberg.DataFile, error) {
	df, err := table.DataFileFromMetadata(table.DataFileArgs{
		PartitionValues: partition,
		Schema:          tbl.Schema(),
		Spec:            tbl.Spec(),
		Format:          iceberg.ParquetFile,
		Metadata:        footer,
		FilePath:        location,
		FileSize:        size,
		Content:         iceberg.EntryContentData,
		Properties:      tbl.Properties(),
		FormatVersion:   tbl.Metadata().Version(),
	})
	if err != nil {
		return nil, fmt.Errorf("iceberg: data file %s: %w", location, err)
	}
	return df, nil
}
