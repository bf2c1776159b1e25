/* A test processor for sdk/c/v2_test.go's tests of several named inputs (ABI v2, init flag
 * HAS_INPUTS): its init refuses an input named "refused" and remembers the names; each DATA
 * call emits {"inputs": "a,b"} (the names gs_config_input gave at init), then for each row
 * {"input": <its input>, "row": <the row>}. */
#define GS_ABI_V2
#define GROUPSTATE_IMPLEMENTATION
#include "groupstate.h"

#include <stdio.h>

static char names[256]; /* the input names at init, comma-separated */

static int init(gs_config *c) {
	size_t n = gs_config_input_count(c), at = 0;
	names[0] = 0;
	for (size_t i = 0; i < n; i++) {
		gs_slice in = gs_config_input(c, i);
		if (!strcmp(in.ptr, "refused")) return gs_config_fail(c, "inputs must not be named refused");
		at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? "," : "", in.ptr);
		if (at >= sizeof names) return gs_config_fail(c, "too many input names");
	}
	if (gs_config_input(c, n).len != 0) return gs_config_fail(c, "gs_config_input out of range is not empty");
	return GS_OK;
}

static int on_rows(gs_group *g) {
	gs_jw w;
	gs_jw_begin(&w);
	gs_jw_string(&w, "inputs", names, strlen(names));
	int rc = gs_emit_jw(g, &w);
	if (rc) return rc;
	gs_rows it = gs_rows_begin(g);
	gs_slice row;
	if (gs_rows_input(&it).len != 0) return gs_fail(g, "an input before the first row");
	while (gs_rows_next(&it, &row)) {
		gs_slice in = gs_rows_input(&it);
		gs_jw_begin(&w);
		gs_jw_string(&w, "input", in.ptr, in.len);
		gs_jw_raw(&w, "row", row.ptr, row.len);
		if ((rc = gs_emit_jw(g, &w))) return rc;
	}
	return GS_OK;
}

static int on_timer(gs_group *g, int64_t ts) {
	(void)g, (void)ts;
	return GS_OK;
}

static const gs_processor p = {.init = init, .on_rows = on_rows, .on_timer = on_timer};
GS_PROCESSOR(p);
