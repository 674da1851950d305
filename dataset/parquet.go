package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/swebuild/swebuild/core"
)

// parquetColumn says how one leaf column feeds a record field.
type parquetColumn struct {
	field  int  // record field, or -1 for a column the loader has no field for
	list   bool // the field is a LIST (leaf nested below the top-level field)
	maxDef int  // the leaf's maximum definition level
	// other names a column with no field of its own, kept as JSON text in
	// core.Instance.Extra ("" for a field, or a struct or map column: not
	// kept).
	other string
}

// loadParquet reads a parquet file as written by HuggingFace datasets
// (top-level columns named like the JSON fields, strings as BYTE_ARRAY;
// FAIL_TO_PASS / PASS_TO_PASS either strings holding JSON arrays or LIST of
// strings; version a string or a number). Rows are numbered from 0.
func loadParquet(ctx context.Context, file string, data []byte, opts LoadOptions) ([]core.Instance, error) {
	v := newValidator(file, opts.Known, 0)
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		v.fileProblem(file, "", fmt.Sprintf("malformed parquet: %v", err))
		return v.result()
	}
	layout := newParquetLayout(pf.Schema())
	if pf.NumRows() == 0 {
		v.fileProblem(file, "", "no records: the parquet file has no rows")
		return v.result()
	}
	lim := opts.Limits.withDefaults()
	if msg := parquetFooterLimits(pf, lim); msg != "" {
		v.fileProblem(file, "", msg)
		return v.result()
	}
	v.out = make([]core.Instance, 0, pf.NumRows())
	rd := parquetReader{v: v, file: file, layout: layout, lim: lim}
	for _, rg := range pf.RowGroups() {
		done, err := rd.rowGroup(ctx, rg)
		if err != nil {
			return nil, err
		}
		if done {
			break
		}
	}
	return v.result()
}

// parquetLayout is how a file's leaf columns feed record fields: cols by
// leaf index, and structField for fields backed by several leaves (a struct
// or map: not usable).
type parquetLayout struct {
	cols        []parquetColumn
	structField [nFields]bool
}

func newParquetLayout(schema *parquet.Schema) parquetLayout {
	paths := schema.Columns()
	l := parquetLayout{cols: make([]parquetColumn, len(paths))}
	leaves := [nFields]int{}
	otherLeaves := map[string]int{}
	for i, path := range paths {
		f := fieldIndex([]byte(path[0]))
		l.cols[i].field = f
		leaf, _ := schema.Lookup(path...)
		l.cols[i].maxDef = leaf.MaxDefinitionLevel
		l.cols[i].list = len(path) > 1
		if f < 0 {
			otherLeaves[path[0]]++
			l.cols[i].other = path[0]
			continue
		}
		leaves[f]++
	}
	for i := range l.cols {
		if otherLeaves[l.cols[i].other] > 1 {
			l.cols[i].other = "" // a struct or map: no JSON value of one leaf
		}
	}
	for f, n := range leaves {
		if n > 1 {
			l.structField[f] = true
		}
	}
	return l
}

// parquetFooterLimits is the problem with a file whose footer claims more
// rows or bytes than lim allows ("" when none), found before any row is
// read: a few KB of parquet can claim (and decompress to) gigabytes.
func parquetFooterLimits(pf *parquet.File, lim Limits) string {
	if n := pf.NumRows(); n > lim.MaxRows || n < 0 {
		return fmt.Sprintf("%d rows, over the limit of %d rows a file", n, lim.MaxRows)
	}
	var claimed int64
	for _, rg := range pf.Metadata().RowGroups {
		size := rg.TotalByteSize
		var cols int64
		for _, c := range rg.Columns {
			cols += max(c.MetaData.TotalUncompressedSize, 0)
		}
		claimed += max(size, cols, 0)
	}
	if claimed > lim.MaxFileBytes {
		return fmt.Sprintf("the rows are %d bytes uncompressed, over the limit of %s a file", claimed, sizeString(lim.MaxFileBytes))
	}
	return ""
}

// record fills r from one row.
func (l *parquetLayout) record(r *record, row parquet.Row) {
	r.reset()
	row.Range(func(col int, vals []parquet.Value) bool {
		c := l.cols[col]
		if c.field < 0 {
			if c.other != "" {
				r.inst.SetExtra(c.other, parquetJSON(c, vals))
			}
			return true
		}
		switch {
		case l.structField[c.field]:
			if !r.seen[c.field] {
				r.typeProblem(c.field, "is a parquet group (struct or map), want a string")
			}
		case c.list:
			parquetList(r, c, vals)
		default:
			parquetScalar(r, c, vals[0])
		}
		return true
	})
}

// parquetReader reads a file's rows into its validator, counting the rows
// (from 0) and the bytes of values decoded so far against lim.MaxFileBytes.
type parquetReader struct {
	v       *validator
	file    string
	layout  parquetLayout
	lim     Limits
	r       record
	rowNo   int
	decoded int64
	buf     []parquet.Row
}

// rowGroup reads the rows of one row group. done is true when reading
// stops for a problem the validator now holds; err is the context's.
func (rd *parquetReader) rowGroup(ctx context.Context, rg parquet.RowGroup) (done bool, err error) {
	if rd.buf == nil {
		rd.buf = make([]parquet.Row, 64)
	}
	rows := rg.Rows()
	defer rows.Close()
	for {
		if err := ctx.Err(); err != nil {
			return true, err
		}
		n, err := rows.ReadRows(rd.buf)
		for _, row := range rd.buf[:n] {
			if !rd.row(row) {
				return true, nil
			}
		}
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			rd.v.fileProblem(fmt.Sprintf("%s:row %d", rd.file, rd.rowNo), "", fmt.Sprintf("malformed parquet: %v", err))
			return true, nil
		}
	}
}

// row validates one row; false when the file is over its size limit and
// reading stops.
func (rd *parquetReader) row(row parquet.Row) bool {
	size := rowSize(row)
	if rd.decoded += size; rd.decoded > rd.lim.MaxFileBytes {
		rd.v.fileProblem(fmt.Sprintf("%s:row %d", rd.file, rd.rowNo), "", fmt.Sprintf("the rows so far are %d bytes uncompressed, over the limit of %s a file", rd.decoded, sizeString(rd.lim.MaxFileBytes)))
		return false
	}
	where := "row " + strconv.Itoa(rd.rowNo)
	rd.rowNo++
	if size > rd.lim.MaxRecordBytes {
		rd.v.fileProblem(rd.file+":"+where, "", recordTooLarge(size, rd.lim.MaxRecordBytes))
		return true
	}
	rd.layout.record(&rd.r, row)
	rd.v.add(&rd.r, rd.file+":"+where, where)
	return true
}

// rowSize is the decoded size of a row's values: the bytes of strings, 8
// for anything else.
func rowSize(row parquet.Row) int64 {
	var n int64
	for _, v := range row {
		switch v.Kind() {
		case parquet.ByteArray, parquet.FixedLenByteArray:
			n += int64(len(v.ByteArray()))
		default:
			n += 8
		}
	}
	return n
}

// parquetScalar sets field c.field from one leaf value.
func parquetScalar(r *record, c parquetColumn, val parquet.Value) {
	f := c.field
	r.seen[f] = true
	if val.IsNull() {
		return
	}
	var num string
	switch val.Kind() {
	case parquet.ByteArray, parquet.FixedLenByteArray:
		b := val.ByteArray()
		if f == fFailToPass || f == fPassToPass {
			// listString works in place: give it a copy of the reader's buffer.
			list, _, bad := listString(bytes.Clone(b))
			if bad != "" {
				r.typeProblem(f, bad)
				return
			}
			setList(r, f, list)
			return
		}
		setString(r, f, string(b))
		return
	case parquet.Int32:
		num = strconv.FormatInt(int64(val.Int32()), 10)
	case parquet.Int64:
		num = strconv.FormatInt(val.Int64(), 10)
	case parquet.Float:
		num = pyFloat(float64(val.Float()), 32)
	case parquet.Double:
		num = pyFloat(val.Double(), 64)
	default:
		r.typeProblem(f, fmt.Sprintf("is a parquet %v, want a string", val.Kind()))
		return
	}
	if f == fVersion || f == fCreatedAt {
		setString(r, f, num)
		return
	}
	r.typeProblem(f, fmt.Sprintf("is a parquet %v, want a string", val.Kind()))
}

// parquetList sets FAIL_TO_PASS / PASS_TO_PASS from the values of a LIST
// column. A null list leaves the field absent; an empty list has one value
// whose definition level is below the maximum.
func parquetList(r *record, c parquetColumn, vals []parquet.Value) {
	f := c.field
	r.seen[f] = true
	if f != fFailToPass && f != fPassToPass {
		r.typeProblem(f, "is a parquet list, want a string")
		return
	}
	if len(vals) == 1 && vals[0].DefinitionLevel() == 0 && c.maxDef > 0 {
		return // null list
	}
	list := make([]string, 0, len(vals))
	for i, val := range vals {
		if val.DefinitionLevel() < c.maxDef {
			if len(vals) == 1 {
				break // empty list
			}
			r.typeProblem(f, fmt.Sprintf("element %d is null, want a string", i))
			return
		}
		if k := val.Kind(); k != parquet.ByteArray && k != parquet.FixedLenByteArray {
			r.typeProblem(f, fmt.Sprintf("element %d is a parquet %v, want a string", i, k))
			return
		}
		list = append(list, string(val.ByteArray()))
	}
	setList(r, f, list)
}

// parquetJSON is the JSON text of an other column's value: a scalar, or
// the array of a LIST column (null for a null list).
func parquetJSON(c parquetColumn, vals []parquet.Value) string {
	if !c.list {
		return parquetScalarJSON(vals[0])
	}
	if len(vals) == 1 && vals[0].DefinitionLevel() < c.maxDef {
		if vals[0].DefinitionLevel() == 0 && c.maxDef > 0 {
			return "null"
		}
		return "[]"
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, v := range vals {
		if i > 0 {
			b.WriteString(", ")
		}
		if v.DefinitionLevel() < c.maxDef {
			b.WriteString("null")
			continue
		}
		b.WriteString(parquetScalarJSON(v))
	}
	b.WriteByte(']')
	return b.String()
}

// parquetScalarJSON is one leaf value as JSON text.
func parquetScalarJSON(v parquet.Value) string {
	if v.IsNull() {
		return "null"
	}
	switch v.Kind() {
	case parquet.Boolean:
		return strconv.FormatBool(v.Boolean())
	case parquet.Int32:
		return strconv.FormatInt(int64(v.Int32()), 10)
	case parquet.Int64:
		return strconv.FormatInt(v.Int64(), 10)
	case parquet.Float, parquet.Double:
		x, bits := v.Double(), 64
		if v.Kind() == parquet.Float {
			x, bits = float64(v.Float()), 32
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return strconv.Quote(pyFloat(x, bits)) // no JSON number for it
		}
		return pyFloat(x, bits)
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(string(v.ByteArray())) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// pyFloat formats x as Python's repr would (3.0 -> "3.0", 0.1 -> "0.1").
func pyFloat(x float64, bits int) string {
	switch {
	case math.IsNaN(x):
		return "nan"
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(x, 'e', -1, bits)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return e
	}
	s := strconv.FormatFloat(x, 'f', -1, bits)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
