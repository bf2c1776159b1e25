/*
 * adjoin, in C: the stream-stream join sample (ABI v2, a deployment with two inputs). Joins ad
 * impressions with the clicks on them, a click at c matching an impression at i of the same ad
 * when i <= c <= i + within, emits each pair once, and emits an impression that no click
 * matched with click_ts null once the watermark has passed i + within (a left outer join).
 * Behaves exactly like samples/adjoin/go (../README.md has the rules and the scenario).
 *
 * Build (from the repository root; `make samples-c` runs the same command):
 *
 *   clang --target=wasm32-wasi --sysroot=/usr -mexec-model=reactor -O2 -mbulk-memory -g0 \
 *     -Wall -Werror -ffile-prefix-map=$PWD/= -Wl,--stack-first -Wl,--strip-all -Isdk/c \
 *     -DGS_ABI_V2 -o samples/adjoin/c/adjoin.wasm samples/adjoin/c/adjoin.c
 */
#define GROUPSTATE_IMPLEMENTATION
#include "groupstate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The spec's inputs. */
#define IMPRESSIONS "impressions"
#define CLICKS "clicks"

static gs_list_var impressions_var; /* {"ts": i, "matched": bool} per buffered impression */
static gs_list_var clicks_var;      /* the buffered clicks' times */
static int64_t within_ms;

static int init(gs_config *c) {
	int64_t ms;
	int rc = gs_config_duration_ms(c, "within", &ms); /* truncated, as Go's Duration.Milliseconds */
	if (rc != GS_OK && rc != GS_ERR_NOT_FOUND) return rc;
	if (rc == GS_ERR_NOT_FOUND || ms <= 0) return gs_config_fail(c, "adjoin: config within must be a positive duration");
	within_ms = ms;
	size_t n = gs_config_input_count(c);
	bool imps = false, clicks = false;
	for (size_t i = 0; i < n; i++) {
		imps = imps || !strcmp(gs_config_input(c, i).ptr, IMPRESSIONS);
		clicks = clicks || !strcmp(gs_config_input(c, i).ptr, CLICKS);
	}
	if (n != 2 || !imps || !clicks) {
		/* as Go's %q prints a []string: ["a" "b"] (input names need no escapes) */
		static char msg[16 * 36 + 96];
		size_t at = (size_t)snprintf(msg, sizeof msg, "adjoin: the spec's inputs must be %s and %s, got [", IMPRESSIONS, CLICKS);
		for (size_t i = 0; i < n && at < sizeof msg; i++)
			at += (size_t)snprintf(msg + at, sizeof msg - at, "%s\"%s\"", i ? " " : "", gs_config_input(c, i).ptr);
		if (at < sizeof msg) snprintf(msg + at, sizeof msg - at, "]");
		return gs_config_fail(c, msg);
	}
	impressions_var = gs_list_state("impressions", 0);
	clicks_var = gs_list_state("clicks", 0);
	return GS_OK;
}

/* ---- the buffered rows: both lists, read at the start of a call and written at its end ---- */

typedef struct {
	int64_t ts;
	bool matched;
} impression;

static impression *imps;
static int64_t *clicks;
static size_t nimps, nclicks, cap_imps, cap_clicks;

/* Makes room for one more element of a growable array; false when out of memory. */
static bool grow(void **p, size_t *cap, size_t n, size_t size) {
	if (n < *cap) return true;
	size_t c = *cap ? *cap * 2 : 16;
	void *q = realloc(*p, c * size);
	if (!q) return false;
	*p = q, *cap = c;
	return true;
}

/* Wrapping int64 addition, as in Go. */
static int64_t add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }

/* Reads both lists. */
static int load(gs_group *g) {
	gs_list_iter it;
	gs_slice e;
	int rc;
	nimps = nclicks = 0;
	gs_list_iter_begin(g, impressions_var, &it);
	while ((rc = gs_list_iter_next(&it, &e)) == 1) {
		impression im = {0, false};
		int r1 = gs_json_get_int64(e.ptr, e.len, "ts", &im.ts), r2 = gs_json_get_bool(e.ptr, e.len, "matched", &im.matched);
		if ((r1 != GS_OK && r1 != GS_ERR_NOT_FOUND) || (r2 != GS_OK && r2 != GS_ERR_NOT_FOUND))
			return gs_fail(g, "groupstate: decoding state variable impressions: want {\"ts\": an integer, \"matched\": a boolean}");
		if (!grow((void **)&imps, &cap_imps, nimps, sizeof *imps)) return gs_fail(g, "adjoin: out of memory");
		imps[nimps++] = im;
	}
	if (rc < 0) return rc;
	gs_list_iter_begin(g, clicks_var, &it);
	while ((rc = gs_list_iter_next(&it, &e)) == 1) {
		int64_t c;
		if (gs_json_int64(e, &c) != GS_OK) return gs_fail(g, "groupstate: decoding state variable clicks: want an integer");
		if (!grow((void **)&clicks, &cap_clicks, nclicks, sizeof *clicks)) return gs_fail(g, "adjoin: out of memory");
		clicks[nclicks++] = c;
	}
	return rc < 0 ? rc : GS_OK;
}

/* Writes list l back when the call changed it, its n elements encoded by enc: the elements
 * from its first `kept` on are appended when the ones before are unchanged (changed false: the
 * common case of a data call, one op per row), else the list is written whole; an empty list
 * is cleared, so a key whose rows have all been evicted holds no state. */
static int store(gs_group *g, gs_list_var l, size_t n, size_t kept, bool changed, int (*enc)(gs_group *, size_t, gs_slice *)) {
	if (n == 0) return kept > 0 || changed ? gs_list_clear(g, l) : GS_OK;
	size_t from = changed ? 0 : kept;
	if (from >= n) return GS_OK;
	gs_slice *els = gs_arena_alloc((n - from) * sizeof *els);
	if (!els) return gs_fail(g, "adjoin: out of memory");
	int rc;
	for (size_t i = from; i < n; i++)
		if ((rc = enc(g, i, &els[i - from]))) return rc;
	return changed ? gs_list_put(g, l, els, n) : gs_list_append_all(g, l, els, n - from);
}

/* Encodes imps[i]: {"ts", "matched"}. */
static int enc_impression(gs_group *g, size_t i, gs_slice *out) {
	(void)g;
	gs_jw w;
	gs_jw_begin(&w);
	gs_jw_int64(&w, "ts", imps[i].ts);
	gs_jw_bool(&w, "matched", imps[i].matched);
	return gs_jw_end(&w, out);
}

/* Encodes clicks[i]: a number. */
static int enc_click(gs_group *g, size_t i, gs_slice *out) {
	char *d = gs_arena_alloc(21);
	if (!d) return gs_fail(g, "adjoin: out of memory");
	*out = (gs_slice){d, (size_t)snprintf(d, 21, "%lld", (long long)clicks[i])};
	return GS_OK;
}

/* Emits {"ad_id", "impression_ts", "click_ts"}, click_ts null for an unmatched impression. */
static int emit(gs_group *g, int64_t impression_ts, const int64_t *click_ts) {
	gs_slice ad = gs_key_json(g);
	gs_jw w;
	gs_jw_begin(&w);
	gs_jw_raw(&w, "ad_id", ad.ptr, ad.len);
	gs_jw_int64(&w, "impression_ts", impression_ts);
	if (click_ts) gs_jw_int64(&w, "click_ts", *click_ts);
	else gs_jw_null(&w, "click_ts");
	return gs_emit_jw(g, &w);
}

/* A JSON number's value as Go's int64(float64) gives it: truncated (saturated out of range). */
static int64_t to_int64(double d) {
	if (d >= 9223372036854775808.0) return INT64_MAX;
	if (d < -9223372036854775808.0) return INT64_MIN;
	return (int64_t)d;
}

static bool is_ts(gs_slice name_tok) { /* "ts", ASCII case-insensitive, as Go's field names */
	char *d = gs_arena_alloc(name_tok.len);
	size_t n;
	if (!d || gs_json_decode_string(name_tok, d, &n) != GS_OK || n != 2) return false;
	return (d[0] | 32) == 't' && (d[1] | 32) == 's';
}

/* A row's ts as the Go sample reads it: field ts (the last one whose name matches), a JSON
 * number in epoch milliseconds, truncated. GS_OK, or the call failed with the Go sample's
 * message: "adjoin: row N (INPUT): no ts" or "...: ts VALUE is not a number". */
static int row_ts(gs_group *g, size_t n, gs_slice input, gs_slice row, int64_t *ts) {
	gs_json_iter it = gs_json_iter_begin(row.ptr, row.len);
	gs_slice k, v, found = {NULL, 0};
	int rc;
	while ((rc = gs_json_iter_next(&it, &k, &v)) == 1)
		if (is_ts(k)) found = v;
	double d;
	size_t cap = 64 + input.len + found.len;
	char *msg = gs_arena_alloc(cap);
	if (!msg) return gs_fail(g, "adjoin: out of memory");
	if (rc < 0) snprintf(msg, cap, "adjoin: row %zu (%s): not a JSON object", n, input.ptr);
	else if (!found.ptr) snprintf(msg, cap, "adjoin: row %zu (%s): no ts", n, input.ptr);
	else if ((found.ptr[0] == '-' || (found.ptr[0] >= '0' && found.ptr[0] <= '9')) && gs_json_double(found, &d) == GS_OK && isfinite(d)) {
		*ts = to_int64(d);
		return GS_OK;
	} else snprintf(msg, cap, "adjoin: row %zu (%s): ts %.*s is not a number", n, input.ptr, (int)found.len, found.ptr);
	return gs_fail(g, msg);
}

/* ---- the processor --------------------------------------------------------------------- */

/* Joins each row, in order, with the other side's buffered rows, then buffers it until the
 * watermark passes the last time it could match: an impression at i until i + within, a click
 * at c until c. */
static int on_rows(gs_group *g) {
	int rc;
	if ((rc = load(g))) return rc;
	size_t buffered = nimps, buffered_clicks = nclicks; /* the elements in the lists already */
	bool marked = false;                                /* one of them was matched by a click of this call */
	gs_rows it = gs_rows_begin(g);
	gs_slice row;
	char msg[96];
	for (size_t n = 0; gs_rows_next(&it, &row); n++) {
		gs_slice input = gs_rows_input(&it);
		int64_t ts;
		if ((rc = row_ts(g, n, input, row, &ts))) return rc;
		if (!strcmp(input.ptr, IMPRESSIONS)) {
			bool matched = false;
			for (size_t k = 0; k < nclicks; k++) {
				if (ts <= clicks[k] && clicks[k] <= add(ts, within_ms)) {
					if ((rc = emit(g, ts, &clicks[k]))) return rc;
					matched = true;
				}
			}
			if (!grow((void **)&imps, &cap_imps, nimps, sizeof *imps)) return gs_fail(g, "adjoin: out of memory");
			imps[nimps++] = (impression){ts, matched};
			if ((rc = gs_timer_register(g, add(ts, within_ms)))) return rc;
		} else if (!strcmp(input.ptr, CLICKS)) {
			for (size_t k = 0; k < nimps; k++) {
				if (imps[k].ts <= ts && ts <= add(imps[k].ts, within_ms)) {
					if ((rc = emit(g, imps[k].ts, &ts))) return rc;
					marked = marked || (k < buffered && !imps[k].matched);
					imps[k].matched = true;
				}
			}
			if (!grow((void **)&clicks, &cap_clicks, nclicks, sizeof *clicks)) return gs_fail(g, "adjoin: out of memory");
			clicks[nclicks++] = ts;
			if ((rc = gs_timer_register(g, ts))) return rc;
		} else {
			snprintf(msg, sizeof msg, "adjoin: row %zu comes from unknown input \"%s\"", n, input.ptr);
			return gs_fail(g, msg);
		}
	}
	if ((rc = store(g, impressions_var, nimps, buffered, marked, enc_impression))) return rc;
	return store(g, clicks_var, nclicks, buffered_clicks, false, enc_click);
}

/* Evicts what no row can match any more, now that the watermark has passed timer_ms: the
 * impressions with i + within <= timer_ms (one that no click matched is emitted with click_ts
 * null) and the clicks with c <= timer_ms (dropped). */
static int on_timer(gs_group *g, int64_t timer_ms) {
	int rc;
	if ((rc = load(g))) return rc;
	size_t n_imps = nimps, n_clicks = nclicks, keep = 0;
	for (size_t k = 0; k < nimps; k++) {
		if (add(imps[k].ts, within_ms) > timer_ms) imps[keep++] = imps[k];
		else if (!imps[k].matched && (rc = emit(g, imps[k].ts, NULL))) return rc;
	}
	nimps = keep;
	keep = 0;
	for (size_t k = 0; k < nclicks; k++)
		if (clicks[k] > timer_ms) clicks[keep++] = clicks[k];
	nclicks = keep;
	if ((rc = store(g, impressions_var, nimps, n_imps, nimps != n_imps, enc_impression))) return rc;
	return store(g, clicks_var, nclicks, n_clicks, nclicks != n_clicks, enc_click);
}

static const gs_processor processor = {init, on_rows, on_timer, NULL};
GS_PROCESSOR(processor);
