/*
 * carts, in C: the transformWithState sample (ABI v2). A shopping cart per user: a map of
 * items, a list of recent events that expire by TTL, an abandon timer that every activity
 * moves and one reminder per cart. Behaves exactly like samples/carts/go (../README.md has
 * the rules and the scenario).
 *
 * Build (from the repository root; `make samples-c` runs the same command):
 *
 *   clang --target=wasm32-wasi --sysroot=/usr -mexec-model=reactor -O2 -mbulk-memory -g0 \
 *     -Wall -Werror -ffile-prefix-map=$PWD/= -Wl,--stack-first -Wl,--strip-all -Isdk/c \
 *     -DGS_ABI_V2 -o samples/carts/c/carts.wasm samples/carts/c/carts.c
 */
#define GROUPSTATE_IMPLEMENTATION
#include "groupstate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gs_map_var items;     /* item -> {"qty", "price"} */
static gs_list_var history;  /* the event names, TTL config.history_ttl */
static gs_value_var abandon_at, remind_at; /* the timers' timestamps */

static int64_t abandon_after_ms, remind_after_ms;

/* config.<field> as a positive duration (Go's time.Duration, in nanoseconds). */
static int positive_duration(gs_config *c, const char *field, int64_t *ns) {
	int rc = gs_config_duration_ns(c, field, ns);
	if (rc != GS_OK && rc != GS_ERR_NOT_FOUND) return rc;
	if (rc == GS_ERR_NOT_FOUND || *ns <= 0) {
		static char msg[96];
		snprintf(msg, sizeof msg, "carts: config %s must be a positive duration", field);
		return gs_config_fail(c, msg);
	}
	return GS_OK;
}

static int init(gs_config *c) {
	int64_t abandon_ns, remind_ns, ttl_ns;
	int rc;
	if ((rc = positive_duration(c, "abandon_after", &abandon_ns))) return rc;
	if ((rc = positive_duration(c, "remind_after", &remind_ns))) return rc;
	if ((rc = positive_duration(c, "history_ttl", &ttl_ns))) return rc;
	if (ttl_ns < 1000000) return gs_config_fail(c, "groupstate: state variable \"history\": ttl is not at least 1ms");
	abandon_after_ms = abandon_ns / 1000000; /* Duration.Milliseconds: truncated */
	remind_after_ms = remind_ns / 1000000;
	items = gs_map_state("items", 0);
	history = gs_list_state("history", ttl_ns / 1000000);
	abandon_at = gs_value_state("abandon_at", 0);
	remind_at = gs_value_state("remind_at", 0);
	return GS_OK;
}

/* ---- JSON ------------------------------------------------------------------------------ */

/* Wrapping int64 arithmetic, as in Go. */
static int64_t add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }

/* Writes v (finite) as a JSON number: digits for an integer below 1e21 (as Go does), else
 * the shortest %.*g that reads back as v. */
static size_t fmt_double(char *buf, size_t cap, double v) {
	int n = 0;
	if (v == trunc(v) && fabs(v) < 1e21) return (size_t)snprintf(buf, cap, "%.0f", v);
	for (int prec = 1; prec <= 17; prec++) {
		n = snprintf(buf, cap, "%.*g", prec, v);
		if (strtod(buf, NULL) == v) break;
	}
	return (size_t)n;
}

static bool name_is(gs_slice tok, const char *name) { /* ASCII case-insensitive, as Go's fields */
	char *d = gs_arena_alloc(tok.len);
	size_t n;
	if (!d || gs_json_decode_string(tok, d, &n) != GS_OK || n != strlen(name)) return false;
	for (size_t i = 0; i < n; i++) {
		char ch = d[i] >= 'A' && d[i] <= 'Z' ? d[i] + 32 : d[i];
		if (ch != name[i]) return false;
	}
	return true;
}

/* An input row: {"event", "item", "qty", "price"}, decoded as Go's encoding/json does into
 * the Go sample's struct (names matched case-insensitively, the last one wins, null is
 * nothing, a value of the wrong type is an error). */
typedef struct {
	gs_slice event, item;
	int64_t qty;
	double price;
} event;

static int read_event(gs_group *g, size_t i, gs_slice row, event *e) {
	gs_json_iter it = gs_json_iter_begin(row.ptr, row.len);
	gs_slice k, v;
	int rc;
	*e = (event){{"", 0}, {"", 0}, 0, 0};
	const char *bad = NULL;
	while ((rc = gs_json_iter_next(&it, &k, &v)) == 1) {
		if (gs_json_is_null(v)) continue;
		gs_slice *s = name_is(k, "event") ? &e->event : name_is(k, "item") ? &e->item : NULL;
		if (s) {
			char *d = gs_arena_alloc(v.len);
			size_t n;
			if (v.ptr[0] != '"' || !d || gs_json_decode_string(v, d, &n) != GS_OK) bad = s == &e->event ? "event" : "item";
			else *s = (gs_slice){d, n};
		} else if (name_is(k, "qty")) {
			if (gs_json_int64(v, &e->qty) != GS_OK) bad = "qty";
		} else if (name_is(k, "price")) {
			if (gs_json_double(v, &e->price) != GS_OK) bad = "price";
		}
	}
	if (rc < 0 || bad) {
		char *msg = gs_arena_alloc(80);
		if (!msg) return gs_fail(g, "carts: a row is not a JSON object of the event's fields");
		if (rc < 0) snprintf(msg, 80, "row %zu: not a JSON object", i);
		else snprintf(msg, 80, "row %zu: json: cannot unmarshal into field event.%s", i, bad);
		return gs_fail(g, msg);
	}
	return GS_OK;
}

/* A cart's line, as stored in items: {"qty":n,"price":p}. */
static int read_line(gs_group *g, gs_slice v, int64_t *qty, double *price) {
	*qty = 0, *price = 0;
	int rc = gs_json_get_int64(v.ptr, v.len, "qty", qty);
	if (rc == GS_OK || rc == GS_ERR_NOT_FOUND) rc = gs_json_get_double(v.ptr, v.len, "price", price);
	if (rc == GS_OK || rc == GS_ERR_NOT_FOUND) return GS_OK;
	return gs_fail(g, "groupstate: decoding state variable items: want {\"qty\": an integer, \"price\": a number}");
}

static int write_line(gs_group *g, gs_slice item, int64_t qty, double price) {
	char num[40];
	gs_jw w;
	gs_slice v;
	if (!isfinite(price)) return gs_fail(g, "json: unsupported value: a price that is not finite");
	gs_jw_begin(&w);
	gs_jw_int64(&w, "qty", qty);
	gs_jw_raw(&w, "price", num, fmt_double(num, sizeof num, price));
	int rc = gs_jw_end(&w, &v);
	return rc ? rc : gs_map_set(g, items, item.ptr, item.len, v.ptr, v.len);
}

/* A value variable holding an int64: GS_OK, GS_ERR_NOT_FOUND or an error. */
static int get_ts(gs_group *g, gs_value_var var, int64_t *ts) {
	gs_slice v;
	int rc = gs_value_get(g, var, &v);
	if (rc) return rc;
	if (gs_json_int64(v, ts) != GS_OK) return gs_fail(g, "groupstate: decoding a timer's timestamp: not an integer");
	return GS_OK;
}

static int set_ts(gs_group *g, gs_value_var var, int64_t ts) {
	char num[24];
	int n = snprintf(num, sizeof num, "%lld", (long long)ts);
	return gs_value_set(g, var, num, (size_t)n);
}

/* ---- the processor --------------------------------------------------------------------- */

/* Emits the cart's row: {"user_id", "event": what, "items", "total"[, "events"]}. */
static int summary(gs_group *g, const char *what, bool events) {
	int64_t n = 0;
	double total = 0;
	gs_map_iter mi;
	gs_slice k, v;
	int rc;
	gs_map_iter_begin(g, items, &mi);
	while ((rc = gs_map_iter_next(&mi, &k, &v)) == 1) {
		int64_t qty;
		double price;
		if ((rc = read_line(g, v, &qty, &price))) return rc;
		n++;
		total += (double)qty * price;
	}
	if (rc < 0) return rc;
	if (!isfinite(total)) return gs_fail(g, "json: unsupported value: a total that is not finite");
	char num[40];
	gs_slice key = gs_key_json(g);
	gs_jw w;
	gs_jw_begin(&w);
	gs_jw_raw(&w, "user_id", key.ptr, key.len);
	gs_jw_string(&w, "event", what, strlen(what));
	gs_jw_int64(&w, "items", n);
	gs_jw_raw(&w, "total", num, fmt_double(num, sizeof num, total));
	if (events) {
		int64_t live = 0;
		gs_list_iter li;
		gs_slice e;
		gs_list_iter_begin(g, history, &li);
		while ((rc = gs_list_iter_next(&li, &e)) == 1) live++;
		if (rc < 0) return rc;
		gs_jw_int64(&w, "events", live);
	}
	return gs_emit_jw(g, &w);
}

/* Empties every variable and deletes every timer. */
static int clear(gs_group *g) {
	int rc;
	if ((rc = gs_map_clear(g, items)) || (rc = gs_list_clear(g, history)) ||
	    (rc = gs_value_clear(g, abandon_at)) || (rc = gs_value_clear(g, remind_at)))
		return rc;
	const int64_t *ts;
	size_t n;
	if ((rc = gs_timer_list(g, &ts, &n))) return rc;
	for (size_t i = 0; i < n; i++)
		if ((rc = gs_timer_delete(g, ts[i]))) return rc;
	return GS_OK;
}

static bool is(gs_slice s, const char *lit) { return s.len == strlen(lit) && !memcmp(s.ptr, lit, s.len); }

/* The rows in arrival order, then the abandon timer moved and the reminder set of a cart
 * that has items. */
static int on_rows(gs_group *g) {
	gs_rows it = gs_rows_begin(g);
	gs_slice row;
	int rc;
	for (size_t i = 0; gs_rows_next(&it, &row); i++) {
		event e;
		if ((rc = read_event(g, i, row, &e))) return rc;
		gs_jw w; /* the event name as a JSON string: {"":"..."} without its braces */
		gs_slice s;
		gs_jw_begin(&w);
		gs_jw_string(&w, "", e.event.ptr, e.event.len);
		if ((rc = gs_jw_end(&w, &s))) return rc;
		if ((rc = gs_list_append(g, history, s.ptr + 4, s.len - 5))) return rc;
		if (is(e.event, "add")) {
			int64_t qty = 0;
			double price = 0;
			gs_slice v;
			rc = gs_map_get(g, items, e.item.ptr, e.item.len, &v);
			if (rc == GS_OK) rc = read_line(g, v, &qty, &price);
			if (rc != GS_OK && rc != GS_ERR_NOT_FOUND) return rc;
			if ((rc = write_line(g, e.item, add(qty, e.qty), e.price))) return rc;
		} else if (is(e.event, "remove")) {
			int64_t qty;
			double price;
			gs_slice v;
			rc = gs_map_get(g, items, e.item.ptr, e.item.len, &v);
			if (rc == GS_ERR_NOT_FOUND) continue;
			if (rc || (rc = read_line(g, v, &qty, &price))) return rc;
			qty = sub(qty, e.qty);
			if (qty <= 0) rc = gs_map_remove(g, items, e.item.ptr, e.item.len);
			else rc = write_line(g, e.item, qty, price);
			if (rc) return rc;
		} else if (is(e.event, "checkout")) {
			if ((rc = summary(g, "checkout", true)) || (rc = clear(g))) return rc;
		} else {
			char *msg = gs_arena_alloc(s.len - 5 + 32);
			if (!msg) return gs_fail(g, "carts: unknown event");
			snprintf(msg, s.len - 5 + 32, "carts: unknown event %.*s", (int)(s.len - 5), s.ptr + 4);
			return gs_fail(g, msg);
		}
	}
	if (!gs_map_exists(g, items)) return GS_OK; /* an empty cart keeps the timers it has */
	int64_t now = gs_current_processing_time_ms(g), old, at;
	rc = get_ts(g, abandon_at, &old);
	if (rc == GS_OK) rc = gs_timer_delete(g, old);
	if (rc != GS_OK && rc != GS_ERR_NOT_FOUND) return rc;
	at = add(now, abandon_after_ms);
	if ((rc = gs_timer_register(g, at)) || (rc = set_ts(g, abandon_at, at))) return rc;
	if (gs_value_exists(g, remind_at)) return GS_OK; /* one reminder per cart */
	at = add(now, remind_after_ms);
	if ((rc = gs_timer_register(g, at))) return rc;
	return set_ts(g, remind_at, at);
}

/* The abandon timer abandons the cart; the reminder reminds the user (remind_at stays set). */
static int on_timer(gs_group *g, int64_t timer_ms) {
	int64_t at;
	int rc = get_ts(g, abandon_at, &at);
	if (rc != GS_OK && rc != GS_ERR_NOT_FOUND) return rc;
	if (rc == GS_OK && at == timer_ms) {
		if ((rc = summary(g, "abandoned", true))) return rc;
		return clear(g);
	}
	rc = get_ts(g, remind_at, &at);
	if (rc != GS_OK && rc != GS_ERR_NOT_FOUND) return rc;
	if (rc == GS_OK && at == timer_ms) return summary(g, "reminder", false);
	return GS_OK;
}

static const gs_processor processor = {init, on_rows, on_timer, NULL};
GS_PROCESSOR(processor);
