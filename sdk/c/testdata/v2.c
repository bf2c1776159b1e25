/* A test processor for sdk/c/v2_test.go (ABI v2). Each row is {"op": ..., ...} and runs one
 * SDK function, emitting what it read, so the Go test can drive every part of the API. */
#define GS_ABI_V2
#define GROUPSTATE_IMPLEMENTATION
#include "groupstate.h"

#include <stdio.h>

static gs_value_var count;
static gs_list_var events;
static gs_map_var seen;

static int init(gs_config *c) {
	int64_t page;
	if (gs_json_get_int64(gs_config_json(c).ptr, gs_config_json(c).len, "page_bytes", &page) == GS_OK)
		gs_set_state_page_bytes((uint32_t)page);
	bool bad;
	if (gs_json_get_bool(gs_config_json(c).ptr, gs_config_json(c).len, "bad_decl", &bad) == GS_OK && bad)
		gs_value_state("Bad-Name", 0);
	count = gs_value_state("count", 0);
	events = gs_list_state("events", 60000);
	seen = gs_map_state("seen", 0);
	return GS_OK;
}

static int emit_str(gs_group *g, const char *tag, gs_slice v) {
	gs_jw w;
	gs_jw_begin(&w);
	gs_jw_string(&w, "tag", tag, strlen(tag));
	gs_jw_string(&w, "v", v.ptr ? v.ptr : "", v.len);
	return gs_emit_jw(g, &w);
}

static int emit_int(gs_group *g, const char *tag, int64_t v) {
	gs_jw w;
	gs_jw_begin(&w);
	gs_jw_string(&w, "tag", tag, strlen(tag));
	gs_jw_int64(&w, "v", v);
	return gs_emit_jw(g, &w);
}

static bool is(gs_slice s, const char *lit) { return s.len == strlen(lit) && !memcmp(s.ptr, lit, s.len); }

static int row(gs_group *g, gs_slice r) {
	gs_slice op, arg = {"", 0}, arg2 = {"", 0};
	int64_t n = 0;
	int rc;
	if (gs_json_get_string(r.ptr, r.len, "op", &op)) return gs_fail(g, "row without op");
	gs_json_get_string(r.ptr, r.len, "a", &arg);
	gs_json_get_string(r.ptr, r.len, "b", &arg2);
	gs_json_get_int64(r.ptr, r.len, "n", &n);
	if (is(op, "value_get")) {
		gs_slice v;
		rc = gs_value_get(g, count, &v);
		if (rc == GS_ERR_NOT_FOUND) return emit_str(g, "absent", (gs_slice){"", 0});
		if (rc) return rc;
		return emit_str(g, "value", v);
	}
	if (is(op, "value_exists")) return emit_int(g, "exists", gs_value_exists(g, count));
	if (is(op, "value_set")) return gs_value_set(g, count, arg.ptr, arg.len);
	if (is(op, "value_big")) { /* a value of n bytes of 'x' */
		char *b = (char *)gs_arena_alloc((size_t)n);
		memset(b, 'x', (size_t)n);
		return gs_value_set(g, count, b, (size_t)n);
	}
	if (is(op, "value_len")) {
		gs_slice v;
		if ((rc = gs_value_get(g, count, &v))) return rc;
		return emit_int(g, "len", (int64_t)v.len);
	}
	if (is(op, "value_clear")) return gs_value_clear(g, count);
	if (is(op, "list_append")) return gs_list_append(g, events, arg.ptr, arg.len);
	if (is(op, "list_append2")) {
		gs_slice two[2] = {arg, arg2};
		return gs_list_append_all(g, events, two, 2);
	}
	if (is(op, "list_put")) {
		gs_slice two[2] = {arg, arg2};
		return gs_list_put(g, events, two, (size_t)n);
	}
	if (is(op, "list_clear")) return gs_list_clear(g, events);
	if (is(op, "list_exists")) return emit_int(g, "exists", gs_list_exists(g, events));
	if (is(op, "list_all") || is(op, "list_first")) {
		gs_list_iter it;
		gs_slice e;
		gs_list_iter_begin(g, events, &it);
		while ((rc = gs_list_iter_next(&it, &e)) == 1) {
			if ((rc = emit_str(g, "elem", e))) return rc;
			if (is(op, "list_first")) break;
		}
		return rc < 0 ? rc : GS_OK;
	}
	if (is(op, "map_set")) return gs_map_set(g, seen, arg.ptr, arg.len, arg2.ptr, arg2.len);
	if (is(op, "map_remove")) return gs_map_remove(g, seen, arg.ptr, arg.len);
	if (is(op, "map_clear")) return gs_map_clear(g, seen);
	if (is(op, "map_exists")) return emit_int(g, "exists", gs_map_exists(g, seen));
	if (is(op, "map_contains")) return emit_int(g, "contains", gs_map_contains(g, seen, arg.ptr, arg.len));
	if (is(op, "map_get")) {
		gs_slice v;
		rc = gs_map_get(g, seen, arg.ptr, arg.len, &v);
		if (rc == GS_ERR_NOT_FOUND) return emit_str(g, "absent", arg);
		if (rc) return rc;
		return emit_str(g, "value", v);
	}
	if (is(op, "map_all")) {
		gs_map_iter it;
		gs_slice k, v;
		gs_map_iter_begin(g, seen, &it);
		while ((rc = gs_map_iter_next(&it, &k, &v)) == 1) {
			gs_jw w;
			gs_jw_begin(&w);
			gs_jw_string(&w, "k", k.ptr, k.len);
			gs_jw_string(&w, "v", v.ptr, v.len);
			if ((rc = gs_emit_jw(g, &w))) return rc;
		}
		return rc < 0 ? rc : GS_OK;
	}
	if (is(op, "timer_register")) return gs_timer_register(g, n);
	if (is(op, "timer_delete")) return gs_timer_delete(g, n);
	if (is(op, "timers")) {
		const int64_t *ts;
		size_t k;
		if ((rc = gs_timer_list(g, &ts, &k))) return rc;
		for (size_t i = 0; i < k; i++)
			if ((rc = emit_int(g, "timer", ts[i]))) return rc;
		return GS_OK;
	}
	if (is(op, "times")) {
		int64_t wm = -1;
		gs_current_watermark_ms(g, &wm);
		if ((rc = emit_int(g, "T", gs_current_processing_time_ms(g)))) return rc;
		return emit_int(g, "W", wm);
	}
	if (is(op, "v1_update")) return gs_state_update(g, "1", 1);
	if (is(op, "fail")) return gs_fail(g, "asked to fail");
	return gs_fail(g, "unknown op");
}

static int on_rows(gs_group *g) {
	gs_rows it = gs_rows_begin(g);
	gs_slice r;
	while (gs_rows_next(&it, &r)) {
		int rc = row(g, r);
		if (rc) return rc;
	}
	return GS_OK;
}

/* A timer call emits its timer; a timer at ts % 1000 == 1 deletes the timer ts + 1 (later in
 * the same group) and registers it again; ts % 1000 == 7 fails. */
static int on_timer(gs_group *g, int64_t ts) {
	int rc = emit_int(g, "fired", ts);
	if (rc) return rc;
	if (ts % 1000 == 7) return gs_fail(g, "timer 7 fails");
	if (ts % 1000 == 1) {
		if ((rc = gs_timer_delete(g, ts + 1))) return rc;
		return gs_timer_register(g, ts + 1);
	}
	gs_slice v;
	rc = gs_value_get(g, count, &v);
	if (rc == GS_OK) return emit_str(g, "count", v);
	return rc == GS_ERR_NOT_FOUND ? GS_OK : rc;
}

static const gs_processor processor = {init, on_rows, on_timer, NULL};
GS_PROCESSOR(processor);
