package state

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// sectionInputs holds the watermarks of a deployment's named inputs (Batch.SetInputWatermarks).
const sectionInputs = 'w'

// SetInputWatermarks records, with the batch, the watermark of each of the deployment's
// named inputs (by input name), for Deployment.InputWatermarks: a deployment with several
// inputs makes its watermark of theirs, so each must survive restarts and failovers. The
// record replaces the one before it whole (an input left out is forgotten). The map is
// copied; the caller may reuse it after SetInputWatermarks returns.
func (b *Batch) SetInputWatermarks(w map[string]int64) {
	names := make([]string, 0, len(w))
	for n := range w {
		names = append(names, n)
	}
	sort.Strings(names)
	v := binary.AppendUvarint(nil, uint64(len(names)))
	for _, n := range names {
		v = binary.AppendUvarint(v, uint64(len(n)))
		v = append(v, n...)
		v = binary.BigEndian.AppendUint64(v, uint64(w[n]))
	}
	b.inputWatermarks = v
}

// InputWatermarks returns the input watermarks the last batch that set them recorded
// (Batch.SetInputWatermarks), by input name; an empty map when none did. The map belongs
// to the caller.
func (d *Deployment) InputWatermarks() (map[string]int64, error) {
	if err := d.acquire(); err != nil {
		return nil, err
	}
	defer d.s.release()
	v, found, err := d.s.readValue(sectionKey(nil, d.prefix, sectionInputs))
	if err != nil {
		return nil, err
	}
	if !found {
		return map[string]int64{}, nil
	}
	return decodeInputWatermarks(v)
}

// decodeInputWatermarks decodes a record of SetInputWatermarks.
func decodeInputWatermarks(v []byte) (map[string]int64, error) {
	corrupt := fmt.Errorf("%w: input watermarks record of %d bytes", ErrCorrupt, len(v))
	n, w := binary.Uvarint(v)
	if w <= 0 || n > uint64(len(v)) {
		return nil, corrupt
	}
	v = v[w:]
	out := make(map[string]int64, n)
	for range n {
		l, w := binary.Uvarint(v)
		if w <= 0 || l > uint64(len(v)-w) || len(v)-w-int(l) < 8 {
			return nil, corrupt
		}
		name := string(v[w : w+int(l)])
		v = v[w+int(l):]
		out[name] = int64(binary.BigEndian.Uint64(v))
		v = v[8:]
	}
	if len(v) != 0 {
		return nil, corrupt
	}
	return out, nil
}
