package natsio

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/state"
)

// SnapshotsBucket is the object store holding the snapshots of replicated deployments.
const SnapshotsBucket = "groupstate-snapshots"

// Snapshot errors.
var (
	// ErrSnapshotNotFound: the snapshot's data is not in the bucket (pruned meanwhile, or
	// never completely written).
	ErrSnapshotNotFound = errors.New("natsio: snapshot not found")
	// ErrCorruptSnapshot: a snapshot's data or manifest does not decode, or does not hold
	// what its manifest says.
	ErrCorruptSnapshot = errors.New("natsio: corrupt snapshot")
	// ErrInvalidSnapshot: a snapshot asked for with an invalid deployment name or a
	// negative partition, or a manifest of another deployment or partition.
	ErrInvalidSnapshot = errors.New("natsio: invalid snapshot")
)

// snapshotMagic begins every snapshot's data object; its last byte is the format version.
const snapshotMagic = "GSSNAP\x00\x01"

// Codecs of a snapshot frame.
const (
	frameRaw byte = 0
	frameS2  byte = 1
)

// maxFrame bounds the stored length of one frame read back (a corrupt length must not
// make Read allocate without bound).
const maxFrame = 1 << 30

// putCleanup is how long a Put whose context ended goes on to remove what it uploaded.
const putCleanup = 10 * time.Second

// SnapshotMeta is a snapshot's manifest: the small JSON object written after the
// snapshot's data, which makes the snapshot visible.
type SnapshotMeta struct {
	// Deployment and Partition are whose state the snapshot holds.
	Deployment string `json:"deployment"`
	Partition  int    `json:"partition"`
	// Seq is the changelog sequence the snapshot includes: its state is the partition's
	// after applying every record up to Seq, and a restore applies the records after it.
	Seq uint64 `json:"seq"`
	// BatchID is the last committed batch the snapshot holds (its Progress.BatchID).
	BatchID uint64 `json:"batch_id"`
	// Epoch is the lease epoch of the runtime that took the snapshot.
	Epoch uint64 `json:"epoch"`
	// CreatedAt is when the snapshot was taken (set by Put when zero).
	CreatedAt time.Time `json:"created_at"`
	// Chunks is the number of chunks (state.Deployment.Export's reprs) the snapshot holds.
	Chunks int `json:"chunks"`
	// Bytes is the chunks' total length, uncompressed.
	Bytes int64 `json:"bytes"`
	// StoredBytes is the length of the snapshot's data object, compressed and framed.
	StoredBytes int64 `json:"stored_bytes"`
	// ID names the snapshot's objects, unique in the bucket (set by Put).
	ID string `json:"id"`
}

// Snapshots is the bucket [SnapshotsBucket]. Each snapshot of a (deployment, partition)
// is two objects, "<deployment>/<partition>/<ID>.snap" holding its chunks and
// "<deployment>/<partition>/<ID>.json" its manifest, written in that order; an ID begins
// with the zero-padded Seq and creation time, so that names sort oldest first. Safe for
// concurrent use.
//
// One data object per snapshot (rather than one object per chunk): the object store
// makes an object visible only once all of it was stored (its info is published last),
// checks its SHA-256 on read, and lists, reads and deletes it as one, so a snapshot costs
// two object infos however many chunks it holds. Inside it, each chunk is a frame of its
// own (codec byte, uvarint length, data: S2-compressed unless that does not pay, as
// changelog records are), so that neither Put nor Read holds more than one chunk.
type Snapshots struct {
	os jetstream.ObjectStore
}

// OpenSnapshots ensures the object store [SnapshotsBucket] (file storage, replicas
// copies, 0 meaning [DefaultReplicas]; a bucket that exists is used as it is) and returns
// it.
func OpenSnapshots(ctx context.Context, js jetstream.JetStream, replicas int) (*Snapshots, error) {
	replicas = replicasFor(js, replicas)
	cfg := jetstream.ObjectStoreConfig{
		Bucket:      SnapshotsBucket,
		Replicas:    replicas,
		Description: "groupstate snapshots of replicated deployments' state",
		Storage:     jetstream.FileStorage,
		Compression: false, // frames are compressed already
	}
	obs, err := js.CreateObjectStore(ctx, cfg)
	if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		obs, err = js.ObjectStore(ctx, cfg.Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("natsio: opening object store %s: %w", cfg.Bucket, explainReplicas(err, replicas))
	}
	return &Snapshots{os: obs}, nil
}

// snapshotDir is the name prefix of the objects of deployment's partition.
func snapshotDir(deployment string, partition int) (string, error) {
	if err := state.ValidateName(deployment); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidSnapshot, err)
	}
	if partition < 0 {
		return "", fmt.Errorf("%w: partition %d", ErrInvalidSnapshot, partition)
	}
	return deployment + "/" + strconv.Itoa(partition) + "/", nil
}

// newSnapshotID returns "<seq, 20 digits>-<created, Unix ns, 19 digits>-<8 random hex>".
func newSnapshotID(seq uint64, created time.Time) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%020d-%019d-%s", seq, max(created.UnixNano(), 0), hex.EncodeToString(r[:]))
}

// validID tells whether id may be a snapshot ID (so that names built from it stay in
// their directory).
func validID(id string) bool {
	return id != "" && !strings.ContainsAny(id, "/.") && len(id) <= 64
}

// Put stores a snapshot of deployment's partition: chunks is called once and yields each
// chunk (a state.Deployment.Export repr, which yield does not retain) in order; an error
// from chunks or yield, or the end of ctx, abandons the snapshot. m gives Seq, BatchID,
// Epoch and optionally CreatedAt; chunks may set them before its first yield (an export
// learns the point it copies only when it starts: state.Deployment.ExportAt). Put fills in
// the rest and returns the manifest written.
//
// The chunks are streamed to the data object as they come, then the manifest is written:
// until Put returns nil the snapshot is invisible to [Snapshots.Latest] and
// [Snapshots.List]. An upload that fails removes what it stored (a process that dies
// midway leaves unreferenced object chunks, or a data object without a manifest, which
// [Snapshots.Prune] removes).
func (s *Snapshots) Put(ctx context.Context, deployment string, partition int, m *SnapshotMeta, chunks func(yield func([]byte) error) error) (SnapshotMeta, error) {
	dir, err := snapshotDir(deployment, partition)
	if err != nil {
		return SnapshotMeta{}, err
	}
	m.Deployment, m.Partition, m.Chunks, m.Bytes, m.StoredBytes = deployment, partition, 0, 0, 0
	if m.CreatedAt.IsZero() {
		m.CreatedAt = time.Now().UTC()
	}
	var dataName string

	// The object store reads the data from a pipe the chunks are written to, from the first
	// chunk on (m's Seq is known then). Its context outlives ctx a little: the end of ctx
	// aborts the pipe instead, so that the object store removes the chunks it stored with a
	// context that still works.
	pctx, pcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer pcancel()
	pr, pw := io.Pipe()
	stop := context.AfterFunc(ctx, func() {
		pw.CloseWithError(ctx.Err())
		time.AfterFunc(putCleanup, pcancel)
	})
	defer stop()
	type result struct {
		info *jetstream.ObjectInfo
		err  error
	}
	done := make(chan result, 1)
	started := false
	startUpload := func() {
		if started {
			return
		}
		started = true
		m.ID = newSnapshotID(m.Seq, m.CreatedAt)
		dataName = dir + m.ID + ".snap"
		go func() {
			info, err := s.os.Put(pctx, jetstream.ObjectMeta{Name: dataName, Description: "groupstate snapshot data"}, pr)
			pr.CloseWithError(errors.Join(err, errors.New("natsio: snapshot upload ended"))) // unblocks the writer
			done <- result{info, err}
		}()
	}

	bw := bufio.NewWriterSize(pw, 256<<10)
	var frame []byte
	werr := func() error {
		err := chunks(func(repr []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if !started {
				startUpload()
				if _, err := bw.WriteString(snapshotMagic); err != nil {
					return err
				}
			}
			data, codec := encodeData(repr)
			c := frameRaw
			if codec == codecS2 {
				c = frameS2
			}
			frame = binary.AppendUvarint(append(frame[:0], c), uint64(len(data)))
			if _, err := bw.Write(frame); err != nil {
				return err
			}
			if _, err := bw.Write(data); err != nil {
				return err
			}
			m.Chunks++
			m.Bytes += int64(len(repr))
			return nil
		})
		if err != nil {
			return err
		}
		if !started {
			startUpload()
			if _, err := bw.WriteString(snapshotMagic); err != nil {
				return err
			}
		}
		return bw.Flush()
	}()
	if !started {
		// chunks failed before its first chunk: nothing was uploaded.
		pw.CloseWithError(werr)
		return SnapshotMeta{}, fmt.Errorf("natsio: putting a snapshot of %s: %w", dir, errors.Join(werr, ctx.Err()))
	}
	if werr == nil {
		werr = ctx.Err()
	}
	pw.CloseWithError(werr) // nil: EOF, the object is complete
	res := <-done
	if werr != nil || res.err != nil {
		if res.err == nil {
			// The object was stored after all (the pipe had been read to its end): remove it.
			s.deleteQuietly(pctx, dataName)
		}
		return SnapshotMeta{}, fmt.Errorf("natsio: putting snapshot %s: %w", dataName, errors.Join(werr, res.err))
	}
	m.StoredBytes = int64(res.info.Size)
	body, _ := json.Marshal(*m)
	if _, err := s.os.Put(ctx, jetstream.ObjectMeta{Name: dir + m.ID + ".json", Description: "groupstate snapshot manifest"}, bytes.NewReader(body)); err != nil {
		s.deleteQuietly(pctx, dataName)
		return SnapshotMeta{}, fmt.Errorf("natsio: putting snapshot manifest %s: %w", dir+m.ID, err)
	}
	return *m, nil
}

// deleteQuietly deletes object name, best effort, within putCleanup.
func (s *Snapshots) deleteQuietly(ctx context.Context, name string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), putCleanup)
	defer cancel()
	_ = s.os.Delete(dctx, name)
}

// objects returns the names of the objects of deployment's partition, sorted, split into
// manifests and data objects, with their infos.
func (s *Snapshots) objects(ctx context.Context, deployment string, partition int) (dir string, manifests, data []*jetstream.ObjectInfo, err error) {
	dir, err = snapshotDir(deployment, partition)
	if err != nil {
		return "", nil, nil, err
	}
	// The listing is a watch of the bucket: bounded, as a watch that is never served (a fresh
	// cluster) would otherwise wait as long as ctx lasts (see listTimeout).
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	infos, err := s.os.List(lctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return dir, nil, nil, nil
	}
	if err != nil {
		return "", nil, nil, fmt.Errorf("natsio: listing snapshots: %w", err)
	}
	for _, info := range infos {
		rest, ok := strings.CutPrefix(info.Name, dir)
		if !ok || strings.Contains(rest, "/") {
			continue
		}
		switch {
		case strings.HasSuffix(rest, ".json"):
			manifests = append(manifests, info)
		case strings.HasSuffix(rest, ".snap"):
			data = append(data, info)
		}
	}
	byName := func(a, b *jetstream.ObjectInfo) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(manifests, byName)
	slices.SortFunc(data, byName)
	return dir, manifests, data, nil
}

// manifest reads and checks the manifest object name of dir.
func (s *Snapshots) manifest(ctx context.Context, dir, name string, deployment string, partition int) (SnapshotMeta, error) {
	body, err := s.os.GetBytes(ctx, name)
	if err != nil {
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return SnapshotMeta{}, fmt.Errorf("%w: manifest %s", ErrSnapshotNotFound, name)
		}
		return SnapshotMeta{}, fmt.Errorf("natsio: reading snapshot manifest %s: %w", name, err)
	}
	var m SnapshotMeta
	if err := json.Unmarshal(body, &m); err != nil {
		return SnapshotMeta{}, fmt.Errorf("%w: manifest %s: %v", ErrCorruptSnapshot, name, err)
	}
	if m.Deployment != deployment || m.Partition != partition || dir+m.ID+".json" != name {
		return SnapshotMeta{}, fmt.Errorf("%w: manifest %s is of %s/%d/%s", ErrCorruptSnapshot, name, m.Deployment, m.Partition, m.ID)
	}
	return m, nil
}

// Latest returns the manifest of the newest complete snapshot of deployment's partition
// (the highest Seq, then the latest CreatedAt); found is false when there is none.
func (s *Snapshots) Latest(ctx context.Context, deployment string, partition int) (m SnapshotMeta, found bool, err error) {
	dir, manifests, _, err := s.objects(ctx, deployment, partition)
	if err != nil {
		return SnapshotMeta{}, false, err
	}
	for i := len(manifests) - 1; i >= 0; i-- {
		m, err := s.manifest(ctx, dir, manifests[i].Name, deployment, partition)
		if errors.Is(err, ErrSnapshotNotFound) {
			continue // pruned since the listing
		}
		return m, err == nil, err
	}
	return SnapshotMeta{}, false, nil
}

// List returns the manifests of the complete snapshots of deployment's partition, newest
// first: a restore whose Read of the newest fails with [ErrSnapshotNotFound] (pruned
// meanwhile) or [ErrCorruptSnapshot] can go on with the next.
func (s *Snapshots) List(ctx context.Context, deployment string, partition int) ([]SnapshotMeta, error) {
	dir, manifests, _, err := s.objects(ctx, deployment, partition)
	if err != nil {
		return nil, err
	}
	var out []SnapshotMeta
	for i := len(manifests) - 1; i >= 0; i-- {
		m, err := s.manifest(ctx, dir, manifests[i].Name, deployment, partition)
		if errors.Is(err, ErrSnapshotNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
	return out, nil
}

// Read calls fn with each chunk of the snapshot m of deployment's partition, in order,
// streaming it from the bucket; a chunk is only valid during the call. An error from fn
// stops the read and is returned. The data's length, chunk count and digest are checked
// against m and the object's info ([ErrCorruptSnapshot]), but fn may have been called with
// chunks before a corruption at the end shows: a restore that fails must start again
// (the first chunk of an export begins with a range deletion of the keyspace). A
// snapshot pruned before or during the read fails with [ErrSnapshotNotFound].
func (s *Snapshots) Read(ctx context.Context, deployment string, partition int, m SnapshotMeta, fn func(repr []byte) error) error {
	dir, err := snapshotDir(deployment, partition)
	if err != nil {
		return err
	}
	if m.Deployment != deployment || m.Partition != partition || !validID(m.ID) {
		return fmt.Errorf("%w: manifest of %s/%d/%s read as %s", ErrInvalidSnapshot, m.Deployment, m.Partition, m.ID, dir)
	}
	name := dir + m.ID + ".snap"
	obj, err := s.os.Get(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("%w: %s", ErrSnapshotNotFound, name)
	}
	if err != nil {
		return fmt.Errorf("natsio: reading snapshot %s: %w", name, err)
	}
	defer obj.Close()
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrCorruptSnapshot, name, fmt.Sprintf(format, args...))
	}
	br := bufio.NewReaderSize(obj, 256<<10)
	// A read error of the object (its digest at the end, a chunk missing, the context) is
	// a read error, not a frame that does not decode.
	readErr := func(err error) error {
		switch {
		case errors.Is(err, jetstream.ErrDigestMismatch):
			return corrupt("%v", err)
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return corrupt("truncated")
		}
		return fmt.Errorf("natsio: reading snapshot %s: %w", name, err)
	}
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil {
		return readErr(err)
	}
	if string(magic) != snapshotMagic {
		return corrupt("not a snapshot (format %q)", magic)
	}
	var stored, raw []byte
	chunks, total := 0, int64(0)
	for {
		codec, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return readErr(err)
		}
		n, err := binary.ReadUvarint(br)
		if err != nil {
			return readErr(err)
		}
		if n > maxFrame {
			return corrupt("frame %d of %d bytes", chunks, n)
		}
		stored = slices.Grow(stored[:0], int(n))[:n]
		if _, err := io.ReadFull(br, stored); err != nil {
			return readErr(err)
		}
		repr := stored
		switch codec {
		case frameRaw:
		case frameS2:
			if raw, err = s2.Decode(raw[:cap(raw)], stored); err != nil {
				return corrupt("frame %d: %v", chunks, err)
			}
			repr = raw
		default:
			return corrupt("frame %d: codec %d", chunks, codec)
		}
		chunks++
		total += int64(len(repr))
		if err := fn(repr); err != nil {
			return err
		}
	}
	if chunks != m.Chunks || total != m.Bytes {
		return corrupt("%d chunks of %d bytes, manifest says %d of %d", chunks, total, m.Chunks, m.Bytes)
	}
	return nil
}

// Prune deletes every snapshot of deployment's partition but the newest keep (keep 0:
// all), each manifest before its data, so that a snapshot is never visible without its
// data. It also deletes the data objects without a manifest (uploads that died between
// the two objects) that are older than the newest kept snapshot. A restore reading a
// snapshot Prune deletes fails with [ErrSnapshotNotFound]. Keep 0 deletes the data of an
// upload in progress too (its Put then writes a manifest whose Read fails): use it when
// the deployment's changelog is gone, whose sequences the snapshots refer to.
func (s *Snapshots) Prune(ctx context.Context, deployment string, partition int, keep int) error {
	dir, manifests, data, err := s.objects(ctx, deployment, partition)
	if err != nil {
		return err
	}
	keep = max(keep, 0)
	kept := map[string]bool{}
	var oldestKept string // ID
	for i := max(len(manifests)-keep, 0); i < len(manifests); i++ {
		id := strings.TrimSuffix(strings.TrimPrefix(manifests[i].Name, dir), ".json")
		kept[id] = true
		if oldestKept == "" {
			oldestKept = id
		}
	}
	var errs []error
	del := func(name string) {
		if err := s.os.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			errs = append(errs, fmt.Errorf("natsio: pruning snapshot object %s: %w", name, err))
		}
	}
	for _, info := range manifests[:max(len(manifests)-keep, 0)] {
		del(info.Name)
	}
	if len(errs) > 0 {
		return errors.Join(errs...) // keep the data of manifests that may still be there
	}
	for _, info := range data {
		id := strings.TrimSuffix(strings.TrimPrefix(info.Name, dir), ".snap")
		// A data object newer than the oldest kept snapshot, and not one of them, may be an
		// upload in progress.
		if !kept[id] && (keep == 0 || id < oldestKept) {
			del(info.Name)
		}
	}
	return errors.Join(errs...)
}
