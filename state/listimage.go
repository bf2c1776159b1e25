package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// List images: a short list's stored elements as one record of the hot-state cache
// (RATIONALE.md, "The join's state on the host: timers and short lists from the hot-state
// cache, LIST_DROP_FIRST"). A list of at most
// imageMaxItems elements and imageMaxBytes bytes is read (ListRead, and the keys that
// ListDropFirst and a short clear delete) from its image rather than with a Pebble
// iterator through the batch's indexed batch, which costs a merge of every level for a
// handful of elements.
//
// The image is kept under the key P 'x' u32(id) uvarint(len(key)) key tagImage, cut of
// P as the cache's other variable records: a key that is never one of Pebble's (a data
// key's tag is 0 or 1). Its value is, per stored element (expired ones included) in
// sequence order, u64 seq | uvarint len(item) | item, item being the stored bytes (flags,
// expiry, payload).
//
// A batch keeps, per list it read or wrote, its own view of the image (Batch.imgs):
// known (the list as the batch sees it, elements in order) or dirty (the batch wrote the
// list without knowing all of it: it is read through the indexed batch). A list without
// an entry was either not written by the batch (its image in the cache, if any, is the
// list) or written while the cache had no image of it (and only this batch's commit can
// store one): an image in the cache, or else an iterator through the indexed batch, gives
// the list as the batch sees it. Every write of a list's elements goes through a KeyTxn's
// list ops (appendList, clearColl, ListDropFirst), which update a known image, load it
// from the cache first (a list the batch did not read; none there: no entry), or mark it
// dirty; ExpireTTL marks the lists and maps it removes items of dirty. At Commit, known
// images are stored in the cache (write-through) and dirty ones forgotten, inside the
// stripe's write bracket as the overlay's records; a failed group's rebuild of the indexed
// batch (Discard, RevertKeys) makes every image of the batch dirty. ApplyReplicated makes
// the cache forget the image of every list or map it writes items of, so a standby reads
// the list from Pebble once and caches it again.
const tagImage = 0x02

// The largest list kept as an image.
const (
	imageMaxItems = pointClearMax
	imageMaxBytes = 8 << 10
)

// listImage is a batch's view of a list's image.
type listImage struct {
	dirty  bool
	cached bool // the cache holds it as it is: the commit need not store it again
	seqs   []uint64
	items  [][]byte // stored items (flags, expiry, payload), owned
	size   int      // the items' bytes
}

// imageKey appends the image key of list id of key.
func imageKey(dst, prefix []byte, id uint32, key []byte) []byte {
	return append(varKeyPrefix(dst, prefix, id, key), tagImage)
}

// fits reports whether the image is small enough to keep.
func (img *listImage) fits() bool {
	return len(img.seqs) <= imageMaxItems && img.size <= imageMaxBytes
}

// set sets element seq's item (appended when seq is past the last, as appends are).
func (img *listImage) set(seq uint64, item []byte) {
	img.cached = false
	item = bytes.Clone(item)
	i, found := len(img.seqs), false
	if i > 0 && img.seqs[i-1] >= seq {
		i, found = slices.BinarySearch(img.seqs, seq)
	}
	if found {
		img.size += len(item) - len(img.items[i])
		img.items[i] = item
		return
	}
	img.seqs = slices.Insert(img.seqs, i, seq)
	img.items = slices.Insert(img.items, i, item)
	img.size += len(item)
}

// appendImage appends the encoding of img.
func appendImage(dst []byte, img *listImage) []byte {
	for i, seq := range img.seqs {
		dst = binary.BigEndian.AppendUint64(dst, seq)
		dst = binary.AppendUvarint(dst, uint64(len(img.items[i])))
		dst = append(dst, img.items[i]...)
	}
	return dst
}

// decodeImage decodes an image; its items are copies.
func decodeImage(b []byte) (*listImage, error) {
	img := &listImage{}
	for len(b) > 0 {
		if len(b) < 8 {
			return nil, fmt.Errorf("%w: list image", ErrCorrupt)
		}
		seq := binary.BigEndian.Uint64(b)
		n, w := binary.Uvarint(b[8:])
		if w <= 0 || n > uint64(len(b)-8-w) || (len(img.seqs) > 0 && img.seqs[len(img.seqs)-1] >= seq) {
			return nil, fmt.Errorf("%w: list image", ErrCorrupt)
		}
		item := bytes.Clone(b[8+w : 8+w+int(n)])
		img.seqs = append(img.seqs, seq)
		img.items = append(img.items, item)
		img.size += len(item)
		b = b[8+w+int(n):]
	}
	return img, nil
}

// imagesOn reports whether the batch keeps list images: with the hot-state cache, and
// while its overlay is safe (a batch that dropped a variable reads through its indexed
// batch and empties the cache at its commit).
func (b *Batch) imagesOn() bool { return b.d.s.cache != nil && !b.ov.unsafe }

// cachedImage looks the committed image of ik up in the cache. Unlike Deployment.Get, it
// needs no read token: only the batch's own commit, which the batch's goroutine makes, can
// change the deployment's cached records, so a hit is the committed image and a miss means
// the cache has none.
func (b *Batch) cachedImage(ik []byte) (*listImage, bool, error) {
	d := b.d
	e, found, hit, _ := d.s.cache.get(d.varsDep(), ik[len(d.prefix):], nil)
	if !hit || !found || !e.HasValue {
		return nil, false, nil
	}
	img, err := decodeImage(e.Value)
	if err != nil {
		return nil, false, err
	}
	img.cached = true
	return img, true, nil
}

// readImage returns list id of key as the transaction's batch sees it, from its image, or
// nil when the list must be read through the indexed batch (no cache, too long, or written
// by the batch without an image). count is the list's stored elements (its meta record).
func (t *KeyTxn) readImage(id uint32, count uint64) (*listImage, error) {
	b := t.b
	if b == nil || !b.imagesOn() || count > imageMaxItems {
		return nil, nil
	}
	ik := imageKey(nil, t.d.prefix, id, t.key)
	if img, ok := b.image(ik); ok {
		if img.dirty {
			return nil, nil
		}
		return img, nil
	}
	img, ok, err := b.cachedImage(ik)
	if err != nil {
		return nil, err
	}
	if !ok {
		// Not written by the batch: the indexed batch holds the committed list.
		if img, err = t.scanImage(id); err != nil {
			return nil, err
		}
		if !img.fits() { // read through the indexed batch from now on
			b.putImage(ik, &listImage{dirty: true})
			return nil, nil
		}
	}
	b.putImage(ik, img)
	return img, nil
}

// scanImage reads list id of key through the indexed batch, as an image.
func (t *KeyTxn) scanImage(id uint32) (*listImage, error) {
	lower, upper := t.itemsBounds(id)
	iter, err := t.r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer iter.Close()
	img := &listImage{}
	for ok := iter.First(); ok && len(img.seqs) <= imageMaxItems; ok = iter.Next() {
		k := iter.Key()
		if len(k) != len(lower)+8 {
			return nil, fmt.Errorf("%w: list element key %q", ErrCorrupt, k)
		}
		raw, err := iter.ValueAndErr()
		if err != nil {
			return nil, err
		}
		img.seqs = append(img.seqs, binary.BigEndian.Uint64(k[len(lower):]))
		img.items = append(img.items, bytes.Clone(raw))
		img.size += len(raw)
	}
	return img, iter.Error()
}

// image returns the batch's view of ik, if it has one. A fork (Batch.Fork) without one of
// its own takes a copy of its parent's, which holds what the batch wrote before the fork:
// the fork's writes then change its copy only, so a revert inside the fork (dirtyImages)
// and the parent's view stay apart until Join. The parent's map is only read here, and a
// key's list is in one fork only (a key is in one chunk per phase).
func (b *Batch) image(ik []byte) (*listImage, bool) {
	if img, ok := b.imgs[string(ik)]; ok {
		return img, true
	}
	if b.parent == nil {
		return nil, false
	}
	pimg, ok := b.parent.imgs[string(ik)]
	if !ok {
		return nil, false
	}
	img := &listImage{dirty: pimg.dirty, cached: pimg.cached, size: pimg.size,
		seqs: slices.Clone(pimg.seqs), items: slices.Clone(pimg.items)}
	b.putImage(ik, img)
	return img, true
}

// joinImages takes the views of a joined fork f into b's: f's own, for lists of its keys only.
func (b *Batch) joinImages(f *Batch) {
	for ik, img := range f.imgs {
		if b.imgs == nil {
			b.imgs = make(map[string]*listImage, len(f.imgs))
		}
		b.imgs[ik] = img
	}
}

// putImage records img as the batch's view of ik.
func (b *Batch) putImage(ik []byte, img *listImage) {
	if b.imgs == nil {
		b.imgs = make(map[string]*listImage)
	}
	b.imgs[string(ik)] = img
}

// writeImage returns the batch's image of list id of key for a write of its elements,
// known (loaded from the cache when the batch had none, or empty when the list is: count
// is its stored elements before the write), or nil: the image is dirty, or neither the
// batch nor the cache has one.
func (t *KeyTxn) writeImage(id uint32, count uint64) *listImage {
	b := t.b
	if !b.imagesOn() {
		return nil
	}
	ik := imageKey(nil, t.d.prefix, id, t.key)
	img, ok := b.image(ik)
	switch {
	case count == 0: // no element stored: known, whatever the batch wrote before
		img = &listImage{}
		b.putImage(ik, img)
	case !ok:
		var found bool
		if img, found, _ = b.cachedImage(ik); !found {
			// The cache has no image to update or forget; a later read of the batch
			// scans the list, this write included.
			return nil
		}
		b.putImage(ik, img)
	}
	if img.dirty {
		return nil
	}
	return img
}

// dirtyImage marks the batch's image of list id of key dirty (written without it).
func (t *KeyTxn) dirtyImage(id uint32) {
	if t.b.imagesOn() {
		t.b.putImage(imageKey(nil, t.d.prefix, id, t.key), &listImage{dirty: true})
	}
}

// imageWritten marks img dirty when a write made it too long to keep.
func imageWritten(img *listImage) {
	if img != nil && !img.fits() {
		*img = listImage{dirty: true}
	}
}

// resetImage makes the batch's image of list id of key known and empty (the list was
// cleared).
func (t *KeyTxn) resetImage(id uint32) {
	if t.b.imagesOn() {
		t.b.putImage(imageKey(nil, t.d.prefix, id, t.key), &listImage{})
	}
}

// dirtyItem marks dirty the image of the list (or map) whose item dk (a data key of the
// keyspace) the batch deletes outside a list op (ExpireTTL).
func (b *Batch) dirtyItem(dk []byte) {
	if !b.imagesOn() {
		return
	}
	id, key, tag, _, ok := parseVarData(dk[len(b.d.prefix)+1:])
	if !ok || tag != tagItem {
		return
	}
	b.putImage(imageKey(nil, b.d.prefix, id, key), &listImage{dirty: true})
}

// dirtyImages marks every image of the batch dirty: its indexed batch was rebuilt without a
// failed transaction's writes, which a known image may hold.
func (b *Batch) dirtyImages() {
	for _, img := range b.imgs {
		*img = listImage{dirty: true}
	}
}

// imagesLog adds the batch's images to log (see overlayLog): known ones stored, dirty
// ones forgotten.
func (b *Batch) imagesLog(log *setLog) {
	p := len(b.d.prefix)
	var buf []byte
	for ik, img := range b.imgs {
		if img.dirty || !img.fits() {
			log.addDrop([]byte(ik[p:]))
			continue
		}
		if img.cached {
			continue
		}
		buf = appendImage(buf[:0], img)
		log.add([]byte(ik[p:]), 0, Entry{HasValue: true, Value: buf})
	}
}

// replicatedImage returns the image key (after the keyspace prefix) whose list a
// replicated write of data key rest (after P 'x') or a range deletion from it changes, or
// nil: the image of the list or map of an item, or of a key's whole variable.
func replicatedImage(rest []byte, rangeStart bool) []byte {
	if !rangeStart {
		id, key, tag, _, ok := parseVarData(rest)
		if !ok || tag != tagItem {
			return nil
		}
		return imageKey(nil, []byte{}, id, key)
	}
	// A range deletion of a key's variable starts at P 'x' u32(id) uvarint(len(key)) key.
	if len(rest) < 4 {
		return nil
	}
	n, w := binary.Uvarint(rest[4:])
	if w <= 0 || uint64(len(rest)-4-w) != n {
		return nil
	}
	return imageKey(nil, []byte{}, binary.BigEndian.Uint32(rest), rest[4+w:])
}

// read is ListRead on the image: the live elements from cursor on (0: the first), paged as
// ListRead pages them.
func (img *listImage) read(cursor uint64, maxBytes int, nowMs int64) (elems [][]byte, next uint64, err error) {
	i := 0
	if cursor > 0 {
		i, _ = slices.BinarySearch(img.seqs, cursor-1)
	}
	size := 0
	for ; i < len(img.seqs); i++ {
		exp, payload, err := decodeItem(img.items[i])
		if err != nil {
			return nil, 0, err
		}
		if !live(exp, nowMs) {
			continue
		}
		if len(elems) > 0 && size+len(payload)+4 > maxBytes {
			return elems, img.seqs[i] + 1, nil
		}
		size += len(payload) + 4
		elems = append(elems, bytes.Clone(payload))
	}
	return elems, 0, nil
}
