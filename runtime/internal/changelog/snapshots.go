package changelog

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
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

// snapshotMagic begins the data object of a format-1 snapshot; its last byte is the
// format version.
const snapshotMagic = "GSSNAP\x00\x01"

// SnapshotFormat is the format of the snapshots Put writes: one object per chunk, named
// by its content, and a manifest listing them ([SnapshotMeta.ChunkRefs]). Format 1 (a
// manifest without Format) had one data object per snapshot; Read still reads it.
const SnapshotFormat = 2

// chunksDir is the directory, in a partition's, of its snapshots' chunk objects.
const chunksDir = "chunks/"

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

// chunkGrace is how old a chunk object no kept manifest references must be for Prune to
// delete it: younger, it may be one an upload in progress (a deposed owner's, whose
// lease ran out while it uploaded) has just stored, and its manifest will reference it. It
// is much longer than an upload, and than the clock skew between a runtime and the
// servers (the age is the server's time of the object against the runtime's clock).
const chunkGrace = 10 * time.Minute

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
	// StoredBytes is the total length of the chunk objects the snapshot references (of its
	// data object in format 1), compressed and framed, whether this snapshot uploaded them
	// or an earlier one did.
	StoredBytes int64 `json:"stored_bytes"`
	// ID names the snapshot's manifest, unique in the bucket (set by Put).
	ID string `json:"id"`
	// Format is the snapshot's format: [SnapshotFormat] (set by Put); 0 is format 1.
	Format int `json:"format,omitempty"`
	// ChunkRefs are the snapshot's chunks in order (format 2).
	ChunkRefs []ChunkRef `json:"chunk_refs,omitempty"`
	// UploadedChunks and UploadedBytes (stored bytes) are what the Put of the snapshot
	// uploaded; ReusedChunks is how many of its chunks were in the bucket already (an
	// earlier snapshot's, unchanged since), or came twice.
	UploadedChunks int   `json:"uploaded_chunks,omitempty"`
	UploadedBytes  int64 `json:"uploaded_bytes,omitempty"`
	ReusedChunks   int   `json:"reused_chunks,omitempty"`
}

// ChunkRef is a chunk of a snapshot: its object is "<deployment>/<partition>/chunks/<SHA256>".
type ChunkRef struct {
	// SHA256 is the hex SHA-256 of the chunk (uncompressed), which names its object.
	SHA256 string `json:"sha256"`
	// Bytes is the chunk's length, and StoredBytes its object's (compressed and framed).
	Bytes       int64 `json:"bytes"`
	StoredBytes int64 `json:"stored_bytes"`
}

// Snapshots is the bucket [SnapshotsBucket]. The snapshots of a (deployment, partition)
// are under "<deployment>/<partition>/": each has a manifest "<ID>.json" ([SnapshotMeta]),
// and its chunks are objects "chunks/<SHA-256 of the chunk>" that snapshots share. An ID
// begins with the zero-padded Seq and creation time, so that names sort oldest first.
// Safe for concurrent use.
//
// Chunk objects named by their content make snapshots incremental: state.Deployment's
// export cuts its chunks where the keys say, so the chunks of a key range that did not
// change since the last snapshot are the same, and Put uploads only the chunks the
// bucket lacks; the rest the manifest references. Each chunk is an object of its own (a
// codec byte, then the data: S2-compressed unless that does not pay, as changelog records
// are) so that Put holds one chunk at a time and Read two; the object store makes an
// object visible only once all of it was stored (its info is published last) and checks
// its digest on read. The manifest is written last, which makes the snapshot visible.
// [Snapshots.Prune] deletes a chunk once no kept manifest references it (and it is 10
// minutes old: chunkGrace).
//
// Snapshots of format 1 (before chunk objects: one data object "<ID>.snap" per snapshot,
// frames of codec byte, uvarint length and data after the magic "GSSNAP\x00\x01") are
// still read and pruned.
type Snapshots struct {
	os jetstream.ObjectStore
	st jetstream.Stream // the bucket's stream, for the delete markers (see remove)
	// grace is chunkGrace (shorter in tests).
	grace time.Duration
}

// OpenSnapshots ensures the object store [SnapshotsBucket] (file storage, replicas
// copies, 0 meaning [natsio.DefaultReplicas]; a bucket that exists is used as it is) and returns
// it.
func OpenSnapshots(ctx context.Context, js jetstream.JetStream, replicas int) (*Snapshots, error) {
	replicas = natsio.ReplicasFor(js, replicas)
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
		return nil, fmt.Errorf("natsio: opening object store %s: %w", cfg.Bucket, natsio.ExplainReplicas(err, replicas))
	}
	st, err := js.Stream(ctx, "OBJ_"+SnapshotsBucket)
	if err != nil {
		return nil, fmt.Errorf("natsio: opening object store %s: %w", cfg.Bucket, err)
	}
	return &Snapshots{os: obs, st: st, grace: chunkGrace}, nil
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
// Each chunk is uploaded as it comes, as the object named by its SHA-256, unless the
// bucket has that object already (an earlier snapshot's chunk: the upload is skipped and
// the chunk reused); then the manifest is written: until Put returns nil the snapshot is
// invisible to [Snapshots.Latest] and [Snapshots.List]. An upload that fails removes the
// chunks it uploaded (never those it reused); a process that dies midway leaves chunks no
// manifest references, which [Snapshots.Prune] removes.
func (s *Snapshots) Put(ctx context.Context, deployment string, partition int, m *SnapshotMeta, chunks func(yield func([]byte) error) error) (SnapshotMeta, error) {
	dir, err := snapshotDir(deployment, partition)
	if err != nil {
		return SnapshotMeta{}, err
	}
	m.Deployment, m.Partition, m.Format = deployment, partition, SnapshotFormat
	m.Chunks, m.Bytes, m.StoredBytes, m.ChunkRefs = 0, 0, 0, nil
	m.UploadedChunks, m.UploadedBytes, m.ReusedChunks = 0, 0, 0
	if m.CreatedAt.IsZero() {
		m.CreatedAt = time.Now().UTC()
	}

	// A chunk's upload runs to its end with a context that outlives ctx a little (the end
	// of ctx stops Put at the next chunk), so that the object store completes it, or
	// removes what it stored of it, and Put removes the chunks it uploaded, with a context
	// that still works.
	pctx, pcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer pcancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(putCleanup, pcancel) })
	defer stop()
	var uploaded []string // the chunk objects this Put stored
	fail := func(err error) (SnapshotMeta, error) {
		for _, name := range uploaded {
			s.deleteQuietly(pctx, name)
		}
		return SnapshotMeta{}, fmt.Errorf("natsio: putting a snapshot of %s: %w", dir, err)
	}

	seen := map[string]ChunkRef{} // by SHA256
	var frame []byte
	err = chunks(func(repr []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		sum := sha256.Sum256(repr)
		ref, ok := seen[string(sum[:])]
		switch {
		case ok:
			m.ReusedChunks++
		default:
			ref = ChunkRef{SHA256: hex.EncodeToString(sum[:]), Bytes: int64(len(repr))}
			name := dir + chunksDir + ref.SHA256
			info, err := s.os.GetInfo(ctx, name)
			if err == nil && !info.Deleted && info.Size > 0 {
				ref.StoredBytes = int64(info.Size)
				m.ReusedChunks++
				break
			}
			if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
				return fmt.Errorf("chunk %s: %w", name, err)
			}
			data, codec := encodeData(repr)
			c := frameRaw
			if codec == codecS2 {
				c = frameS2
			}
			frame = append(append(frame[:0], c), data...)
			if _, err := s.os.Put(pctx, jetstream.ObjectMeta{Name: name, Description: "groupstate snapshot chunk"}, bytes.NewReader(frame)); err != nil {
				return fmt.Errorf("chunk %s: %w", name, err)
			}
			uploaded = append(uploaded, name)
			ref.StoredBytes = int64(len(frame))
			m.UploadedChunks++
			m.UploadedBytes += ref.StoredBytes
		}
		seen[string(sum[:])] = ref
		m.ChunkRefs = append(m.ChunkRefs, ref)
		m.Chunks++
		m.Bytes += ref.Bytes
		m.StoredBytes += ref.StoredBytes
		return nil
	})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return fail(errors.Join(err, ctx.Err()))
	}
	m.ID = newSnapshotID(m.Seq, m.CreatedAt)
	body, _ := json.Marshal(*m)
	if _, err := s.os.Put(ctx, jetstream.ObjectMeta{Name: dir + m.ID + ".json", Description: "groupstate snapshot manifest"}, bytes.NewReader(body)); err != nil {
		return fail(fmt.Errorf("manifest %s: %w", m.ID, err))
	}
	return *m, nil
}

// deleteQuietly removes object name, best effort, within putCleanup.
func (s *Snapshots) deleteQuietly(ctx context.Context, name string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), putCleanup)
	defer cancel()
	_ = s.remove(dctx, name)
}

// remove deletes object name, then the delete marker the object store leaves of it (its
// info, marked deleted, on the name's meta subject, for ever): chunk objects have names
// of their own, one per chunk that ever was, so their markers would grow the bucket
// without bound. Only the marker goes, and the infos before it: an info published after
// it (the object put again meanwhile) stays.
func (s *Snapshots) remove(ctx context.Context, name string) error {
	if err := s.os.Delete(ctx, name); err != nil {
		return err
	}
	subj := "$O." + SnapshotsBucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name))
	msg, err := s.st.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("natsio: reading the delete marker of %s: %w", name, err)
	}
	var info jetstream.ObjectInfo
	if json.Unmarshal(msg.Data, &info) != nil || !info.Deleted {
		return nil // put again meanwhile
	}
	if err := s.st.Purge(ctx, jetstream.WithPurgeSubject(subj), jetstream.WithPurgeSequence(msg.Sequence+1)); err != nil {
		return fmt.Errorf("natsio: purging the delete marker of %s: %w", name, err)
	}
	return nil
}

// snapshotObjects are the objects of a partition's snapshots, each kind sorted by name.
type snapshotObjects struct {
	dir       string
	manifests []*jetstream.ObjectInfo // "<ID>.json"
	data      []*jetstream.ObjectInfo // "<ID>.snap" (format 1)
	chunks    []*jetstream.ObjectInfo // "chunks/<SHA256>"
}

// objects lists the objects of deployment's partition.
func (s *Snapshots) objects(ctx context.Context, deployment string, partition int) (snapshotObjects, error) {
	dir, err := snapshotDir(deployment, partition)
	if err != nil {
		return snapshotObjects{}, err
	}
	out := snapshotObjects{dir: dir}
	// The listing is a watch of the bucket: bounded, as a watch that is never served (a fresh
	// cluster) would otherwise wait as long as ctx lasts (see ListTimeout).
	lctx, cancel := context.WithTimeout(ctx, natsio.ListTimeout)
	defer cancel()
	infos, err := s.os.List(lctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return out, nil
	}
	if err != nil {
		return snapshotObjects{}, fmt.Errorf("natsio: listing snapshots: %w", err)
	}
	for _, info := range infos {
		rest, ok := strings.CutPrefix(info.Name, dir)
		if !ok || info.Deleted {
			continue
		}
		if h, ok := strings.CutPrefix(rest, chunksDir); ok {
			if validHash(h) {
				out.chunks = append(out.chunks, info)
			}
			continue
		}
		if strings.Contains(rest, "/") {
			continue
		}
		switch {
		case strings.HasSuffix(rest, ".json"):
			out.manifests = append(out.manifests, info)
		case strings.HasSuffix(rest, ".snap"):
			out.data = append(out.data, info)
		}
	}
	byName := func(a, b *jetstream.ObjectInfo) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(out.manifests, byName)
	slices.SortFunc(out.data, byName)
	slices.SortFunc(out.chunks, byName)
	return out, nil
}

// validHash tells whether h may be a chunk's SHA256 (64 lowercase hex digits).
func validHash(h string) bool {
	if len(h) != 2*sha256.Size {
		return false
	}
	for _, c := range []byte(h) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
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
	objs, err := s.objects(ctx, deployment, partition)
	if err != nil {
		return SnapshotMeta{}, false, err
	}
	for i := len(objs.manifests) - 1; i >= 0; i-- {
		m, err := s.manifest(ctx, objs.dir, objs.manifests[i].Name, deployment, partition)
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
	objs, err := s.objects(ctx, deployment, partition)
	if err != nil {
		return nil, err
	}
	var out []SnapshotMeta
	for i := len(objs.manifests) - 1; i >= 0; i-- {
		m, err := s.manifest(ctx, objs.dir, objs.manifests[i].Name, deployment, partition)
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
// reading them from the bucket; a chunk is only valid during the call. An error from fn
// stops the read and is returned. Each chunk is checked against m (its SHA-256, which
// names it, and its lengths) and against its object's digest ([ErrCorruptSnapshot]), but
// fn may have been called with chunks before a corruption in a later one shows: a restore
// that fails must start again (the first chunk of an export begins with a range deletion
// of the keyspace). A snapshot pruned before or during the read (a chunk missing) fails
// with [ErrSnapshotNotFound]. A snapshot of format 1 is read from its data object.
func (s *Snapshots) Read(ctx context.Context, deployment string, partition int, m SnapshotMeta, fn func(repr []byte) error) error {
	dir, err := snapshotDir(deployment, partition)
	if err != nil {
		return err
	}
	if m.Deployment != deployment || m.Partition != partition || !validID(m.ID) {
		return fmt.Errorf("%w: manifest of %s/%d/%s read as %s", ErrInvalidSnapshot, m.Deployment, m.Partition, m.ID, dir)
	}
	switch m.Format {
	case 0, 1:
		return s.readV1(ctx, dir, m, fn)
	case SnapshotFormat:
	default:
		return fmt.Errorf("%w: %s%s: format %d", ErrCorruptSnapshot, dir, m.ID, m.Format)
	}
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s%s: %s", ErrCorruptSnapshot, dir, m.ID, fmt.Sprintf(format, args...))
	}
	total := int64(0)
	for i, ref := range m.ChunkRefs {
		if !validHash(ref.SHA256) || ref.StoredBytes < 1 || ref.StoredBytes > maxFrame || ref.Bytes < 0 {
			return corrupt("chunk %d: %+v", i, ref)
		}
		total += ref.Bytes
	}
	if len(m.ChunkRefs) != m.Chunks || total != m.Bytes {
		return corrupt("%d chunks of %d bytes, manifest says %d of %d", len(m.ChunkRefs), total, m.Chunks, m.Bytes)
	}
	// The next chunk is read while fn applies this one: a restore's time is the
	// application's, not the sum of both.
	type slot struct {
		stored bytes.Buffer
		raw    []byte
		repr   []byte
		err    error
	}
	free, full := make(chan *slot, 2), make(chan *slot, 1)
	free <- new(slot)
	free <- new(slot)
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		defer close(full)
		for i, ref := range m.ChunkRefs {
			var sl *slot
			select {
			case sl = <-free:
			case <-rctx.Done():
				return
			}
			sl.repr, sl.err = s.readChunkRef(rctx, dir, i, ref, &sl.stored, &sl.raw, corrupt)
			select {
			case full <- sl:
			case <-rctx.Done():
				return
			}
			if sl.err != nil {
				return
			}
		}
	})
	n := 0
	for sl := range full {
		if sl.err != nil {
			return sl.err
		}
		if err := fn(sl.repr); err != nil {
			return err
		}
		n++
		free <- sl
	}
	if n < len(m.ChunkRefs) {
		return fmt.Errorf("natsio: reading snapshot %s%s: %w", dir, m.ID, ctx.Err()) // ended with the context
	}
	return nil
}

// readChunkRef reads chunk i of a snapshot of dir, ref, into stored (and raw when it is
// compressed), checks it against ref, and returns it.
//
// A chunk whose content is not what its name says (its bytes do not match the SHA-256 that
// names it or the object's digest, or do not decode) is deleted: no later snapshot reuses it then, and
// the next one that holds that content uploads it again. (A truncated read is left alone: it
// may be the connection's fault, not the object's.)
func (s *Snapshots) readChunkRef(ctx context.Context, dir string, i int, ref ChunkRef, stored *bytes.Buffer, raw *[]byte, corrupt func(string, ...any) error) (repr []byte, err error) {
	name := dir + chunksDir + ref.SHA256
	defer func() {
		if errors.Is(err, errChunkContent) {
			if derr := s.os.Delete(ctx, name); derr != nil && !errors.Is(derr, jetstream.ErrObjectNotFound) {
				err = fmt.Errorf("%w (deleting it failed: %v)", err, derr)
			}
		}
	}()
	if err := s.readChunk(ctx, name, stored); err != nil {
		return nil, err
	}
	content := func(format string, args ...any) error {
		return fmt.Errorf("%w (%w)", corrupt(format, args...), errChunkContent)
	}
	b := stored.Bytes()
	if len(b) == 0 {
		return nil, content("chunk %d (%s): empty", i, ref.SHA256)
	}
	repr = b[1:]
	switch b[0] {
	case frameRaw:
	case frameS2:
		var err error
		if *raw, err = s2.Decode((*raw)[:cap(*raw)], repr); err != nil {
			return nil, content("chunk %d (%s): %v", i, ref.SHA256, err)
		}
		repr = *raw
	default:
		return nil, content("chunk %d (%s): codec %d", i, ref.SHA256, b[0])
	}
	if sum := sha256.Sum256(repr); hex.EncodeToString(sum[:]) != ref.SHA256 {
		return nil, content("chunk %d (%s): %d bytes of SHA-256 %x", i, ref.SHA256, len(repr), sum)
	}
	// The content is what the name says; a size other than the manifest's is the manifest's
	// fault, not the chunk's.
	if int64(stored.Len()) != ref.StoredBytes {
		return nil, corrupt("chunk %d (%s): %d bytes stored, manifest says %d", i, ref.SHA256, stored.Len(), ref.StoredBytes)
	}
	if int64(len(repr)) != ref.Bytes {
		return nil, corrupt("chunk %d (%s): %d bytes, manifest says %d", i, ref.SHA256, len(repr), ref.Bytes)
	}
	return repr, nil
}

// errChunkContent marks an [ErrCorruptSnapshot] of a chunk object whose stored content is
// wrong (see readChunkRef), not merely unreadable.
var errChunkContent = errors.New("its content is wrong; the chunk object was deleted")

// readChunk reads chunk object name into buf (emptied first).
func (s *Snapshots) readChunk(ctx context.Context, name string, buf *bytes.Buffer) error {
	buf.Reset()
	obj, err := s.os.Get(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("%w: chunk %s", ErrSnapshotNotFound, name)
	}
	if err != nil {
		return fmt.Errorf("natsio: reading snapshot chunk %s: %w", name, err)
	}
	defer obj.Close()
	if info, err := obj.Info(); err == nil && info.Size <= maxFrame {
		buf.Grow(int(info.Size))
	}
	// Reading to the end checks the digest.
	_, err = buf.ReadFrom(obj)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrDigestMismatch):
		return fmt.Errorf("%w: chunk %s: %v (%w)", ErrCorruptSnapshot, name, err, errChunkContent)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: chunk %s: truncated", ErrCorruptSnapshot, name)
	}
	return fmt.Errorf("natsio: reading snapshot chunk %s: %w", name, err)
}

// readV1 reads the snapshot m of format 1, of dir: one data object of frames.
func (s *Snapshots) readV1(ctx context.Context, dir string, m SnapshotMeta, fn func(repr []byte) error) error {
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
// all): first the manifests of the others, so that a snapshot is never visible without
// its chunks, then the chunk objects no kept manifest references. A restore reading a
// snapshot Prune deletes fails with [ErrSnapshotNotFound].
//
// A chunk stored less than chunkGrace ago is kept even so: it may be one of an upload in
// progress, whose manifest is not written yet. Snapshots of a partition are taken one at
// a time by its lease owner, which prunes after each Put, so that upload is a deposed
// owner's, or the new owner's while a deposed owner prunes. A Put reusing a chunk that
// only a dropped snapshot referenced (the state went back to what it was two snapshots
// ago) while another runtime's Prune deletes it writes a snapshot whose Read fails with
// [ErrSnapshotNotFound]: the restore goes on with the older one, and the next Put
// uploads the chunk again.
//
// Of format 1, Prune deletes the data objects of dropped snapshots, and those without a
// manifest (uploads that died between the two objects) that are older than the newest
// kept snapshot. Keep 0 deletes the chunks of an upload in progress too (its Put then
// writes a manifest whose Read fails): use it when the deployment's changelog is gone,
// whose sequences the snapshots refer to.
func (s *Snapshots) Prune(ctx context.Context, deployment string, partition int, keep int) error {
	objs, err := s.objects(ctx, deployment, partition)
	if err != nil {
		return err
	}
	dir, manifests := objs.dir, objs.manifests
	keep = max(keep, 0)
	dropped := manifests[:max(len(manifests)-keep, 0)]
	kept := map[string]bool{}
	var oldestKept string // ID
	for _, info := range manifests[len(dropped):] {
		id := strings.TrimSuffix(strings.TrimPrefix(info.Name, dir), ".json")
		kept[id] = true
		if oldestKept == "" {
			oldestKept = id
		}
	}
	var errs []error
	del := func(name string) {
		if err := s.remove(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			errs = append(errs, fmt.Errorf("natsio: pruning snapshot object %s: %w", name, err))
		}
	}
	for _, info := range dropped {
		del(info.Name)
	}
	if len(errs) > 0 {
		return errors.Join(errs...) // keep the data of manifests that may still be there
	}
	for _, info := range objs.data {
		id := strings.TrimSuffix(strings.TrimPrefix(info.Name, dir), ".snap")
		// A data object newer than the oldest kept snapshot, and not one of them, may be an
		// upload in progress.
		if !kept[id] && (keep == 0 || id < oldestKept) {
			del(info.Name)
		}
	}
	// The chunks the kept snapshots reference: a manifest that cannot be read keeps them all.
	referenced := map[string]bool{}
	for _, info := range manifests[len(dropped):] {
		m, err := s.manifest(ctx, dir, info.Name, deployment, partition)
		if errors.Is(err, ErrSnapshotNotFound) {
			continue // pruned meanwhile by another runtime
		}
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		for _, ref := range m.ChunkRefs {
			referenced[ref.SHA256] = true
		}
	}
	for _, info := range objs.chunks {
		h := strings.TrimPrefix(info.Name, dir+chunksDir)
		if !referenced[h] && (keep == 0 || time.Since(info.ModTime) >= s.grace) {
			del(info.Name)
		}
	}
	return errors.Join(errs...)
}
