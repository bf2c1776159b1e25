/*
 * sessions, in C: event-time sessionization. A user's events belong to one session until a
 * gap of more than config.gap of event time; a session is emitted when a later event opens
 * the next one, or when the watermark passes its end plus the gap. Behaves exactly like
 * samples/sessions/go (including how Go's encoding/json finds the "ts" field and how an
 * event time is read from a number or an RFC 3339 string).
 *
 * Build (from the repository root; `make samples-c` runs the same command):
 *
 *   clang --target=wasm32-wasi --sysroot=/usr -mexec-model=reactor -O2 -mbulk-memory -g0 \
 *     -Wall -Werror -ffile-prefix-map=$PWD/= -Wl,--stack-first -Wl,--strip-all -Isdk/c \
 *     -o samples/sessions/c/sessions.wasm samples/sessions/c/sessions.c
 */
#define GROUPSTATE_IMPLEMENTATION
#include "groupstate.h"

#include <stdlib.h>
#include <string.h>

static int64_t gap_ms = 5000; /* config.gap */

static int configure(gs_config *c) {
	int64_t ns;
	int rc = gs_config_duration_ns(c, "gap", &ns);
	if (rc == GS_ERR_NOT_FOUND) return GS_OK;
	if (rc != GS_OK) return rc;
	if (ns / 1000000 <= 0) return gs_config_fail(c, "sessions: config.gap must be at least 1ms");
	gap_ms = ns / 1000000;
	return GS_OK;
}

/* Wrapping int64 addition, as in Go. */
static int64_t add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }

/* ---- reading a row's event time, as Go's encoding/json + the Go sample do --------------- */

/* Go matches struct fields case-insensitively with Unicode simple folding: a member named
 * "ts", "TS", "Ts" or "t\u017f" (long s) sets the field, and the last such member wins. */
static bool is_ts_name(gs_slice tok) {
	char *d = gs_arena_alloc(tok.len);
	size_t n;
	if (!d || gs_json_decode_string(tok, d, &n) != GS_OK) return false;
	const unsigned char *p = (const unsigned char *)d, *e = p + n;
	const char want[] = "TS";
	for (int i = 0; i < 2; i++) {
		int c;
		if (p == e) return false;
		if (*p < 0x80) c = *p >= 'a' && *p <= 'z' ? *p - 32 : *p, p += 1;
		else if (e - p >= 2 && p[0] == 0xc5 && p[1] == 0xbf) c = 'S', p += 2; /* U+017F folds to S */
		else return false;
		if (c != want[i]) return false;
	}
	return p == e;
}

static bool digits(const char *s, int n) {
	for (int i = 0; i < n; i++) if (s[i] < '0' || s[i] > '9') return false;
	return true;
}
static int num(const char *s, int n) {
	int v = 0;
	for (int i = 0; i < n; i++) v = v * 10 + (s[i] - '0');
	return v;
}
static int days_in(int month, int year) {
	static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	bool leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
	return month == 2 && leap ? 29 : d[month - 1];
}
/* Days from 1970-01-01 to y-m-d (proleptic Gregorian). */
static int64_t days_from_civil(int64_t y, int m, int d) {
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

/* Go's time.Parse(time.RFC3339Nano, s) (its lenient general parser), then UnixMilli. */
static bool parse_rfc3339(const char *s, size_t len, int64_t *ms) {
	const char *e = s + len;
#define NEED(k) if (e - s < (k)) return false
	NEED(4);
	if (!digits(s, 4)) return false;
	int year = num(s, 4);
	s += 4;
	NEED(3);
	if (s[0] != '-' || !digits(s + 1, 2)) return false;
	int month = num(s + 1, 2);
	if (month < 1 || month > 12) return false;
	s += 3;
	NEED(3);
	if (s[0] != '-' || !digits(s + 1, 2)) return false;
	int day = num(s + 1, 2);
	s += 3;
	NEED(2);
	if (s[0] != 'T' || !digits(s + 1, 1)) return false;
	int hour = s[1] - '0';
	s += 2;
	if (s < e && digits(s, 1)) hour = hour * 10 + (*s++ - '0'); /* "15": one or two digits */
	if (hour > 23) return false;
	NEED(3);
	if (s[0] != ':' || !digits(s + 1, 2)) return false;
	int min = num(s + 1, 2);
	if (min > 59) return false;
	s += 3;
	NEED(3);
	if (s[0] != ':' || !digits(s + 1, 2)) return false;
	int sec = num(s + 1, 2);
	if (sec > 59) return false;
	s += 3;
	int64_t nsec = 0;
	if (e - s >= 2 && (s[0] == '.' || s[0] == ',') && digits(s + 1, 1)) {
		int n = 0;
		for (s++; s < e && digits(s, 1); s++, n++)
			if (n < 9) nsec = nsec * 10 + (*s - '0');
		for (; n < 9; n++) nsec *= 10;
	}
	int64_t offset = 0;
	if (s < e && *s == 'Z') s++;
	else {
		NEED(6);
		if (s[3] != ':' || !digits(s + 1, 2) || !digits(s + 4, 2)) return false;
		int oh = num(s + 1, 2), om = num(s + 4, 2);
		if (oh > 24 || om > 60 || (s[0] != '+' && s[0] != '-')) return false;
		offset = (oh * 60 + om) * 60;
		if (s[0] == '-') offset = -offset;
		s += 6;
	}
	if (s != e || day < 1 || day > days_in(month, year)) return false;
#undef NEED
	int64_t secs = days_from_civil(year, month, day) * 86400 + hour * 3600 + min * 60 + sec - offset;
	*ms = secs * 1000 + nsec / 1000000;
	return true;
}

/* Reads one "ts" value: a number of epoch milliseconds (truncated, saturating like Go on
 * wasm) or an RFC 3339 string. */
static int read_ts(gs_group *g, gs_slice v, int64_t *ts) {
	if (v.ptr[0] == '"') {
		char *s = gs_arena_alloc(v.len);
		size_t n;
		if (!s || gs_json_decode_string(v, s, &n) != GS_OK || !parse_rfc3339(s, n, ts)) {
			const char *m = "ts: cannot parse as an RFC 3339 time: ";
			char *msg = gs_arena_alloc(strlen(m) + v.len + 1);
			if (!msg) return gs_fail(g, "ts: cannot parse as an RFC 3339 time");
			memcpy(msg, m, strlen(m));
			memcpy(msg + strlen(m), v.ptr, v.len);
			msg[strlen(m) + v.len] = 0;
			return gs_fail(g, msg);
		}
		return GS_OK;
	}
	double f;
	if (gs_json_double(v, &f) != GS_OK) {
		const char *m = "ts: want epoch milliseconds or an RFC 3339 string, got ";
		char *msg = gs_arena_alloc(strlen(m) + v.len + 1);
		if (!msg) return gs_fail(g, m);
		memcpy(msg, m, strlen(m));
		memcpy(msg + strlen(m), v.ptr, v.len);
		msg[strlen(m) + v.len] = 0;
		return gs_fail(g, msg);
	}
	*ts = f >= 9223372036854775807.0 ? INT64_MAX : f <= -9223372036854775808.0 ? INT64_MIN : (int64_t)f;
	return GS_OK;
}

static int row_ts(gs_group *g, gs_slice row, int64_t *ts) {
	gs_json_iter it = gs_json_iter_begin(row.ptr, row.len);
	gs_slice k, v;
	int rc;
	*ts = 0; /* a row without ts reads as 0, as in Go */
	while ((rc = gs_json_iter_next(&it, &k, &v)) == 1)
		if (is_ts_name(k) && (rc = read_ts(g, v, ts)) != GS_OK) return rc;
	return rc < 0 ? gs_fail(g, "row is not a JSON object") : GS_OK;
}

static int cmp_i64(const void *a, const void *b) {
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* ---- the handler -------------------------------------------------------------------- */

typedef struct { int64_t start, end, events; } session;

static int emit_session(gs_group *g, const session *s) {
	gs_jw w;
	gs_slice key = gs_key_json(g);
	gs_jw_begin(&w);
	gs_jw_raw(&w, "user_id", key.ptr, key.len);
	gs_jw_int64(&w, "start", s->start);
	gs_jw_int64(&w, "end", s->end);
	gs_jw_int64(&w, "events", s->events);
	return gs_emit_jw(g, &w);
}

static int handle(gs_group *g) {
	session s = {0, 0, 0};
	gs_slice st;
	bool open = gs_state_get_option(g, &st);
	if (open) {
		const char *f[3] = {"start", "end", "events"};
		int64_t *v[3] = {&s.start, &s.end, &s.events};
		for (int i = 0; i < 3; i++) {
			int rc = gs_json_get_int64(st.ptr, st.len, f[i], v[i]);
			if (rc != GS_OK && rc != GS_ERR_NOT_FOUND) return gs_fail(g, "groupstate: decoding state: want {\"start\",\"end\",\"events\"} integers");
		}
	}
	if (gs_has_timed_out(g)) {
		int rc = open ? emit_session(g, &s) : GS_OK;
		gs_state_remove(g);
		return rc;
	}

	size_t n = gs_row_count(g);
	int64_t *ts = gs_arena_alloc(n * sizeof *ts + 1);
	if (!ts) return gs_fail(g, "sessions: out of memory");
	gs_rows it = gs_rows_begin(g);
	gs_slice row;
	for (size_t i = 0; gs_rows_next(&it, &row); i++) {
		int rc = row_ts(g, row, &ts[i]);
		if (rc != GS_OK) return rc;
	}
	qsort(ts, n, sizeof *ts, cmp_i64);

	for (size_t i = 0; i < n; i++) {
		int64_t t = ts[i];
		if (!open) {
			s = (session){t, t, 1}, open = true;
		} else if (t > add(s.end, gap_ms)) {
			int rc = emit_session(g, &s);
			if (rc != GS_OK) return rc;
			s = (session){t, t, 1};
		} else {
			if (t < s.start) s.start = t;
			if (t > s.end) s.end = t;
			s.events = add(s.events, 1);
		}
	}
	if (!open) return GS_OK; /* no rows (cannot happen on a data call) and no session */

	gs_jw w;
	gs_slice state;
	gs_jw_begin(&w);
	gs_jw_int64(&w, "start", s.start);
	gs_jw_int64(&w, "end", s.end);
	gs_jw_int64(&w, "events", s.events);
	int rc = gs_jw_end(&w, &state);
	if (rc == GS_OK) rc = gs_state_update(g, state.ptr, state.len);
	if (rc != GS_OK) return rc;

	/* Every row that reaches the handler is later than the watermark, so end + gap is too;
	 * the clamp only guards a deployment without late-row filtering. */
	int64_t timeout = add(s.end, gap_ms), wm;
	if (gs_current_watermark_ms(g, &wm) == GS_OK && timeout < wm) timeout = wm;
	return gs_set_timeout_timestamp(g, timeout);
}

GS_HANDLER(handle);
GS_INIT(configure);
