// Package state is groupstate's durable state store, built on Pebble.
//
// One Store holds the state of every deployment of a runtime. Each
// deployment gets its own keyspace (see Deployment), holding:
//
//   - the state entry of every group key: its value and its timeout;
//   - a timer index, ordered by timeout, so that expired keys are found by
//     a range scan instead of a scan of all keys;
//   - the progress record: the id of the last committed micro-batch, the
//     watermark, the input position and the key counters;
//   - the transactional outbox: the rows a batch emitted that were not yet
//     delivered (acknowledged with Deployment.AckOutbox);
//   - for a deployment of an ABI v2 (transformWithState) handler, its state
//     variables instead of state entries: a catalog of the declared variables,
//     each key's values, lists and maps, a key's many timers, and a TTL
//     index (see "State variables" below).
//
// A micro-batch writes all of these in one Batch, committed with one
// synced Pebble batch: state changes, timers, progress and outputs become
// durable together or not at all (or replicated, see below).
//
// State lives on disk; the Go heap holds only Pebble's block cache (see
// Options.CacheSize), memtables, the hot-state cache (a bounded copy of
// recently read or committed entries, see Options.StateCacheSize), and the
// contents of the batch being built.
//
// # The hot-state cache
//
// Deployment.Get is served from a write-through cache when it can. The
// cache holds only what is committed: a Batch's Sets enter it after its
// Commit succeeded, a failed Commit (or a store failure, or Drop) empties
// it, and a Store starts with it empty, so reopening after a failure reads
// from disk. A read that missed fills it only when no commit ran since the
// read began. Expired, Keys, Progress and Outbox always read Pebble.
//
// A KeyTxn's point reads of a value variable's value, a list's or map's
// meta record, the key's record and the key's per-key timer entries (does
// the key have a timer at ts? asked by TimerRegister and TimerDelete, and
// only when the key's record counts a timer) go through the same cache,
// under a name of the deployment's own apart from its state entries: first the batch's
// own writes of those records (an overlay beside its indexed batch), then
// the cache, then Pebble. Batch.Commit stores the overlay in the cache with
// the commit; a batch that range-deleted a whole variable (a dropped
// declaration) reads through its indexed batch and empties the cache when
// it commits. List elements, map entries, a key's list of timers, the timer
// index and the TTL index are read through the batch's indexed batch, as
// before.
//
// # Replication
//
// A deployment's writes can be replicated through a log kept elsewhere (a
// changelog stream), so that another runtime can restore the deployment or
// follow it as a standby. With a Replicator set (Deployment.SetReplicator),
// every write of the deployment (Batch.Commit, AckOutbox, Drop) is one Pebble
// batch whose representation (pebble.Batch.Repr, in a ReplicatedWrite) is
// handed to Replicator.Replicate before anything is applied locally: the log
// is the commit point. If Replicate fails, nothing is applied (not even to
// the hot-state cache) and the write returns an error wrapping
// ErrReplication; a Commit may then be retried with the same batch id. If it
// succeeds, the very same batch is committed locally with pebble.NoSync: a
// crash may lose the last local writes, and the runtime catches up from the
// log before it goes on. SyncAcks does nothing then.
//
// Deployment.ApplyReplicated applies a write taken from the log to the
// deployment of the same name in any Store: applying a deployment's writes in
// log order to an empty keyspace yields the same keys and values, so the same
// reads, as the source. It refuses, whole, a write holding a key outside the
// deployment's keyspace (ErrForeignWrite) or one it cannot decode
// (ErrCorrupt), updates the hot-state cache from the entries and variable
// records written (a range deletion of state entries or key records, from
// Drop or an export, empties it), and commits with pebble.NoSync too. Every
// write sets or deletes whole keys, so applying again writes already applied,
// from any one of them on and in order, ends in the same state: after a crash
// a standby may resume from any write at or before the first it lost.
//
// Deployment.Export (and ExportAt) copies a deployment's whole keyspace at one point
// between two of its writes, while writes go on, as a sequence of Pebble batch reprs
// that ApplyReplicated accepts too: the first begins with a range deletion of the
// keyspace, then come Sets in key order, the progress record last. Applying them in
// order to any keyspace of the same name yields exactly the copy, so a snapshot of the
// export plus the log written after its point restores the deployment. ExportAt runs a
// callback while no write of the deployment can start, in which the caller reads its
// Replicator's position in the log: the point the copy corresponds to.
//
// A write's operations, as its Repr holds them: Batch.Commit has the timer
// index changes, the entries, the deletions of the open batch's skipped
// timeouts when it closes, the outbox entries, the state-variable writes (in
// the order they were made, range deletions of cleared lists and maps and of
// dropped variables included) and the progress record, as Sets and Deletes; AckOutbox has Deletes of outbox entries; Drop has one
// DeleteRange from the deployment prefix to its end.
//
// # Key layout
//
// All integers are big-endian so that byte order is numeric order.
//
//	"\x00format"                               -> u32 format version (FormatVersion, 2)
//	"\x00id"                                   -> the store's identity (Store.ID)
//	'd' u8(len(name)) name                     deployment prefix P
//	P 'v' key                                  -> entry: u8 flags | i64 timeout | value
//	P 't' u64(timeout ^ 1<<63) key             -> empty (timer index; also an ABI v2 key's timers)
//	P 'm'                                      -> progress record
//	P 'o' u64(batch id) u32(seq)               -> outbox entry
//	P 's' key                                  -> empty (a key the open batch must not time out)
//	P 'i'                                      -> empty (the initial state was applied)
//	P 'n'                                      -> u8 timeout mode (Batch.SetTimeMode)
//	P 'c'                                      -> variable catalog
//	P 'x' u32(var) uvarint(len(key)) key 0x00  -> a value variable's item, or a list's or map's meta record
//	P 'x' u32(var) uvarint(len(key)) key 0x01 u64(seq)
//	                                           -> list element: item
//	P 'x' u32(var) uvarint(len(key)) key 0x01 map key
//	                                           -> map entry: item
//	P 'e' u64(expiry ^ 1<<63) u32(var) uvarint(len(key)) key 0x00|0x01 ...
//	                                           -> empty (TTL index: the item key after P 'x')
//	P 'k' key                                  -> key record: uvarint variables | uvarint timers
//	P 'j' uvarint(len(key)) key u64(ts ^ 1<<63) -> empty (the key's timers)
//
// Entry flags: bit 0 = has value, bit 1 = has timeout. The timer index
// stores the timeout with its sign bit flipped, so negative timestamps sort
// before positive ones and ties are ordered by key bytes.
//
// The progress record is u8 version (1) | u64 batch id | i64 watermark |
// u64 position | i64 keys | i64 timer keys. While a micro-batch committed in
// chunks is open (Progress.Open) it is version 2: version 1's fields (after
// the version byte 2), then i64 processing time | i64 next watermark | i64
// timeout and uvarint len(key) key of the timer-index position where the
// batch goes on. Without an open batch it is written in version 1, so a
// runtime that predates open batches reads it.
// Version 3 (once a generation or the input stream's identity is recorded)
// is version 1's fields, u64 generation | u64 generation from | i64 input
// created | u8 open (0 or 1), then version 2's open-batch part when open is
// 1. Version 4 (only once Progress.HasMaxEvent is set: a partition of a
// deployment split into partitions, under event time) is version 3 with
// i64 max event time before the open byte.
//
// An outbox entry (the value; its id is the key) is
//
//	u8 kind | u8 flags | uvarint len(key) key
//	| [uvarint len(reason) reason]      if flags bit 1
//	| [uvarint len(error) error]        if flags bit 2
//	| [uvarint len(subject) subject]    if flags bit 3
//	| [uvarint sequence]                if flags bit 4
//	| payload                           the rest of the value
//
// Flags: bit 0 = TimeoutCall; bits 1 to 4 say that Reason, Error, Subject
// and Sequence are present, which the encoder sets exactly when they are
// non-empty (non-zero), so an output costs two bytes besides key and
// payload. Other bits, and a present field that is empty (zero), are
// corrupt.
//
// # State variables
//
// A deployment of an ABI v2 handler declares named variables (VarDecl) with
// Batch.DeclareVars, and its group calls read and write them through a
// KeyTxn (Batch.Key). The sections above the v1 ones hold them:
//
// The catalog is u8 version (1) | u32 next id | uvarint n | n × (u32 id | u8
// kind | i64 TTL | uvarint len(name) name), ordered by id. A variable keeps
// its id (from 1) for as long as it is declared; ids are never reused, so a
// variable dropped and declared again starts empty.
//
// Data keys begin with the variable's id, then the group key, length-prefixed
// (uvarint lengths are prefix-free, so the keys of one group key are exactly
// those with its prefix): a dropped variable is one range deletion, and a
// cleared list or map is one range deletion of the group key's prefix (point
// deletions of its items when it has at most 64: range tombstones slow reads
// down until compacted, which a handler that replaces a short list on every
// call would pay for with every read). An
// item (a value, a list element, a map value) is u8 flags | [i64 expiry] |
// bytes, flags bit 0 saying that the expiry is there (the variable had a
// TTL when the item was written: expiry = processing time + TTL; the item is
// invisible from expiry on). A list's or map's meta record is u8 flags | u64
// next | u64 count | i64 max expiry: next is the sequence number of a list's
// next element, count the number of items stored, max expiry bounds every
// item's (math.MaxInt64 when one never expires), and flags bit 0 (maps only)
// says that the item holding the max expiry may be gone, so that
// MapExists scans. A collection without items has no meta record. Appending
// to a list or setting a map entry reads the meta record (once per
// transaction) and the entry (for a map), and writes the item and the meta
// record: never the rest of the collection. Dropping a list's first n
// elements (KeyTxn.ListDropFirst) reads their keys and deletes them.
//
// The TTL index has an entry per item written with an expiry; Batch.ExpireTTL
// scans it up to the processing time, removes the items whose expiry is
// still the index's (the others were rewritten or deleted since: their
// entries are stale and just deleted) and maintains the meta and key records.
//
// A key's timers are in the timer index ('t', one key per (timestamp, key),
// so Deployment.Expired, ExpiredFrom and Batch.ExpiredTimers scan them in
// order) and in the per-key index 'j', for KeyTxn.Timers. The key record
// counts the key's variables holding items (expired ones not yet removed
// included) and its timers; a key without either has none. Its changes keep
// Progress.Keys (keys with a record) and Progress.TimerKeys (keys with a
// timer) exact, and Deployment.VarKeys lists the keys. A KeyTxn trusts it: a
// read that the overlay and the cache cannot answer loads the key's record
// first, and a key whose record counts no variable (or timer) is not read
// further. KeyTxn.Continue begins a transaction that knows what a committed
// one of the same key read (ABI v2: a group's result ops after its call).
//
// A Batch's variable writes go to a Pebble indexed batch, through which the
// transactions read (their own writes, those of the batch's earlier
// transactions, then the store), and which Commit appends to the batch's
// write: they are replicated, exported and dropped like the rest of the
// keyspace. A range deletion in section 'x' does not touch the hot-state
// cache, which holds v1 entries only. The v1 sections' encodings are
// unchanged, and FormatVersion too: the new sections exist only in the
// keyspaces of ABI v2 deployments, which a runtime predating them cannot run
// (but its ApplyReplicated refuses their writes as corrupt).
//
// # Format versions
//
// The "\x00format" key holds the version of this layout. Open writes it on
// a new store, refuses a store with a version other than 1 and
// FormatVersion, or a non-empty database without one (ErrFormatVersion),
// and migrates version 1 in one synced Pebble batch before it returns.
// Version 1 differed only in the outbox value: u8 kind | uvarint len(key)
// key | uvarint n headers | n × (uvarint len(name) name uvarint len(value)
// value) | payload, the headers being the engine's NATS headers
// ("Groupstate-Reason", "Groupstate-Error", "Groupstate-Subject",
// "Groupstate-Sequence" in decimal, "Groupstate-Timeout-Call" = "true"). The
// migration turns them into the fields above and drops any other header. A
// read-only Open of a version-1 store fails with ErrFormatVersion.
//
// The deployment name is length-prefixed, so deployment "a" (prefix
// "d\x01a") never sees the keys of deployment "ab" (prefix "d\x02ab").
//
// # Concurrency
//
// A Store and its Deployment handles are safe for concurrent use. The
// caller guarantees a single writer (Batch.Commit, AckOutbox, Drop,
// ApplyReplicated) per deployment; the store also serializes these writes, per
// deployment, with a lock that ExportAt takes for the moment of its
// snapshot. Reads (Get, Expired, Keys, Progress, Outbox, Export, Vars,
// CheckVars, VarKeys, KeyVars) may run concurrently with the writer and
// observe a consistent snapshot taken when the call starts. A Batch and its
// KeyTxn are used by one goroutine: the writer's.
//
// # Failures
//
// Pebble treats a failed WAL write or sync as fatal: the batch may already
// be applied in memory. When Commit fails that way the Store becomes
// failed: every later call returns an error wrapping ErrFailed. Close it
// and Open the directory again; Deployment.Progress then tells whether the
// batch made it to disk (its BatchID) or not.
package state
