/*
 * logincount, in C: counts each user's logins and closes the session after
 * config.idle_timeout of processing time without logins (the running example of Spark's
 * applyInPandasWithState). Behaves exactly like samples/logincount/go.
 *
 * Build (from the repository root; `make samples-c` runs the same command):
 *
 *   clang --target=wasm32-wasi --sysroot=/usr -mexec-model=reactor -O2 -mbulk-memory -g0 \
 *     -Wall -Werror -ffile-prefix-map=$PWD/= -Wl,--stack-first -Wl,--strip-all -Isdk/c \
 *     -o samples/logincount/c/logincount.wasm samples/logincount/c/logincount.c
 */
#define GROUPSTATE_IMPLEMENTATION
#include "groupstate.h"

/* config.idle_timeout in nanoseconds, like Go's time.Duration; 0 means no timeout. */
static int64_t idle_timeout_ns;

static int configure(gs_config *c) {
	int rc = gs_config_duration_ns(c, "idle_timeout", &idle_timeout_ns);
	return rc == GS_ERR_NOT_FOUND ? GS_OK : rc;
}

/* Emits {"user_id": <key>, "total_logins": n[, "session_closed": true]}. */
static int emit_total(gs_group *g, int64_t n, bool closed) {
	gs_jw w;
	gs_slice key = gs_key_json(g);
	gs_jw_begin(&w);
	gs_jw_raw(&w, "user_id", key.ptr, key.len);
	gs_jw_int64(&w, "total_logins", n);
	if (closed) gs_jw_bool(&w, "session_closed", true);
	return gs_emit_jw(g, &w);
}

static int handle(gs_group *g) {
	int64_t count = 0; /* state {"login_count": n}; 0 without state */
	gs_slice st;
	if (gs_state_get_option(g, &st)) {
		int rc = gs_json_get_int64(st.ptr, st.len, "login_count", &count);
		if (rc != GS_OK && rc != GS_ERR_NOT_FOUND) return gs_fail(g, "groupstate: decoding state: login_count is not an integer");
	}
	if (gs_has_timed_out(g)) {
		int rc = emit_total(g, count, true);
		gs_state_remove(g);
		return rc;
	}
	count += (int64_t)gs_row_count(g);

	gs_jw w;
	gs_slice state;
	gs_jw_begin(&w);
	gs_jw_int64(&w, "login_count", count);
	int rc = gs_jw_end(&w, &state);
	if (rc == GS_OK) rc = gs_state_update(g, state.ptr, state.len);
	if (rc == GS_OK) rc = emit_total(g, count, false);
	if (rc == GS_OK && idle_timeout_ns > 0) rc = gs_set_timeout_duration(g, idle_timeout_ns / 1000000);
	return rc;
}

GS_HANDLER(handle);
GS_INIT(configure);
