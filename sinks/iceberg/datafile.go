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
	df, err := table.DataFileFromMetadata(table.DataFileArgs{
		Schema:        tbl.Schema(),
		Spec:          tbl.Spec(),
		Format:        iceberg.ParquetFile,
		Metadata:      footer,
		FilePath:      location,
		FileSize:      size,
		Content:       iceberg.EntryContentData,
		Properties:    tbl.Properties(),
		FormatVersion: tbl.Metadata().Version(),
	})
	if err != nil {
		return nil, fmt.Errorf("iceberg: data file %s: %w", location, err)
	}
	return df, nil
}
