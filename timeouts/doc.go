// Package timeouts holds groupstate's timeout rules and its event-time watermark
// tracker: the parts of Spark's flatMapGroupsWithState semantics (GroupStateImpl and
// FlatMapGroupsWithStateExec) that decide which rows are late, which timeouts fire, what a
// handler may ask for, and how the watermark advances.
//
// Everything here is pure: no I/O, no goroutines, and no wall clock except through the
// [Clock] interface, so the rules are unit-testable without NATS or WebAssembly. Times are
// epoch milliseconds (int64), as on the wire ABI.
//
// Per micro-batch, with batch processing time T and watermark W (docs/semantics.md, "A
// micro-batch"):
//
//   - A row is late, and dropped, when event-time timeouts and a watermark are configured
//     and its event time is <= W ([Rules.DropsLate], [IsLate]).
//   - A timeout ts fires when ts < T (processing time) or ts < W (event time), strictly
//     ([Rules.ExpiryBound], [Fires]).
//   - A handler may set a duration d > 0 only with processing-time timeouts (timeout T+d)
//     and a timestamp ts > 0 with ts >= W only with event-time timeouts
//     ([Rules.CheckTimeoutDuration], [Rules.CheckTimeoutTimestamp], [Rules.CheckTimeoutResult]).
//   - W_next = max(W, max event time seen in the batch - delay), monotonic, starting at 0
//     ([Watermark]).
//
// Errors are package-prefixed sentinels ("timeouts: ...") wrapped with the offending values;
// match them with [errors.Is].
package timeouts
