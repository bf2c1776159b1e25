/*
 * groupstate.h - C SDK for groupstate handlers (handler ABI version 1).
 *
 * A single-header library. In exactly one .c file of the module write
 *
 *     #define GROUPSTATE_IMPLEMENTATION
 *     #include "groupstate.h"
 *
 * (other files include it without the define), write a handler and register it:
 *
 *     static int handle(gs_group *g) { ...; return GS_OK; }
 *     GS_HANDLER(handle);
 *     GS_INIT(configure);            // optional: int configure(gs_config *c)
 *
 * Build a WASI *reactor* (never a command: the host never runs _start):
 *
 *     clang --target=wasm32-wasi --sysroot=/usr -mexec-model=reactor -O2 -mbulk-memory \
 *           -Wl,--stack-first -Wl,--strip-all -o handler.wasm handler.c
 *
 * (-mbulk-memory is optional and makes memcpy and memset native copies in the host.)
 *
 * The implementation exports memory, gs_abi_version, gs_alloc, gs_init, gs_process and
 * gs_group_cell (abi/README.md 2.1a: it announces each group by writing its index there, not
 * with a host call), and imports only groupstate.log (when gs_log is used), on a fatal
 * out-of-memory wasi_snapshot_preview1.fd_write, and with GS_ABI_V2 groupstate.group_begin. See docs/handlers/c.md and abi/README.md.
 *
 * ABI v2 (transformWithState processors: named value/list/map state variables, timers, an
 * initial state): `#define GS_ABI_V2` before every include and register a gs_processor with
 * GS_PROCESSOR instead of GS_HANDLER (see "ABI v2" below). Only then is the v2 code compiled
 * and groupstate.state imported; a module without the define is exactly a v1 module.
 *
 * Memory and ownership (nothing here is ever freed by the host):
 *  - Slices the SDK hands out for the key, rows and stored state ALIAS the host's input
 *    buffer: read-only, valid until the handler returns.
 *  - gs_emit and gs_state_update COPY their argument at once; pass scratch buffers freely.
 *  - Scratch memory (gs_arena_alloc, gs_key_str, gs_json_get_string, gs_jw_*) comes from an
 *    arena that is reset before every group and before the init hook: valid until the
 *    handler (or init hook) returns. Use malloc for anything that must live longer (config
 *    read in the init hook); malloc and the SDK coexist.
 *  - gs_config's name and JSON are copied by the SDK and stay valid for the instance's life.
 */
#ifndef GROUPSTATE_H
#define GROUPSTATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GS_ABI_VERSION 1

/* Result codes. Every function that can fail returns one; GS_OK is 0, errors are negative.
 * Handle and config errors also record a message (gs_error_message) that becomes the group's
 * (or the init's) error when the handler (init hook) returns a non-zero value. */
enum {
	GS_OK = 0,
	GS_ERR = -1,                        /* generic / user error (gs_fail) */
	GS_ERR_NO_STATE = -2,               /* gs_state_get without a value */
	GS_ERR_NULL_STATE = -3,             /* gs_state_update(NULL) */
	GS_ERR_DURATION_NOT_ALLOWED = -4,   /* gs_set_timeout_duration without processing_time */
	GS_ERR_NON_POSITIVE_DURATION = -5,  /* duration <= 0 ms (or T + d overflows) */
	GS_ERR_TIMESTAMP_NOT_ALLOWED = -6,  /* gs_set_timeout_timestamp without event_time */
	GS_ERR_NON_POSITIVE_TIMESTAMP = -7, /* timestamp <= 0 */
	GS_ERR_TIMESTAMP_BEFORE_WATERMARK = -8, /* timestamp < watermark */
	GS_ERR_NO_WATERMARK = -9,           /* gs_current_watermark_ms without event_time */
	GS_ERR_NOMEM = -10,                 /* scratch arena exhausted */
	GS_ERR_NOT_FOUND = -11,             /* JSON field absent (or null) */
	GS_ERR_JSON = -12,                  /* malformed JSON, or a value of the wrong type */
};

/* Timeout modes of a deployment (spec field `timeout`). */
enum { GS_TIMEOUT_NONE = 0, GS_TIMEOUT_PROCESSING_TIME = 1, GS_TIMEOUT_EVENT_TIME = 2 };

/* Log levels for gs_log (log/slog's). */
enum { GS_LOG_DEBUG = -4, GS_LOG_INFO = 0, GS_LOG_WARN = 4, GS_LOG_ERROR = 8 };

/* A read-only byte range. Not NUL-terminated unless documented. */
typedef struct gs_slice {
	const char *ptr;
	size_t len;
} gs_slice;

typedef struct gs_group gs_group;   /* one call of the handler; valid during the call */
typedef struct gs_config gs_config; /* the deployment's config; valid for the instance */

typedef int (*gs_handler_fn)(gs_group *g);
typedef int (*gs_init_fn)(gs_config *c);

/* Register the handler (required) and an init hook (optional), once per module, at file
 * scope. A module without GS_HANDLER fails its init with "groupstate: no handler registered". */
#define GS_HANDLER(fn) gs_handler_fn gs__handler = (fn)
#define GS_INIT(fn) gs_init_fn gs__init_hook = (fn)

/* ---- the group ---------------------------------------------------------------------- */

gs_slice gs_key_json(gs_group *g);      /* canonical JSON key: "alice" (quotes) or 42 */
bool gs_key_is_string(gs_group *g);
/* The key as text: a string decoded (no quotes), a number's digits. NUL-terminated, arena. */
int gs_key_str(gs_group *g, gs_slice *out);
int gs_group_index(gs_group *g);        /* position in the current guest call */

size_t gs_row_count(gs_group *g);       /* 0 on a timeout call */
typedef struct gs_rows {
	const char *p, *end;
	size_t left;
#ifdef GS_ABI_V2
	bool inputs;    /* each row starts with the index of its input (see gs_rows_input) */
	gs_slice input; /* the input of the row gs_rows_next returned last */
#endif
} gs_rows;
gs_rows gs_rows_begin(gs_group *g);     /* may be called any number of times */
bool gs_rows_next(gs_rows *it, gs_slice *row); /* each row: one JSON object, unchanged */

int gs_emit(gs_group *g, const void *row, size_t len); /* appends a COPY of row */

/* ---- the state handle (Spark's GroupState) ------------------------------------------ */

bool gs_state_exists(gs_group *g);
int gs_state_get(gs_group *g, gs_slice *value);          /* GS_ERR_NO_STATE when absent */
bool gs_state_get_option(gs_group *g, gs_slice *value);  /* false (and {NULL,0}) when absent */
int gs_state_update(gs_group *g, const void *value, size_t len); /* copies; NULL is an error, len 0 is a value */
void gs_state_remove(gs_group *g);
bool gs_has_timed_out(gs_group *g);
int gs_set_timeout_duration(gs_group *g, int64_t duration_ms); /* timeout = T + duration_ms */
int gs_set_timeout_timestamp(gs_group *g, int64_t timestamp_ms);
int gs_current_watermark_ms(gs_group *g, int64_t *watermark_ms);
int64_t gs_current_processing_time_ms(gs_group *g);

/* Records a message (copied) and returns GS_ERR, so `return gs_fail(g, "...")` fails the group
 * with it. When the handler returns a non-zero code, the group's error is the message of the
 * last error recorded on g if it has that code (so `return gs_state_get(...)` or
 * `return gs_set_timeout_duration(...)` carries the SDK's message), else
 * "groupstate: handler returned <code>". */
int gs_fail(gs_group *g, const char *message);
/* The message of the last error recorded on g (handle misuse, gs_fail), "" when none. */
const char *gs_error_message(gs_group *g);

/* Scratch memory, 8-byte aligned, reset before every group and the init hook; NULL when out of memory. */
void *gs_arena_alloc(size_t size);

/* Log a message (UTF-8) tagged with the deployment and the current key. */
void gs_log(int level, const char *msg, size_t len);
void gs_logs(int level, const char *msg); /* NUL-terminated */

/* ---- config (the init hook) --------------------------------------------------------- */

gs_slice gs_config_name(gs_config *c);
gs_slice gs_config_json(gs_config *c);  /* the spec's config as one JSON object, "{}" when none */
int gs_config_timeout_mode(gs_config *c);
bool gs_config_has_watermark(gs_config *c);
/* config.<field> as a duration: a Go duration string ("10s", "1m30s", "250ms") or a JSON number
 * of milliseconds. GS_OK, GS_ERR_NOT_FOUND when absent or null (*ns = 0), or GS_ERR_JSON with a
 * message ("groupstate: config idle_timeout: time: invalid duration \"soon\""). */
int gs_config_duration_ns(gs_config *c, const char *field, int64_t *ns);
int gs_config_duration_ms(gs_config *c, const char *field, int64_t *ms); /* truncated */
int gs_config_fail(gs_config *c, const char *message); /* returns GS_ERR */

/* ---- JSON reading ------------------------------------------------------------------- */
/* Fields are looked up by exact name (escapes in names are decoded); when a name repeats, the
 * LAST occurrence wins (as in Go and JavaScript). Values may be of any type (nested objects and
 * arrays are skipped correctly). A null value counts as absent (GS_ERR_NOT_FOUND). */

int gs_json_find(const char *obj, size_t len, const char *name, gs_slice *value); /* raw value token */
int gs_json_get_int64(const char *obj, size_t len, const char *name, int64_t *out); /* integer literal only */
int gs_json_get_double(const char *obj, size_t len, const char *name, double *out);
int gs_json_get_bool(const char *obj, size_t len, const char *name, bool *out);
int gs_json_get_string(const char *obj, size_t len, const char *name, gs_slice *out); /* decoded, NUL-terminated, arena */

/* The same on one value token (for example a gs_json_find result). */
int gs_json_int64(gs_slice tok, int64_t *out);
int gs_json_double(gs_slice tok, double *out);
int gs_json_bool(gs_slice tok, bool *out);
bool gs_json_is_null(gs_slice tok);
/* Decodes a string token (with its quotes) into dst, which needs tok.len bytes at least (the
 * decoded text is never longer); *out_len = decoded length. Lone surrogates become U+FFFD. */
int gs_json_decode_string(gs_slice tok, char *dst, size_t *out_len);

/* Iterates the members of an object: name (the raw string token, quotes included) and value. */
typedef struct gs_json_iter {
	const char *p, *end;
	int state; /* 0 before '{', 1 first member, 2 later members, 3 done, -1 error */
} gs_json_iter;
gs_json_iter gs_json_iter_begin(const char *obj, size_t len);
/* 1: a member; 0: the end of the object; GS_ERR_JSON: malformed. */
int gs_json_iter_next(gs_json_iter *it, gs_slice *name, gs_slice *value);
/* Whether a name token, decoded, equals the NUL-terminated name. */
bool gs_json_name_is(gs_slice name_tok, const char *name);

/* ---- JSON writing: a flat object, in arena memory ----------------------------------- */

typedef struct gs_jw {
	char *buf;
	size_t len, cap;
	int fields;
	int err; /* sticky: GS_ERR_NOMEM */
} gs_jw;
void gs_jw_begin(gs_jw *w); /* starts "{" */
void gs_jw_raw(gs_jw *w, const char *name, const char *json, size_t len); /* a JSON value as is (e.g. gs_key_json) */
void gs_jw_int64(gs_jw *w, const char *name, int64_t v);
void gs_jw_bool(gs_jw *w, const char *name, bool v);
void gs_jw_null(gs_jw *w, const char *name);
void gs_jw_string(gs_jw *w, const char *name, const char *s, size_t len); /* escaped; invalid UTF-8 -> U+FFFD */
int gs_jw_end(gs_jw *w, gs_slice *out); /* appends "}"; GS_OK or GS_ERR_NOMEM */
int gs_emit_jw(gs_group *g, gs_jw *w);  /* gs_jw_end + gs_emit */

/* ---- ABI v2: transformWithState processors (define GS_ABI_V2 before including) ------- */
#ifdef GS_ABI_V2
/* A module that defines GS_ABI_V2 before it includes this header (in every file) and registers
 * a processor with GS_PROCESSOR is an ABI v2 module (abi/README.md section 9, Spark 4's
 * transformWithState): each key holds named state variables (values, lists, maps, with an
 * optional TTL) and any number of timers. Only such a module imports groupstate.state; without
 * the define none of the code below is compiled. See docs/handlers/c.md.
 *
 * The calls of a processor receive a gs_group as v1 handlers do: the key, the rows (DATA
 * calls), gs_emit, gs_fail, gs_error_message, gs_current_processing_time_ms and
 * gs_current_watermark_ms work the same; the v1 state handle and timeouts (gs_state_update,
 * gs_set_timeout_*) fail with GS_ERR_V1_ONLY. Values, list elements and map values are opaque
 * bytes (JSON by convention, as the initial state is); map keys are byte strings.
 *
 * Writes are buffered and sent to the host with the next read or in the group's result; reads
 * ask the host. When the host refuses a request (an answer of -1: the host logs why) or its
 * answer is malformed, every later state function returns GS_ERR_STATE_REFUSED without doing
 * anything, and the call fails with that error whatever the callback returns (and in a TIMERS
 * group, no further timer is handled). */
enum {
	GS_ERR_STATE_REFUSED = -13,      /* the host refused a state request; the call fails */
	GS_ERR_TIMERS_NOT_ALLOWED = -14, /* a timer op under timeout: none */
	GS_ERR_V1_ONLY = -15,            /* a v1 state-handle function in a processor's call */
	GS_ERR_BAD_VAR = -16,            /* a handle that no declaration returned */
};

/* Handles of state variables, returned by the declarations; keep them in globals. */
typedef struct gs_value_var { uint32_t idx; } gs_value_var;
typedef struct gs_list_var { uint32_t idx; } gs_list_var;
typedef struct gs_map_var { uint32_t idx; } gs_map_var;

/* Declare a variable; call them only from the processor's init callback. name: 1-64 bytes of
 * [a-z0-9_], starting with a letter, unique; ttl_ms: 0 (no TTL) or the time to live of each
 * value, list element or map entry after it was last written (processing time). An invalid
 * declaration fails the init with a message naming it. */
gs_value_var gs_value_state(const char *name, int64_t ttl_ms);
gs_list_var gs_list_state(const char *name, int64_t ttl_ms);
gs_map_var gs_map_state(const char *name, int64_t ttl_ms);

/* The processor. Every callback returns GS_OK or an error code, as v1 handlers do. */
typedef struct gs_processor {
	/* Once per instance: declares the variables (c gives the config; gs_config_fail fails the
	 * init). Optional (a processor without variables still has timers). Runs after GS_INIT's
	 * hook, if any. */
	int (*init)(gs_config *c);
	/* Once per key and batch with the key's rows (at least one; gs_rows_begin). */
	int (*on_rows)(gs_group *g);
	/* Once per expired timer of a key, in timestamp order, after every on_rows of the batch.
	 * A timer that an earlier call of the key's timer group deleted is skipped. */
	int (*on_timer)(gs_group *g, int64_t timer_ms);
	/* Optional: once per key of the deployment's initial state (first batch, before on_rows),
	 * with the key's line, a JSON object of variable names. NULL: the default, which sets each
	 * named variable (a value to the JSON value, a list to the array's elements, a map to the
	 * object's entries; null is as absent) and fails on a name that is not declared. */
	int (*on_initial_state)(gs_group *g, gs_slice initial);
} gs_processor;

/* Register the processor, once, at file scope, instead of GS_HANDLER. */
#define GS_PROCESSOR(p) const gs_processor *gs__processor = &(p)

/* Values. gs_value_get: GS_OK, or GS_ERR_NOT_FOUND without a (live) value; the value is copied
 * into the arena (valid until the callback returns). Set copies; NULL is GS_ERR_NULL_STATE. */
int gs_value_get(gs_group *g, gs_value_var v, gs_slice *value);
bool gs_value_exists(gs_group *g, gs_value_var v);
int gs_value_set(gs_group *g, gs_value_var v, const void *value, size_t len);
int gs_value_clear(gs_group *g, gs_value_var v);

/* Lists. Iterate with gs_list_iter_begin / gs_list_iter_next, which reads the list from the
 * host a page at a time (stopping early reads no more). An element is valid until the next
 * gs_list_iter_next on its iterator. Writes made while iterating go to the host with the next
 * page's read; avoid changing a list while iterating over it. */
typedef struct gs_list_iter {
	gs_group *g;
	uint32_t var;
	int slot;             /* the page buffer, -1 before the first page */
	const char *p;        /* the rest of the page */
	uint32_t left;        /* elements left in the page */
	uint64_t next;        /* the cursor of the next page */
	int state;            /* 0 no page yet, 1 more pages, 2 last page, 3 done, < 0 an error */
} gs_list_iter;
void gs_list_iter_begin(gs_group *g, gs_list_var l, gs_list_iter *it);
int gs_list_iter_next(gs_list_iter *it, gs_slice *elem); /* 1: an element; 0: the end; < 0: error */
bool gs_list_exists(gs_group *g, gs_list_var l);
int gs_list_append(gs_group *g, gs_list_var l, const void *elem, size_t len);
int gs_list_append_all(gs_group *g, gs_list_var l, const gs_slice *elems, size_t n);
int gs_list_put(gs_group *g, gs_list_var l, const gs_slice *elems, size_t n); /* replaces; n 0 clears */
int gs_list_clear(gs_group *g, gs_list_var l);

/* Maps: keys are byte strings, iterated in bytewise order, a page at a time (entries valid
 * until the next gs_map_iter_next on the iterator). gs_map_get: GS_OK or GS_ERR_NOT_FOUND,
 * the value copied into the arena. */
typedef struct gs_map_iter {
	gs_group *g;
	uint32_t var;
	int slot;
	const char *p;
	uint32_t left;
	gs_slice next;        /* the cursor of the next page (in the page buffer) */
	int state;
} gs_map_iter;
int gs_map_get(gs_group *g, gs_map_var m, const void *key, size_t klen, gs_slice *value);
bool gs_map_contains(gs_group *g, gs_map_var m, const void *key, size_t klen);
int gs_map_set(gs_group *g, gs_map_var m, const void *key, size_t klen, const void *value, size_t vlen);
int gs_map_remove(gs_group *g, gs_map_var m, const void *key, size_t klen);
void gs_map_iter_begin(gs_group *g, gs_map_var m, gs_map_iter *it);
int gs_map_iter_next(gs_map_iter *it, gs_slice *key, gs_slice *value); /* 1, 0 the end, < 0 */
bool gs_map_exists(gs_group *g, gs_map_var m);
int gs_map_clear(gs_group *g, gs_map_var m);

/* Timers of the call's key (any number; registering a timestamp twice is one timer). A timer
 * at ts fires in the first batch whose processing time (timeout: processing_time) or watermark
 * (event_time) is after ts. Register and delete return GS_ERR_TIMERS_NOT_ALLOWED under
 * timeout: none. gs_timer_list gives them ascending (arena memory; none under timeout: none). */
int gs_timer_register(gs_group *g, int64_t ts);
int gs_timer_delete(gs_group *g, int64_t ts);
int gs_timer_list(gs_group *g, const int64_t **timers, size_t *n);

/* max_bytes of a page of gs_list_iter_next / gs_map_iter_next (default 65536). */
void gs_set_state_page_bytes(uint32_t max_bytes);

/* Several named inputs (a spec with `inputs:`; the host's init flag HAS_INPUTS). The names are
 * the spec's, in its order, NUL-terminated and valid for the instance's life. A deployment with
 * one input (no `inputs:`) has none: gs_config_input_count is 0 and every row's input is "".
 * gs_config_input(c, i) is {"", 0} for an i out of range. Check the names in the processor's
 * init (gs_config_fail names the problem). */
size_t gs_config_input_count(gs_config *c);
gs_slice gs_config_input(gs_config *c, size_t i);
/* The input of the row that gs_rows_next returned last on it (a processor's DATA call): one of
 * the gs_config_input names, or "" (len 0) without inputs or before the first row. */
gs_slice gs_rows_input(const gs_rows *it);
#endif /* GS_ABI_V2 */

#ifdef __cplusplus
}
#endif
#endif /* GROUPSTATE_H */

/* ===================================================================================== */
#ifdef GROUPSTATE_IMPLEMENTATION
#ifndef GROUPSTATE_IMPLEMENTED
#define GROUPSTATE_IMPLEMENTED

#include <stdlib.h>
#include <string.h>

#define GS__EXPORT(name) __attribute__((export_name(name)))
/* On a public function: its calls in the file that holds the implementation (usually the
 * handler's own) are inlined, so a field name given as a string literal is measured and
 * checked at compile time. The function itself stays an ordinary external one. */
#define GS__INLINE __attribute__((always_inline))
#define GS__IMPORT(name) __attribute__((import_module("groupstate"), import_name(name)))
/* The v1 exports. With GS_ABI_V2 they become static functions that the v2 exports (at the end
 * of the file) call for a module without a processor. */
#ifdef GS_ABI_V2
#define GS__V1_EXPORT(name) static
#define GS__V1_NAME(fn) gs__v1_##fn
#else
#define GS__V1_EXPORT(name) GS__EXPORT(name)
#define GS__V1_NAME(fn) fn
#endif

GS__IMPORT("group_begin") void gs__host_group_begin(int32_t index);
GS__IMPORT("log") void gs__host_log(int32_t level, const char *ptr, int32_t len);
__attribute__((import_module("wasi_snapshot_preview1"), import_name("fd_write")))
int32_t gs__fd_write(int32_t fd, const void *iovs, int32_t n, int32_t *written);

extern gs_handler_fn gs__handler __attribute__((weak));
extern gs_init_fn gs__init_hook __attribute__((weak));

struct gs_group {
	int index;
	gs_slice key;
	const char *state;
	size_t state_len;
	const char *rows; /* the group's rows: row_count byte strings */
	const char *rows_end;
	size_t row_count;
	bool exists, timed_out;
	int action; /* 0 KEEP, 1 UPDATE, 2 REMOVE */
	bool timeout_set;
	int64_t timeout_ms;
	const char *value; /* the value to store with UPDATE (arena copy) */
	size_t value_len;
	int64_t t, w;
	const char *err;
	int err_code;
#ifdef GS_ABI_V2
	bool v2;           /* a processor's call */
	int kind;          /* 0 DATA, 1 TIMERS, 2 INITIAL */
	const char *fatal; /* a failed state request: the call fails with it, whatever it returns */
	const char *timers; /* TIMERS: timer_count i64s */
	size_t timer_count;
	size_t timer_idx;  /* TIMERS: the timer being handled */
	bool *skip;        /* TIMERS: timers an earlier call of the group deleted */
#endif
};

struct gs_config {
	gs_slice name, json;
	int mode;
	bool has_watermark;
	const char *err;
#ifdef GS_ABI_V2
	gs_slice *inputs; /* the input names (HAS_INPUTS), malloc'd, NUL-terminated */
	size_t ninputs;
#endif
};

/* ---- memory: the input buffer, the output buffer, the arena -------------------------- */

static char *gs__in;
static size_t gs__in_cap;
static char *gs__out;
static size_t gs__out_len, gs__out_cap;
static gs_config gs__cfg;
static bool gs__ready; /* gs_init succeeded */
static uint32_t gs__emitted; /* emits of the current group */

typedef struct gs__blk {
	struct gs__blk *prev;
	size_t cap, used;
} gs__blk;
static gs__blk *gs__arena;

static __attribute__((noinline)) void *gs__arena_grow(size_t size) { /* a new block, then as below */
	gs__blk *b = gs__arena;
	size_t cap = b ? b->cap * 2 : 16384;
	if (cap < size) cap = size;
	gs__blk *nb = (gs__blk *)malloc(sizeof(gs__blk) + cap);
	if (!nb) return NULL;
	nb->prev = b, nb->cap = cap, nb->used = size;
	gs__arena = nb;
	return nb + 1;
}

GS__INLINE void *gs_arena_alloc(size_t size) {
	if (size > SIZE_MAX - 7) return NULL;
	size = (size + 7) & ~(size_t)7;
	gs__blk *b = gs__arena;
	if (!b || b->cap - b->used < size) return gs__arena_grow(size);
	void *p = (char *)(b + 1) + b->used;
	b->used += size;
	return p;
}

static __attribute__((noinline)) void gs__arena_free_old(gs__blk *b) {
	while (b->prev) { /* keep the newest (largest) block */
		gs__blk *p = b->prev;
		b->prev = p->prev;
		free(p);
	}
}

static inline void gs__arena_reset(void) { /* once per group: the common case inline */
	gs__blk *b = gs__arena;
	if (!b) return;
	if (b->prev) gs__arena_free_old(b);
	b->used = 0;
}

/* Prints one line to stderr (the host appends it to the trap's error) and traps. */
static void gs__die(const char *msg) {
	struct { const void *p; size_t n; } iov = {msg, strlen(msg)};
	int32_t w;
	gs__fd_write(2, &iov, 1, &w);
	__builtin_trap();
}

/* The result buffer is written through gs__out_reserve, which returns where the next n bytes
 * go (growing the buffer when needed), and the stores below; the caller then adds what it
 * wrote to gs__out_len. Fixed-size parts are reserved once and stored field by field. */
static __attribute__((noinline)) void gs__out_grow(size_t n) {
	size_t cap = gs__out_cap ? gs__out_cap : 65536;
	if (n > ((size_t)1 << 31)) gs__die("groupstate: result too large\n");
	while (cap - gs__out_len < n) {
		if (cap >= ((size_t)1 << 31)) gs__die("groupstate: result too large\n");
		cap *= 2;
	}
	char *p = (char *)realloc(gs__out, cap);
	if (!p) gs__die("groupstate: out of memory for the result buffer\n");
	gs__out = p, gs__out_cap = cap;
}

static inline char *gs__out_reserve(size_t n) {
	if (gs__out_cap - gs__out_len < n) gs__out_grow(n);
	return gs__out + gs__out_len;
}

/* Little-endian stores at any address (WebAssembly is little-endian; memcpy of a constant
 * size compiles to one unaligned store). Each returns the address after what it stored. */
static inline char *gs__st_u32(char *d, uint32_t v) { memcpy(d, &v, 4); return d + 4; }
static inline char *gs__st_i64(char *d, int64_t v) { memcpy(d, &v, 8); return d + 8; }

/* memcpy for the short strings the SDK copies most (names, keys, small values): up to 32
 * bytes with a few overlapping word loads and stores, no loop and no call; longer ones with
 * memcpy. Reads only [s, s+n); writes only [d, d+n). */
static inline void gs__copy(char *d, const char *s, size_t n) {
	if (n >= 8 && n <= 32) {
		uint64_t a, b, c, e;
		if (n <= 16) {
			memcpy(&a, s, 8), memcpy(&b, s + n - 8, 8);
			memcpy(d, &a, 8), memcpy(d + n - 8, &b, 8);
		} else {
			memcpy(&a, s, 8), memcpy(&b, s + 8, 8), memcpy(&c, s + n - 16, 8), memcpy(&e, s + n - 8, 8);
			memcpy(d, &a, 8), memcpy(d + 8, &b, 8), memcpy(d + n - 16, &c, 8), memcpy(d + n - 8, &e, 8);
		}
	} else if (n >= 4 && n < 8) {
		uint32_t a, b;
		memcpy(&a, s, 4), memcpy(&b, s + n - 4, 4);
		memcpy(d, &a, 4), memcpy(d + n - 4, &b, 4);
	} else if (n > 0 && n < 4) {
		char a = s[0], b = s[n / 2], c = s[n - 1];
		d[0] = a, d[n / 2] = b, d[n - 1] = c;
	} else if (n) memcpy(d, s, n);
}

/* Eight bytes at a time. Loops over text cost a bounds check and an interruption check per
 * iteration in the host's compiled code, so the scanners below test a word of 8 bytes at once
 * (only words that lie wholly inside the text) and look at single bytes only near what they
 * are looking for. gs__has_less(x, n) is non-zero iff some byte of x is below n (n <= 128),
 * gs__has_byte(x, c) iff some byte equals c (exactly; the usual bit tricks). */
#define GS__ONES 0x0101010101010101ull
#define GS__HIGH 0x8080808080808080ull
static inline uint64_t gs__ld64(const char *p) { uint64_t x; memcpy(&x, p, 8); return x; }
static inline uint64_t gs__has_less(uint64_t x, unsigned n) { return (x - GS__ONES * n) & ~x & GS__HIGH; }
static inline uint64_t gs__has_byte(uint64_t x, unsigned c) { return gs__has_less(x ^ (GS__ONES * c), 1); }

/* memcmp(a, b, n) == 0, without a call for n <= 16. */
static inline bool gs__eq(const char *a, const char *b, size_t n) {
	if (n >= 8 && n <= 16) return gs__ld64(a) == gs__ld64(b) && gs__ld64(a + n - 8) == gs__ld64(b + n - 8);
	if (n >= 8) return !memcmp(a, b, n);
	for (size_t i = 0; i < n; i++)
		if (a[i] != b[i]) return false;
	return true;
}

static inline void gs__out_u32(uint32_t v) {
	gs__st_u32(gs__out_reserve(4), v);
	gs__out_len += 4;
}
/* A byte string: u32 length, then the bytes. */
static void gs__out_str(const void *p, size_t n) {
	if (n > ((size_t)1 << 31)) gs__die("groupstate: result too large\n");
	char *d = gs__st_u32(gs__out_reserve(4 + n), (uint32_t)n);
	gs__copy(d, (const char *)p, n);
	gs__out_len += 4 + n;
}
static inline void gs__out_patch_u32(size_t at, uint32_t v) { gs__st_u32(gs__out + at, v); }
static int64_t gs__pack(void) {
	return (int64_t)(((uint64_t)(uintptr_t)gs__out << 32) | (uint64_t)(uint32_t)gs__out_len);
}

/* ---- reading buffers ------------------------------------------------------------------ */

typedef struct {
	const unsigned char *p, *end;
	bool bad;
} gs__rd;

static uint32_t gs__u32(gs__rd *r) {
	if (r->bad || r->end - r->p < 4) { r->bad = true; return 0; }
	uint32_t v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 | (uint32_t)r->p[3] << 24;
	r->p += 4;
	return v;
}
static int64_t gs__i64(gs__rd *r) {
	uint64_t lo = gs__u32(r), hi = gs__u32(r);
	return (int64_t)(lo | hi << 32);
}
static const char *gs__bytes(gs__rd *r, size_t *n) {
	*n = gs__u32(r);
	if (r->bad || (size_t)(r->end - r->p) < *n) { r->bad = true; *n = 0; return NULL; }
	const char *p = (const char *)r->p;
	r->p += *n;
	return p;
}

/* Writes s in decimal at dst (at most 20 bytes, no NUL) and returns its length. */
static size_t gs__digits(char *dst, int64_t s) {
	uint64_t v = s < 0 ? 0 - (uint64_t)s : (uint64_t)s, p10 = 10;
	size_t len = 1 + (s < 0);
	for (int i = 1; i < 20 && v >= p10; i++) len++, p10 *= 10; /* 10^19 still fits */
	char *q = dst + len;
	for (; v > 0xffffffffu; v /= 10) *--q = (char)('0' + v % 10); /* 64-bit division is slow */
	uint32_t u = (uint32_t)v;
	do *--q = (char)('0' + u % 10), u /= 10; while (u);
	if (s < 0) dst[0] = '-';
	return len;
}

/* A small decimal formatter for messages: NUL-terminated; returns the end (the NUL). */
static char *gs__fmt_i64(char *dst, int64_t s) {
	dst += gs__digits(dst, s);
	*dst = 0;
	return dst;
}

/* Joins up to four strings into arena memory (NULL entries are skipped). */
static const char *gs__cat(const char *a, const char *b, const char *c, const char *d) {
	const char *parts[4] = {a, b, c, d};
	size_t n = 1;
	for (int i = 0; i < 4; i++) if (parts[i]) n += strlen(parts[i]);
	char *s = (char *)gs_arena_alloc(n), *q = s;
	if (!s) return "groupstate: out of memory";
	for (int i = 0; i < 4; i++) if (parts[i]) { size_t l = strlen(parts[i]); memcpy(q, parts[i], l); q += l; }
	*q = 0;
	return s;
}

static const char *gs__cat_n(gs_slice v) { /* v as a NUL-terminated arena string */
	char *s = (char *)gs_arena_alloc(v.len + 1);
	if (!s) return "";
	memcpy(s, v.ptr, v.len);
	s[v.len] = 0;
	return s;
}

/* ---- exports -------------------------------------------------------------------------- */

GS__V1_EXPORT("gs_abi_version") int32_t GS__V1_NAME(gs_abi_version)(void) { return GS_ABI_VERSION; }

/* The group cell (abi/README.md 2.1a): the index of the group whose handler runs, 0xFFFFFFFF
 * outside any group. The host reads it when the module logs or writes to stdout or stderr. */
static volatile uint32_t gs__group_cell = 0xFFFFFFFFu;

GS__EXPORT("gs_group_cell") int32_t gs_group_cell(void) { return (int32_t)(uintptr_t)&gs__group_cell; }

GS__EXPORT("gs_alloc") int32_t gs_alloc(int32_t size) {
	uint32_t n = (uint32_t)size;
	if (size <= 0 || n > (1u << 30)) return 0;
	if (n > gs__in_cap) {
		size_t cap = gs__in_cap ? gs__in_cap : 65536;
		while (cap < n) cap *= 2;
		free(gs__in);
		gs__in = (char *)malloc(cap);
		gs__in_cap = gs__in ? cap : 0;
		if (!gs__in) return 0;
	}
	return (int32_t)(uintptr_t)gs__in;
}

static int64_t gs__init_fail(const char *msg) {
	gs__ready = false;
	gs__out_len = 0;
	gs__out_u32(1);
	gs__out_str(msg, strlen(msg));
	return gs__pack();
}

static char *gs__dup(const char *p, size_t n) { /* persistent, NUL-terminated */
	char *d = (char *)malloc(n + 1);
	if (d) { if (n) memcpy(d, p, n); d[n] = 0; }
	return d;
}

static const char *gs__ws(const char *p, const char *e);

GS__V1_EXPORT("gs_init") int64_t GS__V1_NAME(gs_init)(int32_t ptr, int32_t len) {
	gs__rd r = {(const unsigned char *)(uintptr_t)(uint32_t)ptr, (const unsigned char *)(uintptr_t)(uint32_t)ptr + (uint32_t)len, false};
	uint32_t version = gs__u32(&r), mode = gs__u32(&r), flags = gs__u32(&r);
	size_t nlen, clen;
	const char *name = gs__bytes(&r, &nlen), *json = gs__bytes(&r, &clen);
	char num[24];
	gs__arena_reset();
	if (r.bad || r.p != r.end) return gs__init_fail("groupstate: init buffer malformed");
	if (version != GS_ABI_VERSION) {
		gs__fmt_i64(num, version);
		return gs__init_fail(gs__cat("groupstate: host ABI version ", num, ", module implements version 1", NULL));
	}
	if (mode > 2) {
		gs__fmt_i64(num, mode);
		return gs__init_fail(gs__cat("groupstate: unknown timeout mode ", num, NULL, NULL));
	}
	const char *j = gs__ws(json, json + clen);
	if (j == json + clen || *j != '{') return gs__init_fail("groupstate: config is not a JSON object");
	if (!&gs__handler || !gs__handler) return gs__init_fail("groupstate: no handler registered");
	char *n = gs__dup(name, nlen), *c = gs__dup(json, clen);
	if (!n || !c) return gs__init_fail("groupstate: out of memory");
	gs__cfg = (gs_config){{n, nlen}, {c, clen}, (int)mode, (flags & 1) != 0, NULL};
	if (&gs__init_hook && gs__init_hook) {
		int rc = gs__init_hook(&gs__cfg);
		if (rc != GS_OK) {
			const char *m = gs__cfg.err;
			if (!m || !*m) {
				gs__fmt_i64(num, rc);
				m = gs__cat("groupstate: init hook returned ", num, NULL, NULL);
			}
			return gs__init_fail(m);
		}
	}
	gs__ready = true;
	gs__out_len = 0;
	gs__out_u32(0);
	gs__out_u32(0);
	return gs__pack();
}

static int64_t gs__call_error(const char *msg) {
	gs__group_cell = 0xFFFFFFFFu; /* no group runs after a whole-call error */
	gs__out_len = 0;
	gs__out_u32(1);
	gs__out_str(msg, strlen(msg));
	return gs__pack();
}

GS__V1_EXPORT("gs_process") int64_t GS__V1_NAME(gs_process)(int32_t ptr, int32_t len) {
	gs__out_len = 0;
	gs__group_cell = 0xFFFFFFFFu;
	gs__arena_reset();
	if (!gs__ready) return gs__call_error("groupstate: process called before a successful init");
	gs__rd r = {(const unsigned char *)(uintptr_t)(uint32_t)ptr, (const unsigned char *)(uintptr_t)(uint32_t)ptr + (uint32_t)len, false};
	uint32_t count = gs__u32(&r);
	int64_t t = gs__i64(&r), w = gs__i64(&r);
	if (r.bad) return gs__call_error("groupstate: process buffer malformed: short header");
	gs__out_u32(0);
	gs__out_u32(count);
	for (uint32_t i = 0; i < count; i++) {
		gs_group g; /* every field is set below (a memset per group costs a call) */
		uint32_t flags = gs__u32(&r);
		g.key.ptr = gs__bytes(&r, &g.key.len);
		g.state = gs__bytes(&r, &g.state_len);
		g.row_count = gs__u32(&r);
		g.rows = (const char *)r.p;
		for (size_t k = 0; k < g.row_count && !r.bad; k++) {
			size_t n;
			gs__bytes(&r, &n);
		}
		g.rows_end = (const char *)r.p;
		if (r.bad) {
			char num[24];
			gs__fmt_i64(num, i);
			return gs__call_error(gs__cat("groupstate: process buffer malformed at group ", num, NULL, NULL));
		}
		g.index = (int)i;
		g.timed_out = (flags & 1) != 0;
		g.exists = (flags & 2) != 0;
		if (!g.exists) g.state = NULL, g.state_len = 0;
		g.action = 0, g.timeout_set = false, g.timeout_ms = 0;
		g.value = NULL, g.value_len = 0;
		g.t = t, g.w = w;
		g.err = NULL, g.err_code = 0;
#ifdef GS_ABI_V2
		g.v2 = false;
#endif
		gs__arena_reset();
		gs__group_cell = (uint32_t)i;
		size_t emits_at = gs__out_len;
		gs__out_u32(0);
		gs__emitted = 0;
		int rc = gs__handler(&g);
		gs__out_patch_u32(emits_at, gs__emitted);
		if (rc != GS_OK) {
			const char *m = rc == g.err_code ? g.err : NULL;
			char num[24];
			if (!m || !*m) {
				gs__fmt_i64(num, rc);
				m = gs__cat("groupstate: handler returned ", num, NULL, NULL);
			}
			/* status 1, action 0, flags 0, timeout 0, no state, then the message */
			char *d = gs__out_reserve(24);
			d = gs__st_u32(d, 1), d = gs__st_u32(d, 0), d = gs__st_u32(d, 0);
			d = gs__st_i64(d, 0), gs__st_u32(d, 0);
			gs__out_len += 24;
			gs__out_str(m, strlen(m));
		} else {
			/* status 0, action, flags, timeout, state (with UPDATE), no error */
			size_t vlen = g.action == 1 ? g.value_len : 0;
			if (vlen > ((size_t)1 << 31)) gs__die("groupstate: result too large\n");
			char *d = gs__out_reserve(28 + vlen);
			d = gs__st_u32(d, 0), d = gs__st_u32(d, (uint32_t)g.action);
			d = gs__st_u32(d, g.timeout_set ? 1 : 0);
			d = gs__st_i64(d, g.timeout_set ? g.timeout_ms : 0);
			d = gs__st_u32(d, (uint32_t)vlen);
			gs__copy(d, g.value, vlen), d += vlen;
			gs__st_u32(d, 0);
			gs__out_len += 28 + vlen;
		}
	}
	gs__group_cell = 0xFFFFFFFFu;
	if (r.p != r.end) return gs__call_error("groupstate: trailing bytes in process buffer");
	return gs__pack();
}

/* ---- the group and its state handle ---------------------------------------------------- */

gs_slice gs_key_json(gs_group *g) { return g->key; }
bool gs_key_is_string(gs_group *g) { return g->key.len && g->key.ptr[0] == '"'; }
int gs_group_index(gs_group *g) { return g->index; }
size_t gs_row_count(gs_group *g) { return g->row_count; }

int gs_key_str(gs_group *g, gs_slice *out) {
	char *d = (char *)gs_arena_alloc(g->key.len + 1);
	if (!d) return GS_ERR_NOMEM;
	size_t n = g->key.len;
	if (gs_key_is_string(g)) {
		if (gs_json_decode_string(g->key, d, &n) != GS_OK) return GS_ERR_JSON;
	} else if (n) memcpy(d, g->key.ptr, n);
	d[n] = 0;
	*out = (gs_slice){d, n};
	return GS_OK;
}

#ifdef GS_ABI_V2
gs_rows gs_rows_begin(gs_group *g) {
	return (gs_rows){g->rows, g->rows_end, g->row_count, g->v2 && gs__cfg.ninputs > 0, {"", 0}};
}
#else
gs_rows gs_rows_begin(gs_group *g) { return (gs_rows){g->rows, g->rows_end, g->row_count}; }
#endif

bool gs_rows_next(gs_rows *it, gs_slice *row) {
	if (!it->left) return false;
	const unsigned char *p = (const unsigned char *)it->p; /* lengths were checked when parsed */
#ifdef GS_ABI_V2
	if (it->inputs) { /* the row's input index, checked against the names when parsed */
		uint32_t in = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
		it->input = gs__cfg.inputs[in];
		it->p += 4, p += 4;
	}
#endif
	size_t n = (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16 | (size_t)p[3] << 24;
	*row = (gs_slice){it->p + 4, n};
	it->p += 4 + n;
	it->left--;
	return true;
}

int gs_emit(gs_group *g, const void *row, size_t len) {
	(void)g;
	gs__out_str(row, len);
	gs__emitted++;
	return GS_OK;
}

static int gs__err(gs_group *g, int code, const char *msg) {
	g->err = msg, g->err_code = code;
	return code;
}

int gs_fail(gs_group *g, const char *message) {
	return gs__err(g, GS_ERR, gs__cat(message ? message : "", NULL, NULL, NULL));
}
const char *gs_error_message(gs_group *g) { return g->err ? g->err : ""; }

bool gs_state_exists(gs_group *g) { return g->exists; }

bool gs_state_get_option(gs_group *g, gs_slice *value) {
	if (!g->exists) { *value = (gs_slice){NULL, 0}; return false; }
	*value = g->action == 1 ? (gs_slice){g->value, g->value_len} : (gs_slice){g->state ? g->state : "", g->state_len};
	return true;
}

int gs_state_get(gs_group *g, gs_slice *value) {
	if (!gs_state_get_option(g, value))
		return gs__err(g, GS_ERR_NO_STATE, "groupstate: state is either not defined or has already been removed");
	return GS_OK;
}

int gs_state_update(gs_group *g, const void *value, size_t len) {
#ifdef GS_ABI_V2
	if (g->v2) return gs__err(g, GS_ERR_V1_ONLY, "groupstate: gs_state_update is the ABI v1 state handle; a processor's calls use its state variables");
#endif
	if (!value) return gs__err(g, GS_ERR_NULL_STATE, "groupstate: null is not a valid state value");
	char *c = (char *)gs_arena_alloc(len ? len : 1);
	if (!c) return gs__err(g, GS_ERR_NOMEM, "groupstate: out of memory");
	gs__copy(c, (const char *)value, len);
	g->value = c, g->value_len = len, g->exists = true, g->action = 1;
	return GS_OK;
}

void gs_state_remove(gs_group *g) { g->exists = false, g->action = 2; }
bool gs_has_timed_out(gs_group *g) { return g->timed_out; }
int64_t gs_current_processing_time_ms(gs_group *g) { return g->t; }

int gs_set_timeout_duration(gs_group *g, int64_t d) {
#ifdef GS_ABI_V2
	if (g->v2) return gs__err(g, GS_ERR_V1_ONLY, "groupstate: gs_set_timeout_duration is ABI v1; a processor registers timers (gs_timer_register)");
#endif
	if (gs__cfg.mode != GS_TIMEOUT_PROCESSING_TIME)
		return gs__err(g, GS_ERR_DURATION_NOT_ALLOWED, "groupstate: cannot set timeout duration without processing_time timeout");
	if (d <= 0) return gs__err(g, GS_ERR_NON_POSITIVE_DURATION, "groupstate: timeout duration must be positive");
	if (g->t > INT64_MAX - d)
		return gs__err(g, GS_ERR_NON_POSITIVE_DURATION, "groupstate: timeout duration must be positive: processing time + duration overflows");
	g->timeout_set = true, g->timeout_ms = g->t + d;
	return GS_OK;
}

int gs_set_timeout_timestamp(gs_group *g, int64_t ts) {
#ifdef GS_ABI_V2
	if (g->v2) return gs__err(g, GS_ERR_V1_ONLY, "groupstate: gs_set_timeout_timestamp is ABI v1; a processor registers timers (gs_timer_register)");
#endif
	if (gs__cfg.mode != GS_TIMEOUT_EVENT_TIME)
		return gs__err(g, GS_ERR_TIMESTAMP_NOT_ALLOWED, "groupstate: cannot set timeout timestamp without event_time timeout");
	if (ts <= 0) return gs__err(g, GS_ERR_NON_POSITIVE_TIMESTAMP, "groupstate: timeout timestamp must be positive");
	if (ts < g->w) {
		char a[24], b[24];
		gs__fmt_i64(a, ts), gs__fmt_i64(b, g->w);
		const char *m = gs__cat("groupstate: timeout timestamp (", a, ") cannot be earlier than the current watermark (", NULL);
		return gs__err(g, GS_ERR_TIMESTAMP_BEFORE_WATERMARK, gs__cat(m, b, ")", NULL));
	}
	g->timeout_set = true, g->timeout_ms = ts;
	return GS_OK;
}

int gs_current_watermark_ms(gs_group *g, int64_t *w) {
	if (!gs__cfg.has_watermark) return gs__err(g, GS_ERR_NO_WATERMARK, "groupstate: no watermark is defined");
	*w = g->w;
	return GS_OK;
}

void gs_log(int level, const char *msg, size_t len) { gs__host_log(level, msg, (int32_t)len); }
void gs_logs(int level, const char *msg) { gs__host_log(level, msg, (int32_t)strlen(msg)); }

/* ---- config --------------------------------------------------------------------------- */

gs_slice gs_config_name(gs_config *c) { return c->name; }
gs_slice gs_config_json(gs_config *c) { return c->json; }
int gs_config_timeout_mode(gs_config *c) { return c->mode; }
bool gs_config_has_watermark(gs_config *c) { return c->has_watermark; }
int gs_config_fail(gs_config *c, const char *message) {
	c->err = gs__cat(message ? message : "", NULL, NULL, NULL);
	return GS_ERR;
}

/* Go's time.ParseDuration, exactly: [-+]?([0-9]*(\.[0-9]*)?[a-z]+)+ or "0". */
static const char *gs__parse_duration(const char *s, size_t n, int64_t *out) {
	const char *e = s + n;
	uint64_t d = 0;
	bool neg = false;
	if (s < e && (*s == '-' || *s == '+')) neg = *s++ == '-';
	if (e - s == 1 && *s == '0') { *out = 0; return NULL; }
	if (s == e) return "time: invalid duration ";
	while (s < e) {
		uint64_t v = 0, f = 0;
		double scale = 1;
		if (!(*s == '.' || (*s >= '0' && *s <= '9'))) return "time: invalid duration ";
		const char *p0 = s;
		for (; s < e && *s >= '0' && *s <= '9'; s++) {
			if (v > (1ull << 63) / 10) return "time: invalid duration ";
			v = v * 10 + (uint64_t)(*s - '0');
			if (v > (1ull << 63)) return "time: invalid duration ";
		}
		bool pre = s != p0, post = false;
		if (s < e && *s == '.') {
			const char *q = ++s;
			bool overflow = false;
			for (; s < e && *s >= '0' && *s <= '9'; s++) {
				if (overflow) continue;
				if (f > ((1ull << 63) - 1) / 10) { overflow = true; continue; }
				uint64_t y = f * 10 + (uint64_t)(*s - '0');
				if (y > (1ull << 63)) { overflow = true; continue; }
				f = y, scale *= 10;
			}
			post = s != q;
		}
		if (!pre && !post) return "time: invalid duration ";
		const char *u = s;
		while (s < e && *s != '.' && !(*s >= '0' && *s <= '9')) s++;
		size_t ul = (size_t)(s - u);
		if (!ul) return "time: missing unit in duration ";
		uint64_t unit = 0;
		if (ul == 2 && !memcmp(u, "ns", 2)) unit = 1;
		else if ((ul == 2 && !memcmp(u, "us", 2)) || (ul == 3 && (!memcmp(u, "\xc2\xb5s", 3) || !memcmp(u, "\xce\xbcs", 3)))) unit = 1000;
		else if (ul == 2 && !memcmp(u, "ms", 2)) unit = 1000000;
		else if (ul == 1 && *u == 's') unit = 1000000000ull;
		else if (ul == 1 && *u == 'm') unit = 60000000000ull;
		else if (ul == 1 && *u == 'h') unit = 3600000000000ull;
		else return "time: unknown unit in duration ";
		if (v > (1ull << 63) / unit) return "time: invalid duration ";
		v *= unit;
		if (f > 0) {
			v += (uint64_t)((double)f * ((double)unit / scale));
			if (v > (1ull << 63)) return "time: invalid duration ";
		}
		d += v;
		if (d > (1ull << 63)) return "time: invalid duration ";
	}
	if (neg) { *out = (int64_t)(0 - d); return NULL; }
	if (d > (1ull << 63) - 1) return "time: invalid duration ";
	*out = (int64_t)d;
	return NULL;
}

int gs_config_duration_ns(gs_config *c, const char *field, int64_t *ns) {
	gs_slice v;
	*ns = 0;
	int rc = gs_json_find(c->json.ptr, c->json.len, field, &v);
	if (rc != GS_OK) {
		if (rc == GS_ERR_NOT_FOUND) return rc;
		c->err = gs__cat("groupstate: config ", field, ": malformed JSON", NULL);
		return rc;
	}
	const char *why = NULL;
	if (v.ptr[0] == '"') {
		char *s = (char *)gs_arena_alloc(v.len + 1);
		size_t n;
		if (!s) why = "out of memory";
		else if (gs_json_decode_string(v, s, &n) != GS_OK) why = "malformed JSON string";
		else {
			s[n] = 0;
			why = gs__parse_duration(s, n, ns);
			if (why) why = gs__cat(why, "\"", s, "\"");
		}
	} else {
		double ms;
		if (gs_json_double(v, &ms) != GS_OK) why = gs__cat("want a duration string such as \"10s\" or a number of milliseconds, got ", gs__cat_n(v), NULL, NULL);
		else if (!(ms * 1e6 < 9.2e18 && ms * 1e6 > -9.2e18)) why = "duration out of range";
		else *ns = (int64_t)(ms * 1e6);
	}
	if (why) {
		*ns = 0;
		c->err = gs__cat("groupstate: config ", field, ": ", why);
		return GS_ERR_JSON;
	}
	return GS_OK;
}

int gs_config_duration_ms(gs_config *c, const char *field, int64_t *ms) {
	int rc = gs_config_duration_ns(c, field, ms);
	*ms /= 1000000;
	return rc;
}

/* ---- JSON reading --------------------------------------------------------------------- */

static const char *gs__ws(const char *p, const char *e) {
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
	return p;
}

/* Returns the end of the string token at p (p at '"'), or NULL; sets *esc when the string
 * has a backslash escape. */
static inline const char *gs__skip_string_esc(const char *p, const char *e, bool *esc) {
	for (p++; p < e; p++) {
		while (e - p >= 8) { /* skip words without '"', '\\' or a control byte */
			uint64_t x = gs__ld64(p), m = gs__has_byte(x, '"') | gs__has_byte(x, '\\') | gs__has_less(x, 0x20);
			if (m) { /* the lowest flagged byte is the first such byte (little-endian) */
				p += __builtin_ctzll(m) >> 3;
				break;
			}
			p += 8;
		}
		if (p == e) break;
		char c = *p;
		if (c == '"') return p + 1;
		if (c == '\\') {
			*esc = true;
			if (++p == e) return NULL;
			c = *p;
		}
		if ((unsigned char)c < 0x20) return NULL;
	}
	return NULL;
}

static const char *gs__skip_string(const char *p, const char *e) {
	bool esc;
	return gs__skip_string_esc(p, e, &esc);
}

/* Returns the end of the value at p (no leading whitespace), or NULL. Containers are skipped
 * by bracket counting outside strings, without recursion. */
static const char *gs__skip_value(const char *p, const char *e) {
	if (p >= e) return NULL;
	char c = *p;
	if (c == '"') return gs__skip_string(p, e);
	if (c == '{' || c == '[') {
		size_t depth = 0;
		while (p < e) {
			c = *p;
			if (c == '"') { p = gs__skip_string(p, e); if (!p) return NULL; continue; }
			if (c == '{' || c == '[') depth++;
			else if (c == '}' || c == ']') { if (--depth == 0) return p + 1; }
			p++;
		}
		return NULL;
	}
	const char *q = p;
	while (q < e && (*q == '-' || *q == '+' || *q == '.' || (*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z'))) q++;
	if (q == p) return NULL;
	size_t n = (size_t)(q - p);
	if ((n == 4 && (!memcmp(p, "true", 4) || !memcmp(p, "null", 4))) || (n == 5 && !memcmp(p, "false", 5))) return q;
	if (c == '-' || (c >= '0' && c <= '9')) return q; /* a number; checked by its reader */
	return NULL;
}

gs_json_iter gs_json_iter_begin(const char *obj, size_t len) { return (gs_json_iter){obj, obj + len, 0}; }

/* gs_json_iter_next, also telling whether the name has escapes (*esc). */
static inline int gs__iter_next(gs_json_iter *it, gs_slice *name, gs_slice *value, bool *esc) {
	const char *p = gs__ws(it->p, it->end), *e = it->end;
	if (it->state < 0) return GS_ERR_JSON;
	if (it->state == 3) return 0;
	if (it->state == 0) {
		if (p == e || *p != '{') goto bad;
		p = gs__ws(p + 1, e);
		it->state = 1;
	}
	if (p < e && *p == '}') { it->state = 3, it->p = p + 1; return 0; }
	if (it->state == 2) {
		if (p == e || *p != ',') goto bad;
		p = gs__ws(p + 1, e);
	}
	if (p == e || *p != '"') goto bad;
	*esc = false;
	const char *q = gs__skip_string_esc(p, e, esc);
	if (!q) goto bad;
	*name = (gs_slice){p, (size_t)(q - p)};
	p = gs__ws(q, e);
	if (p == e || *p != ':') goto bad;
	p = gs__ws(p + 1, e);
	q = gs__skip_value(p, e);
	if (!q) goto bad;
	*value = (gs_slice){p, (size_t)(q - p)};
	it->p = q, it->state = 2;
	return 1;
bad:
	it->state = -1;
	return GS_ERR_JSON;
}

int gs_json_iter_next(gs_json_iter *it, gs_slice *name, gs_slice *value) {
	bool esc;
	return gs__iter_next(it, name, value, &esc);
}

static int gs__hex4(const char *p, uint32_t *v) {
	*v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		*v <<= 4;
		if (c >= '0' && c <= '9') *v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f') *v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F') *v |= (uint32_t)(c - 'A' + 10);
		else return -1;
	}
	return 0;
}

static char *gs__utf8(char *d, uint32_t r) {
	if (r < 0x80) *d++ = (char)r;
	else if (r < 0x800) *d++ = (char)(0xc0 | r >> 6), *d++ = (char)(0x80 | (r & 0x3f));
	else if (r < 0x10000) *d++ = (char)(0xe0 | r >> 12), *d++ = (char)(0x80 | ((r >> 6) & 0x3f)), *d++ = (char)(0x80 | (r & 0x3f));
	else *d++ = (char)(0xf0 | r >> 18), *d++ = (char)(0x80 | ((r >> 12) & 0x3f)), *d++ = (char)(0x80 | ((r >> 6) & 0x3f)), *d++ = (char)(0x80 | (r & 0x3f));
	return d;
}

int gs_json_decode_string(gs_slice tok, char *dst, size_t *out_len) {
	const char *p = tok.ptr, *e = tok.ptr + tok.len;
	char *d = dst;
	if (tok.len < 2 || p[0] != '"' || e[-1] != '"') return GS_ERR_JSON;
	for (p++, e--; p < e;) {
		char c = *p++;
		if (c != '\\') { *d++ = c; continue; }
		if (p == e) return GS_ERR_JSON;
		c = *p++;
		switch (c) {
		case '"': case '\\': case '/': *d++ = c; break;
		case 'b': *d++ = '\b'; break;
		case 'f': *d++ = '\f'; break;
		case 'n': *d++ = '\n'; break;
		case 'r': *d++ = '\r'; break;
		case 't': *d++ = '\t'; break;
		case 'u': {
			uint32_t r, r2;
			if (e - p < 4 || gs__hex4(p, &r)) return GS_ERR_JSON;
			p += 4;
			if (r >= 0xd800 && r < 0xdc00 && e - p >= 6 && p[0] == '\\' && p[1] == 'u' && !gs__hex4(p + 2, &r2) && r2 >= 0xdc00 && r2 < 0xe000) {
				r = 0x10000 + ((r - 0xd800) << 10) + (r2 - 0xdc00);
				p += 6;
			} else if (r >= 0xd800 && r < 0xe000) r = 0xfffd;
			d = gs__utf8(d, r);
			break;
		}
		default: return GS_ERR_JSON;
		}
	}
	*out_len = (size_t)(d - dst);
	return GS_OK;
}

bool gs_json_name_is(gs_slice tok, const char *name) {
	size_t n = strlen(name);
	if (!memchr(tok.ptr, '\\', tok.len)) return tok.len == n + 2 && gs__eq(tok.ptr + 1, name, n);
	char small[128], *buf = tok.len <= sizeof small ? small : (char *)gs_arena_alloc(tok.len);
	size_t l;
	if (!buf || gs_json_decode_string(tok, buf, &l) != GS_OK) return false;
	return l == n && !memcmp(buf, name, n);
}

/* gs_json_find for a name of n bytes. */
static __attribute__((noinline)) int gs__json_find_n(const char *obj, size_t len, const char *name, size_t n, gs_slice *value) {
	gs_json_iter it = gs_json_iter_begin(obj, len);
	gs_slice k, v;
	bool found = false, esc;
	int rc;
	while ((rc = gs__iter_next(&it, &k, &v, &esc)) == 1) /* names without escapes compared in place */
		if (esc ? gs_json_name_is(k, name) : k.len == n + 2 && gs__eq(k.ptr + 1, name, n)) *value = v, found = true;
	if (rc < 0) return GS_ERR_JSON;
	if (!found || gs_json_is_null(*value)) return GS_ERR_NOT_FOUND;
	return GS_OK;
}

GS__INLINE int gs_json_find(const char *obj, size_t len, const char *name, gs_slice *value) {
	return gs__json_find_n(obj, len, name, strlen(name), value);
}

bool gs_json_is_null(gs_slice t) { return t.len == 4 && !memcmp(t.ptr, "null", 4); }

int gs_json_int64(gs_slice t, int64_t *out) {
	const char *p = t.ptr, *e = t.ptr + t.len;
	bool neg = p < e && *p == '-';
	uint64_t v = 0;
	if (neg) p++;
	if (p == e) return GS_ERR_JSON;
	for (; p < e; p++) {
		if (*p < '0' || *p > '9') return GS_ERR_JSON;
		if (v > (UINT64_MAX - 9) / 10) return GS_ERR_JSON;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (v > (uint64_t)INT64_MAX + (neg ? 1 : 0)) return GS_ERR_JSON;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return GS_OK;
}

int gs_json_double(gs_slice t, double *out) {
	char small[64], *buf = t.len < sizeof small ? small : (char *)gs_arena_alloc(t.len + 1);
	if (!buf) return GS_ERR_NOMEM;
	if (!t.len || !(t.ptr[0] == '-' || (t.ptr[0] >= '0' && t.ptr[0] <= '9'))) return GS_ERR_JSON;
	memcpy(buf, t.ptr, t.len);
	buf[t.len] = 0;
	char *end;
	double v = strtod(buf, &end);
	if (end != buf + t.len || v - v != 0) return GS_ERR_JSON; /* junk, or out of range (inf) */
	*out = v;
	return GS_OK;
}

int gs_json_bool(gs_slice t, bool *out) {
	if (t.len == 4 && !memcmp(t.ptr, "true", 4)) { *out = true; return GS_OK; }
	if (t.len == 5 && !memcmp(t.ptr, "false", 5)) { *out = false; return GS_OK; }
	return GS_ERR_JSON;
}

GS__INLINE int gs_json_get_int64(const char *obj, size_t len, const char *name, int64_t *out) {
	gs_slice v;
	int rc = gs_json_find(obj, len, name, &v);
	return rc ? rc : gs_json_int64(v, out);
}
GS__INLINE int gs_json_get_double(const char *obj, size_t len, const char *name, double *out) {
	gs_slice v;
	int rc = gs_json_find(obj, len, name, &v);
	return rc ? rc : gs_json_double(v, out);
}
GS__INLINE int gs_json_get_bool(const char *obj, size_t len, const char *name, bool *out) {
	gs_slice v;
	int rc = gs_json_find(obj, len, name, &v);
	return rc ? rc : gs_json_bool(v, out);
}
GS__INLINE int gs_json_get_string(const char *obj, size_t len, const char *name, gs_slice *out) {
	gs_slice v;
	int rc = gs_json_find(obj, len, name, &v);
	if (rc) return rc;
	if (v.ptr[0] != '"') return GS_ERR_JSON;
	char *d = (char *)gs_arena_alloc(v.len + 1);
	size_t n;
	if (!d) return GS_ERR_NOMEM;
	if (gs_json_decode_string(v, d, &n)) return GS_ERR_JSON;
	d[n] = 0;
	*out = (gs_slice){d, n};
	return GS_OK;
}

/* ---- JSON writing --------------------------------------------------------------------- */

/* Grows w to hold n more bytes; false (and w->err) when out of memory. */
static __attribute__((noinline)) bool gs__jw_grow(gs_jw *w, size_t n) {
	size_t cap = w->cap ? w->cap * 2 : 256;
	if (n > SIZE_MAX / 4 || w->len > SIZE_MAX / 4) { w->err = GS_ERR_NOMEM; return false; } /* cap cannot overflow */
	while (cap - w->len < n) cap *= 2;
	char *b = (char *)gs_arena_alloc(cap);
	if (!b) { w->err = GS_ERR_NOMEM; return false; }
	if (w->len) memcpy(b, w->buf, w->len);
	w->buf = b, w->cap = cap;
	return true;
}

/* Where the next n bytes go (the caller adds what it wrote to w->len); NULL after an error. */
static inline char *gs__jw_reserve(gs_jw *w, size_t n) {
	if (w->err) return NULL;
	if (w->cap - w->len < n && !gs__jw_grow(w, n)) return NULL;
	return w->buf + w->len;
}

static inline void gs__jw_put(gs_jw *w, const char *s, size_t n) {
	char *d = gs__jw_reserve(w, n);
	if (!d) return;
	gs__copy(d, s, n);
	w->len += n;
}

/* Whether a byte goes into a JSON string as it is, whatever follows it: printable ASCII
 * other than the quote and the backslash (and DEL, which JSON allows). */
static inline bool gs__jw_plain(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }
static inline uint64_t gs__jw_special8(uint64_t x) { /* non-zero iff some byte is not plain */
	return (x & GS__HIGH) | gs__has_less(x, 0x20) | gs__has_byte(x, '"') | gs__has_byte(x, '\\');
}
/* Whether all of [s, s+n) is plain. */
static inline __attribute__((always_inline)) bool gs__jw_all_plain(const char *s, size_t n) {
	if (n < 8) {
		for (size_t i = 0; i < n; i++)
			if (!gs__jw_plain((unsigned char)s[i])) return false;
		return true;
	}
	for (size_t i = 0; i + 8 < n; i += 8)
		if (gs__jw_special8(gs__ld64(s + i))) return false;
	return !gs__jw_special8(gs__ld64(s + n - 8)); /* the last 8 bytes, overlapping */
}

/* Writes s as a JSON string: only the escapes JSON requires (", \, control characters),
 * invalid UTF-8 bytes as U+FFFD. */
static void gs__jw_quote(gs_jw *w, const char *s, size_t n) {
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s, *e = p + n, *run = p;
	if (gs__jw_all_plain(s, n)) { /* the common case: nothing to escape or check, one reservation */
		char *d = gs__jw_reserve(w, n + 2);
		if (!d) return;
		d[0] = '"';
		gs__copy(d + 1, s, n);
		d[n + 1] = '"';
		w->len += n + 2;
		return;
	}
	gs__jw_put(w, "\"", 1);
	while (p < e) {
		unsigned char c = *p;
		if (gs__jw_plain(c)) { p++; continue; }
		size_t l = c < 0x80 ? 1 : c >= 0xc2 && c < 0xe0 ? 2 : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xf0 && c < 0xf5 ? 4 : 0;
		if (l > 1 && (size_t)(e - p) >= l) { /* check continuation bytes and overlongs/surrogates */
			bool ok = true;
			for (size_t i = 1; i < l; i++) ok = ok && (p[i] & 0xc0) == 0x80;
			if (ok && l == 3) ok = !(c == 0xe0 && p[1] < 0xa0) && !(c == 0xed && p[1] >= 0xa0);
			if (ok && l == 4) ok = !(c == 0xf0 && p[1] < 0x90) && !(c == 0xf4 && p[1] >= 0x90);
			if (ok) { p += l; continue; }
		}
		gs__jw_put(w, (const char *)run, (size_t)(p - run));
		if (c == '"') gs__jw_put(w, "\\\"", 2);
		else if (c == '\\') gs__jw_put(w, "\\\\", 2);
		else if (c == '\n') gs__jw_put(w, "\\n", 2);
		else if (c == '\r') gs__jw_put(w, "\\r", 2);
		else if (c == '\t') gs__jw_put(w, "\\t", 2);
		else if (c < 0x20) {
			char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
			gs__jw_put(w, u, 6);
		} else gs__jw_put(w, "\xef\xbf\xbd", 3);
		run = ++p;
	}
	gs__jw_put(w, (const char *)run, (size_t)(p - run));
	gs__jw_put(w, "\"", 1);
}

/* Writes [,]"name": for a name of n bytes; plain: gs__jw_all_plain(name, n). */
static __attribute__((noinline)) void gs__jw_name_n(gs_jw *w, const char *name, size_t n, bool plain) {
	if (plain) { /* nothing to escape: one reservation */
		char *d = gs__jw_reserve(w, n + 4);
		size_t k = 0;
		if (!d) { w->fields++; return; }
		if (w->fields++) d[k++] = ',';
		d[k++] = '"';
		gs__copy(d + k, name, n);
		k += n;
		d[k++] = '"', d[k++] = ':';
		w->len += k;
		return;
	}
	if (w->fields++) gs__jw_put(w, ",", 1);
	gs__jw_quote(w, name, n);
	gs__jw_put(w, ":", 1);
}

/* Inlined, so that for a literal name both arguments are constants. */
static inline __attribute__((always_inline)) void gs__jw_name(gs_jw *w, const char *name) {
	size_t n = strlen(name);
	gs__jw_name_n(w, name, n, gs__jw_all_plain(name, n));
}

static __attribute__((noinline)) void gs__jw_put_n(gs_jw *w, const char *s, size_t n) { gs__jw_put(w, s, n); }

static __attribute__((noinline)) void gs__jw_int64_value(gs_jw *w, int64_t v) {
	char *d = gs__jw_reserve(w, 20);
	if (d) w->len += gs__digits(d, v);
}

void gs_jw_begin(gs_jw *w) {
	char *b = (char *)gs_arena_alloc(256);
	*w = (gs_jw){b, 1, 256, 0, b ? 0 : GS_ERR_NOMEM};
	if (b) b[0] = '{';
	else w->len = 0, w->cap = 0;
}
GS__INLINE void gs_jw_raw(gs_jw *w, const char *name, const char *json, size_t len) {
	gs__jw_name(w, name);
	gs__jw_put_n(w, json, len);
}
GS__INLINE void gs_jw_int64(gs_jw *w, const char *name, int64_t v) {
	gs__jw_name(w, name);
	gs__jw_int64_value(w, v);
}
GS__INLINE void gs_jw_bool(gs_jw *w, const char *name, bool v) { gs_jw_raw(w, name, v ? "true" : "false", v ? 4 : 5); }
GS__INLINE void gs_jw_null(gs_jw *w, const char *name) { gs_jw_raw(w, name, "null", 4); }
GS__INLINE void gs_jw_string(gs_jw *w, const char *name, const char *s, size_t len) {
	gs__jw_name(w, name);
	gs__jw_quote(w, s, len);
}
int gs_jw_end(gs_jw *w, gs_slice *out) {
	gs__jw_put(w, "}", 1);
	if (w->err) return w->err;
	*out = (gs_slice){w->buf, w->len};
	return GS_OK;
}
int gs_emit_jw(gs_group *g, gs_jw *w) {
	gs_slice s;
	int rc = gs_jw_end(w, &s);
	if (rc) return gs__err(g, rc, "groupstate: out of memory");
	return gs_emit(g, s.ptr, s.len);
}

/* ---- ABI v2: transformWithState processors (abi/README.md section 9) ------------------- */
#ifdef GS_ABI_V2

GS__IMPORT("state") int32_t gs__host_state(const void *req, int32_t req_len, void *resp, int32_t resp_cap);

extern const gs_processor *gs__processor __attribute__((weak));

static bool gs__has_processor(void) { return &gs__processor && gs__processor; }

enum { GS__VALUE = 1, GS__LIST = 2, GS__MAP = 3 };
enum { GS__DATA = 0, GS__TIMERS = 1, GS__INITIAL = 2 };
enum { GS__INIT_HAS_WATERMARK = 1, GS__INIT_HAS_INPUTS = 2, GS__INIT_KNOWN = 3 }; /* init flags */
enum { GS__MAX_INPUTS = 16, GS__MAX_INPUT_NAME_LEN = 32 };

/* What is wrong with an input name (abi/README.md 9.3a: 1-32 bytes of [a-z0-9_-] starting with
 * a letter), or NULL. */
static const char *gs__input_name_problem(gs_slice n) {
	if (n.len == 0) return "is empty";
	if (n.len > GS__MAX_INPUT_NAME_LEN) return "is longer than 32 bytes";
	if (n.ptr[0] < 'a' || n.ptr[0] > 'z') return "does not start with a letter a-z";
	for (size_t i = 0; i < n.len; i++) {
		char c = n.ptr[i];
		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-') continue;
		char num[24];
		gs__fmt_i64(num, (int64_t)i);
		return gs__cat("has a byte other than a-z, 0-9, _ and - at offset ", num, NULL, NULL);
	}
	return NULL;
}

size_t gs_config_input_count(gs_config *c) { return c->ninputs; }
gs_slice gs_config_input(gs_config *c, size_t i) { return i < c->ninputs ? c->inputs[i] : (gs_slice){"", 0}; }
gs_slice gs_rows_input(const gs_rows *it) { return it->input; }
enum {
	GS__VALUE_GET = 0x01, GS__VALUE_SET = 0x02, GS__VALUE_CLEAR = 0x03,
	GS__LIST_READ = 0x10, GS__LIST_APPEND = 0x11, GS__LIST_PUT = 0x12, GS__LIST_CLEAR = 0x13, GS__LIST_EXISTS = 0x14,
	GS__MAP_GET = 0x20, GS__MAP_CONTAINS = 0x21, GS__MAP_SET = 0x22, GS__MAP_REMOVE = 0x23,
	GS__MAP_READ = 0x24, GS__MAP_CLEAR = 0x25, GS__MAP_EXISTS = 0x26,
	GS__TIMER_REGISTER = 0x30, GS__TIMER_DELETE = 0x31, GS__TIMER_LIST = 0x32,
};

typedef struct {
	char name[65];
	uint32_t kind;
	int64_t ttl_ms;
} gs__decl;

static gs__decl *gs__decls;
static uint32_t gs__nvars;
static bool gs__declaring;
static const char *gs__decl_err;
static uint32_t gs__page_bytes = 65536;

void gs_set_state_page_bytes(uint32_t max_bytes) { gs__page_bytes = max_bytes ? max_bytes : 1; }

/* A growable malloc'd buffer. */
typedef struct {
	char *p;
	size_t len, cap;
} gs__buf;

static gs__buf gs__ops;   /* the group's writes not sent yet, then a request's reads */
static gs__buf gs__resp;  /* the answers of the last request (not an iteration's) */
static gs__buf *gs__pages; /* the page buffers of iterations */
static size_t gs__npages, gs__pages_used;

static void gs__buf_reserve(gs__buf *b, size_t n) {
	if (b->cap - b->len >= n) return;
	if (n > ((size_t)1 << 31) || b->len > ((size_t)1 << 31)) gs__die("groupstate: state request too large\n");
	size_t cap = b->cap ? b->cap : 4096;
	while (cap - b->len < n) cap *= 2;
	char *p = (char *)realloc(b->p, cap);
	if (!p) gs__die("groupstate: out of memory for a state request\n");
	b->p = p, b->cap = cap;
}
static void gs__op_u8(unsigned v) { gs__buf_reserve(&gs__ops, 1); gs__ops.p[gs__ops.len++] = (char)v; }
static void gs__op_u32(uint32_t v) { gs__buf_reserve(&gs__ops, 4); gs__st_u32(gs__ops.p + gs__ops.len, v); gs__ops.len += 4; }
static void gs__op_i64(int64_t v) { gs__buf_reserve(&gs__ops, 8); gs__st_i64(gs__ops.p + gs__ops.len, v); gs__ops.len += 8; }
static void gs__op_bytes(const void *p, size_t n) {
	if (n > ((size_t)1 << 31)) gs__die("groupstate: state request too large\n");
	gs__buf_reserve(&gs__ops, 4 + n);
	gs__st_u32(gs__ops.p + gs__ops.len, (uint32_t)n);
	if (n) memcpy(gs__ops.p + gs__ops.len + 4, p, n);
	gs__ops.len += 4 + n;
}
static void gs__op_var(unsigned op, uint32_t var) { gs__op_u8(op); gs__op_u32(var); }

/* ---- declarations ---- */

static uint32_t gs__declare(const char *fn, const char *name, uint32_t kind, int64_t ttl_ms) {
	if (!gs__declaring) gs__die("groupstate: a state variable declared outside the processor's init\n");
	if (gs__decl_err) return UINT32_MAX;
	size_t n = name ? strlen(name) : 0;
	const char *why = NULL;
	if (n < 1 || n > 64) why = "a name is 1-64 bytes";
	else if (!(name[0] >= 'a' && name[0] <= 'z')) why = "a name starts with a letter a-z";
	else
		for (size_t i = 0; i < n; i++)
			if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') || name[i] == '_')) why = "a name has only a-z, 0-9 and _";
	if (!why && ttl_ms < 0) why = "ttl_ms is negative";
	for (uint32_t i = 0; !why && i < gs__nvars; i++)
		if (!strcmp(gs__decls[i].name, name)) why = "declared twice";
	if (!why && gs__nvars >= 256) why = "more than 256 state variables";
	if (!why) {
		gs__decl *d = (gs__decl *)realloc(gs__decls, (gs__nvars + 1) * sizeof(gs__decl));
		if (!d) why = "out of memory";
		else gs__decls = d;
	}
	if (why) {
		gs__decl_err = gs__cat(gs__cat("groupstate: ", fn, "(\"", name ? name : ""), "\"): ", why, NULL);
		return UINT32_MAX;
	}
	gs__decl *d = &gs__decls[gs__nvars];
	memcpy(d->name, name, n + 1);
	d->kind = kind, d->ttl_ms = ttl_ms;
	return gs__nvars++;
}

gs_value_var gs_value_state(const char *name, int64_t ttl_ms) { return (gs_value_var){gs__declare("gs_value_state", name, GS__VALUE, ttl_ms)}; }
gs_list_var gs_list_state(const char *name, int64_t ttl_ms) { return (gs_list_var){gs__declare("gs_list_state", name, GS__LIST, ttl_ms)}; }
gs_map_var gs_map_state(const char *name, int64_t ttl_ms) { return (gs_map_var){gs__declare("gs_map_state", name, GS__MAP, ttl_ms)}; }

/* ---- requests ---- */

/* Fails the call: every later state function does nothing and returns GS_ERR_STATE_REFUSED. */
static int gs__fatal(gs_group *g, const char *msg) {
	if (!g->fatal) g->fatal = msg;
	gs__ops.len = 0;
	return gs__err(g, GS_ERR_STATE_REFUSED, g->fatal);
}

/* Checks a call's use of variable var of the given kind: GS_OK, or the error to return. */
static int gs__use(gs_group *g, uint32_t var, uint32_t kind) {
	if (!g->v2) return gs__err(g, GS_ERR_BAD_VAR, "groupstate: a state variable used outside a processor's call");
	if (g->fatal) return GS_ERR_STATE_REFUSED;
	if (var >= gs__nvars || gs__decls[var].kind != kind) return gs__err(g, GS_ERR_BAD_VAR, "groupstate: not a handle of a declared state variable of this kind");
	return GS_OK;
}

/* Sends the pending writes and the read ops appended since mark through groupstate.state
 * (abi/README.md 9.5); the answers go to resp (grown as needed), *ans. When they do not fit,
 * the writes were applied all the same: only the reads are sent again, with a bigger buffer. */
static int gs__request(gs_group *g, size_t mark, gs__buf *resp, gs_slice *ans) {
	const char *req = gs__ops.p;
	size_t rlen = gs__ops.len;
	if (resp->cap < gs__page_bytes + 4096) {
		free(resp->p);
		resp->cap = gs__page_bytes + 4096;
		resp->p = (char *)malloc(resp->cap);
		if (!resp->p) gs__die("groupstate: out of memory for state answers\n");
	}
	for (int attempt = 0;; attempt++) {
		int32_t n = gs__host_state(req, (int32_t)rlen, resp->p, (int32_t)resp->cap);
		if (n < 0) {
			if (n == -1) return gs__fatal(g, "groupstate: the host refused a state request (see the host's log)");
			char num[24];
			gs__fmt_i64(num, n);
			return gs__fatal(g, gs__cat("groupstate: the state function returned ", num, NULL, NULL));
		}
		if ((size_t)n <= resp->cap) {
			gs__ops.len = 0;
			*ans = (gs_slice){resp->p, (size_t)n};
			return GS_OK;
		}
		if (attempt == 3) return gs__fatal(g, "groupstate: the state answers keep growing");
		free(resp->p);
		resp->p = (char *)malloc((size_t)n);
		if (!resp->p) gs__die("groupstate: out of memory for state answers\n");
		resp->cap = (size_t)n;
		req = gs__ops.p + mark, rlen = gs__ops.len - mark; /* resend only the reads */
	}
}

static int gs__bad_answer(gs_group *g, const char *op) {
	return gs__fatal(g, gs__cat("groupstate: malformed state answer of ", op, NULL, NULL));
}

static int gs__u8(gs__rd *r) { /* a 0/1 answer byte */
	if (r->bad || r->p == r->end || *r->p > 1) { r->bad = true; return 0; }
	return *r->p++;
}

/* One read op's answer, appended since mark: a u8 `present`, then (want_value) the bytes. */
static int gs__read_flag(gs_group *g, size_t mark, const char *op, bool want_value, bool *present, gs_slice *value) {
	gs_slice a;
	int rc = gs__request(g, mark, &gs__resp, &a);
	if (rc) return rc;
	gs__rd r = {(const unsigned char *)a.ptr, (const unsigned char *)a.ptr + a.len, false};
	*present = gs__u8(&r);
	if (want_value && *present) value->ptr = gs__bytes(&r, &value->len);
	if (r.bad || r.p != r.end) return gs__bad_answer(g, op);
	return GS_OK;
}

/* A value read into the arena. */
static int gs__read_value(gs_group *g, size_t mark, const char *op, const char *what, gs_slice *value) {
	bool present;
	gs_slice v = {NULL, 0};
	*value = (gs_slice){NULL, 0};
	int rc = gs__read_flag(g, mark, op, true, &present, &v);
	if (rc) return rc;
	if (!present) return gs__err(g, GS_ERR_NOT_FOUND, what);
	char *c = (char *)gs_arena_alloc(v.len ? v.len : 1);
	if (!c) return gs__err(g, GS_ERR_NOMEM, "groupstate: out of memory");
	if (v.len) memcpy(c, v.ptr, v.len);
	*value = (gs_slice){c, v.len};
	return GS_OK;
}

static bool gs__read_bool(gs_group *g, size_t mark, const char *op) {
	bool present = false;
	gs_slice v;
	return gs__read_flag(g, mark, op, false, &present, &v) == GS_OK && present;
}

/* ---- values ---- */

int gs_value_get(gs_group *g, gs_value_var v, gs_slice *value) {
	*value = (gs_slice){NULL, 0};
	int rc = gs__use(g, v.idx, GS__VALUE);
	if (rc) return rc;
	size_t mark = gs__ops.len;
	gs__op_var(GS__VALUE_GET, v.idx);
	return gs__read_value(g, mark, "VALUE_GET", gs__cat("groupstate: value state ", gs__decls[v.idx].name, " has no value", NULL), value);
}

bool gs_value_exists(gs_group *g, gs_value_var v) {
	if (gs__use(g, v.idx, GS__VALUE)) return false;
	size_t mark = gs__ops.len;
	gs__op_var(GS__VALUE_GET, v.idx);
	bool present = false;
	gs_slice val;
	return gs__read_flag(g, mark, "VALUE_GET", true, &present, &val) == GS_OK && present;
}

int gs_value_set(gs_group *g, gs_value_var v, const void *value, size_t len) {
	int rc = gs__use(g, v.idx, GS__VALUE);
	if (rc) return rc;
	if (!value) return gs__err(g, GS_ERR_NULL_STATE, "groupstate: null is not a valid state value");
	gs__op_var(GS__VALUE_SET, v.idx);
	gs__op_bytes(value, len);
	return GS_OK;
}

int gs_value_clear(gs_group *g, gs_value_var v) {
	int rc = gs__use(g, v.idx, GS__VALUE);
	if (rc) return rc;
	gs__op_var(GS__VALUE_CLEAR, v.idx);
	return GS_OK;
}

/* ---- lists ---- */

static gs__buf *gs__page(int *slot) { /* the iterator's page buffer, taken from the pool */
	if (*slot < 0) {
		if (gs__pages_used == gs__npages) {
			gs__buf *p = (gs__buf *)realloc(gs__pages, (gs__npages + 1) * sizeof(gs__buf));
			if (!p) gs__die("groupstate: out of memory for a state page\n");
			gs__pages = p;
			gs__pages[gs__npages++] = (gs__buf){NULL, 0, 0};
		}
		*slot = (int)gs__pages_used++;
	}
	return &gs__pages[*slot];
}

void gs_list_iter_begin(gs_group *g, gs_list_var l, gs_list_iter *it) {
	*it = (gs_list_iter){g, l.idx, -1, NULL, 0, 0, 0};
	int rc = gs__use(g, l.idx, GS__LIST);
	if (rc) it->state = rc;
}

int gs_list_iter_next(gs_list_iter *it, gs_slice *elem) {
	gs_group *g = it->g;
	for (;;) {
		if (it->state < 0) return it->state;
		if (it->left) {
			uint32_t n;
			memcpy(&n, it->p, 4); /* the page was checked when it arrived */
			*elem = (gs_slice){it->p + 4, n};
			it->p += 4 + n, it->left--;
			return 1;
		}
		if (it->state >= 2) { it->state = 3; return 0; }
		if (g->fatal) return it->state = GS_ERR_STATE_REFUSED;
		size_t mark = gs__ops.len;
		gs__op_var(GS__LIST_READ, it->var);
		gs__op_i64((int64_t)(it->state ? it->next : 0));
		gs__op_u32(gs__page_bytes);
		gs_slice a;
		int rc = gs__request(g, mark, gs__page(&it->slot), &a);
		if (rc) return it->state = rc;
		gs__rd r = {(const unsigned char *)a.ptr, (const unsigned char *)a.ptr + a.len, false};
		uint32_t count = gs__u32(&r);
		const char *first = (const char *)r.p;
		for (uint32_t i = 0; i < count && !r.bad; i++) {
			size_t n;
			gs__bytes(&r, &n);
		}
		uint64_t next = (uint64_t)gs__i64(&r);
		if (r.bad || r.p != r.end || (count == 0 && next != 0)) return it->state = gs__bad_answer(g, "LIST_READ");
		it->p = first, it->left = count, it->next = next;
		it->state = next ? 1 : 2;
	}
}

bool gs_list_exists(gs_group *g, gs_list_var l) {
	if (gs__use(g, l.idx, GS__LIST)) return false;
	size_t mark = gs__ops.len;
	gs__op_var(GS__LIST_EXISTS, l.idx);
	return gs__read_bool(g, mark, "LIST_EXISTS");
}

static int gs__list_write(gs_group *g, unsigned op, gs_list_var l, const gs_slice *elems, size_t n) {
	int rc = gs__use(g, l.idx, GS__LIST);
	if (rc) return rc;
	for (size_t i = 0; i < n; i++)
		if (!elems[i].ptr && elems[i].len) return gs__err(g, GS_ERR_NULL_STATE, "groupstate: null is not a valid state value");
	if (n > UINT32_MAX) return gs__err(g, GS_ERR, "groupstate: too many list elements");
	gs__op_var(op, l.idx);
	gs__op_u32((uint32_t)n);
	for (size_t i = 0; i < n; i++) gs__op_bytes(elems[i].ptr, elems[i].len);
	return GS_OK;
}

int gs_list_append(gs_group *g, gs_list_var l, const void *elem, size_t len) {
	if (!elem) return gs__err(g, GS_ERR_NULL_STATE, "groupstate: null is not a valid state value");
	gs_slice e = {(const char *)elem, len};
	return gs__list_write(g, GS__LIST_APPEND, l, &e, 1);
}
int gs_list_append_all(gs_group *g, gs_list_var l, const gs_slice *elems, size_t n) {
	if (!n) return gs__use(g, l.idx, GS__LIST);
	return gs__list_write(g, GS__LIST_APPEND, l, elems, n);
}
int gs_list_put(gs_group *g, gs_list_var l, const gs_slice *elems, size_t n) {
	return gs__list_write(g, GS__LIST_PUT, l, elems, n);
}
int gs_list_clear(gs_group *g, gs_list_var l) {
	int rc = gs__use(g, l.idx, GS__LIST);
	if (rc) return rc;
	gs__op_var(GS__LIST_CLEAR, l.idx);
	return GS_OK;
}

/* ---- maps ---- */

static int gs__map_key_op(gs_group *g, unsigned op, gs_map_var m, const void *key, size_t klen) {
	int rc = gs__use(g, m.idx, GS__MAP);
	if (rc) return rc;
	if (!key && klen) return gs__err(g, GS_ERR, "groupstate: a map key is NULL");
	gs__op_var(op, m.idx);
	gs__op_bytes(key, klen);
	return GS_OK;
}

int gs_map_get(gs_group *g, gs_map_var m, const void *key, size_t klen, gs_slice *value) {
	*value = (gs_slice){NULL, 0};
	size_t mark = gs__ops.len;
	int rc = gs__map_key_op(g, GS__MAP_GET, m, key, klen);
	if (rc) return rc;
	return gs__read_value(g, mark, "MAP_GET", gs__cat("groupstate: map state ", gs__decls[m.idx].name, " has no such key", NULL), value);
}

bool gs_map_contains(gs_group *g, gs_map_var m, const void *key, size_t klen) {
	size_t mark = gs__ops.len;
	if (gs__map_key_op(g, GS__MAP_CONTAINS, m, key, klen)) return false;
	return gs__read_bool(g, mark, "MAP_CONTAINS");
}

int gs_map_set(gs_group *g, gs_map_var m, const void *key, size_t klen, const void *value, size_t vlen) {
	if (!value) return gs__err(g, GS_ERR_NULL_STATE, "groupstate: null is not a valid state value");
	int rc = gs__map_key_op(g, GS__MAP_SET, m, key, klen);
	if (rc) return rc;
	gs__op_bytes(value, vlen);
	return GS_OK;
}

int gs_map_remove(gs_group *g, gs_map_var m, const void *key, size_t klen) {
	return gs__map_key_op(g, GS__MAP_REMOVE, m, key, klen);
}

void gs_map_iter_begin(gs_group *g, gs_map_var m, gs_map_iter *it) {
	*it = (gs_map_iter){g, m.idx, -1, NULL, 0, {"", 0}, 0};
	int rc = gs__use(g, m.idx, GS__MAP);
	if (rc) it->state = rc;
}

/* Bytewise order of byte strings: < 0, 0, > 0. */
static int gs__bytes_cmp(const char *a, size_t an, const char *b, size_t bn) {
	int c = memcmp(a, b, an < bn ? an : bn);
	return c ? c : (an > bn) - (an < bn);
}

int gs_map_iter_next(gs_map_iter *it, gs_slice *key, gs_slice *value) {
	gs_group *g = it->g;
	for (;;) {
		if (it->state < 0) return it->state;
		if (it->left) { /* the page was checked when it arrived */
			uint32_t kn, vn;
			memcpy(&kn, it->p, 4);
			*key = (gs_slice){it->p + 4, kn};
			memcpy(&vn, it->p + 4 + kn, 4);
			*value = (gs_slice){it->p + 8 + kn, vn};
			it->p += 8 + kn + vn, it->left--;
			return 1;
		}
		if (it->state >= 2) { it->state = 3; return 0; }
		if (g->fatal) return it->state = GS_ERR_STATE_REFUSED;
		size_t mark = gs__ops.len;
		gs__op_var(GS__MAP_READ, it->var);
		gs__op_bytes(it->next.ptr, it->next.len); /* copied before the page buffer is reused */
		gs__op_u32(gs__page_bytes);
		gs_slice a;
		int rc = gs__request(g, mark, gs__page(&it->slot), &a);
		if (rc) return it->state = rc;
		gs__rd r = {(const unsigned char *)a.ptr, (const unsigned char *)a.ptr + a.len, false};
		uint32_t count = gs__u32(&r);
		const char *first = (const char *)r.p, *prev = NULL;
		size_t prevn = 0;
		bool ordered = true;
		for (uint32_t i = 0; i < count && !r.bad; i++) {
			size_t kn, vn;
			const char *k = gs__bytes(&r, &kn);
			gs__bytes(&r, &vn);
			if (!r.bad && prev && gs__bytes_cmp(prev, prevn, k, kn) >= 0) ordered = false;
			prev = k, prevn = kn;
		}
		int more = gs__u8(&r);
		gs_slice next;
		next.ptr = gs__bytes(&r, &next.len);
		if (r.bad || r.p != r.end || !ordered || (count == 0 && more) || (!more && next.len))
			return it->state = gs__bad_answer(g, "MAP_READ");
		it->p = first, it->left = count, it->next = next;
		it->state = more ? 1 : 2;
	}
}

bool gs_map_exists(gs_group *g, gs_map_var m) {
	if (gs__use(g, m.idx, GS__MAP)) return false;
	size_t mark = gs__ops.len;
	gs__op_var(GS__MAP_EXISTS, m.idx);
	return gs__read_bool(g, mark, "MAP_EXISTS");
}

int gs_map_clear(gs_group *g, gs_map_var m) {
	int rc = gs__use(g, m.idx, GS__MAP);
	if (rc) return rc;
	gs__op_var(GS__MAP_CLEAR, m.idx);
	return GS_OK;
}

/* ---- timers ---- */

static int gs__timer_use(gs_group *g) {
	if (!g->v2) return gs__err(g, GS_ERR_V1_ONLY, "groupstate: timers are for a processor's calls (ABI v2)");
	if (g->fatal) return GS_ERR_STATE_REFUSED;
	if (gs__cfg.mode == GS_TIMEOUT_NONE)
		return gs__err(g, GS_ERR_TIMERS_NOT_ALLOWED, "groupstate: timers need timeout processing_time or event_time in the deployment spec");
	return GS_OK;
}

static int64_t gs__timer_at(gs_group *g, size_t i) {
	int64_t v;
	memcpy(&v, g->timers + 8 * i, 8);
	return v;
}

int gs_timer_register(gs_group *g, int64_t ts) {
	int rc = gs__timer_use(g);
	if (rc) return rc;
	gs__op_u8(GS__TIMER_REGISTER);
	gs__op_i64(ts);
	return GS_OK;
}

int gs_timer_delete(gs_group *g, int64_t ts) {
	int rc = gs__timer_use(g);
	if (rc) return rc;
	gs__op_u8(GS__TIMER_DELETE);
	gs__op_i64(ts);
	if (g->kind == GS__TIMERS) /* a later timer of this group that is deleted does not fire */
		for (size_t j = g->timer_idx + 1; j < g->timer_count; j++)
			if (gs__timer_at(g, j) == ts) g->skip[j] = true;
	return GS_OK;
}

int gs_timer_list(gs_group *g, const int64_t **timers, size_t *n) {
	*timers = NULL, *n = 0;
	int rc = gs__timer_use(g);
	if (rc == GS_ERR_TIMERS_NOT_ALLOWED) return GS_OK;
	if (rc) return rc;
	size_t mark = gs__ops.len;
	gs__op_u8(GS__TIMER_LIST);
	gs_slice a;
	rc = gs__request(g, mark, &gs__resp, &a);
	if (rc) return rc;
	gs__rd r = {(const unsigned char *)a.ptr, (const unsigned char *)a.ptr + a.len, false};
	uint32_t count = gs__u32(&r);
	if (r.bad || (size_t)(r.end - r.p) != (size_t)count * 8) return gs__bad_answer(g, "TIMER_LIST");
	int64_t *ts = (int64_t *)gs_arena_alloc(count ? count * 8 : 8);
	if (!ts) return gs__err(g, GS_ERR_NOMEM, "groupstate: out of memory");
	for (uint32_t i = 0; i < count; i++) {
		ts[i] = gs__i64(&r);
		if (i && ts[i] <= ts[i - 1]) return gs__bad_answer(g, "TIMER_LIST");
	}
	*timers = ts, *n = count;
	return GS_OK;
}

/* ---- the default initial state ---- */

/* A JSON value token without the whitespace outside strings, in the arena. */
static gs_slice gs__compact(gs_slice v) {
	char *d = (char *)gs_arena_alloc(v.len ? v.len : 1);
	size_t n = 0;
	if (!d) return (gs_slice){NULL, 0};
	bool in = false, esc = false;
	for (size_t i = 0; i < v.len; i++) {
		char c = v.ptr[i];
		if (in) {
			if (esc) esc = false;
			else if (c == '\\') esc = true;
			else if (c == '"') in = false;
		} else if (c == '"') in = true;
		else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
		d[n++] = c;
	}
	return (gs_slice){d, n};
}

/* Walks the elements of a JSON array: 1 an element, 0 the end, GS_ERR_JSON. *p starts at '['. */
static int gs__array_next(const char **p, const char *e, bool *first, gs_slice *elem) {
	const char *q = gs__ws(*p, e);
	if (*first) {
		if (q == e || *q != '[') return GS_ERR_JSON;
		q = gs__ws(q + 1, e);
		if (q < e && *q == ']') { *p = q + 1; *first = false; return 0; }
	} else {
		if (q < e && *q == ']') { *p = q + 1; return 0; }
		if (q == e || *q != ',') return GS_ERR_JSON;
		q = gs__ws(q + 1, e);
	}
	*first = false;
	const char *end = gs__skip_value(q, e);
	if (!end) return GS_ERR_JSON;
	*elem = (gs_slice){q, (size_t)(end - q)};
	*p = end;
	return 1;
}

static int gs__var_named(gs_slice tok) {
	for (uint32_t i = 0; i < gs__nvars; i++)
		if (gs_json_name_is(tok, gs__decls[i].name)) return (int)i;
	return -1;
}

static int gs__initial_fail(gs_group *g, const char *name, const char *what) {
	return gs__err(g, GS_ERR, gs__cat("groupstate: initial state of ", name, ": ", what));
}

static int gs__apply_initial(gs_group *g, gs_slice initial) {
	gs_json_iter it = gs_json_iter_begin(initial.ptr, initial.len);
	gs_slice name, val;
	int rc;
	const char *unknown = NULL;
	while ((rc = gs_json_iter_next(&it, &name, &val)) == 1)
		if (gs__var_named(name) < 0) unknown = gs__cat(unknown ? unknown : "[", unknown ? " " : "", gs__cat_n(name), NULL);
	if (rc < 0 || gs__ws(it.p, initial.ptr + initial.len) != initial.ptr + initial.len)
		return gs__err(g, GS_ERR, gs__cat("groupstate: initial state is not a JSON object of state variables: ", gs__cat_n(initial), NULL, NULL));
	if (unknown) {
		const char *declared = "";
		for (uint32_t i = 0; i < gs__nvars; i++) declared = gs__cat(declared, i ? ", " : "", gs__decls[i].name, NULL);
		return gs__err(g, GS_ERR, gs__cat("groupstate: initial state names undeclared state variables ", unknown, "] (declared: ", gs__cat(declared, ")", NULL, NULL)));
	}
	it = gs_json_iter_begin(initial.ptr, initial.len);
	while (gs_json_iter_next(&it, &name, &val) == 1) {
		if (gs_json_is_null(val)) continue;
		uint32_t var = (uint32_t)gs__var_named(name);
		const char *vn = gs__decls[var].name;
		switch (gs__decls[var].kind) {
		case GS__VALUE: {
			gs_slice c = gs__compact(val);
			gs__op_var(GS__VALUE_SET, var);
			gs__op_bytes(c.ptr, c.len);
			break;
		}
		case GS__LIST: {
			const char *p = val.ptr, *e = val.ptr + val.len;
			bool first = true;
			gs_slice el;
			uint32_t n = 0;
			while ((rc = gs__array_next(&p, e, &first, &el)) == 1) {
				if (gs_json_is_null(el)) return gs__initial_fail(g, vn, "an element is null, which is not a valid state value");
				n++;
			}
			if (rc < 0) return gs__initial_fail(g, vn, gs__cat("want a JSON array, got ", gs__cat_n(val), NULL, NULL));
			gs__op_var(GS__LIST_PUT, var);
			gs__op_u32(n);
			p = val.ptr, first = true;
			while (gs__array_next(&p, e, &first, &el) == 1) {
				gs_slice c2 = gs__compact(el);
				gs__op_bytes(c2.ptr, c2.len);
			}
			break;
		}
		case GS__MAP: {
			gs_json_iter mi = gs_json_iter_begin(val.ptr, val.len);
			gs_slice k, v;
			if (val.ptr[0] != '{') return gs__initial_fail(g, vn, gs__cat("want a JSON object, got ", gs__cat_n(val), NULL, NULL));
			gs__op_var(GS__MAP_CLEAR, var);
			while ((rc = gs_json_iter_next(&mi, &k, &v)) == 1) {
				if (gs_json_is_null(v)) return gs__initial_fail(g, vn, "a map value is null, which is not a valid state value");
				char *kd = (char *)gs_arena_alloc(k.len);
				size_t kn;
				if (!kd || gs_json_decode_string(k, kd, &kn)) return gs__initial_fail(g, vn, "a bad map key");
				gs_slice c3 = gs__compact(v);
				gs__op_var(GS__MAP_SET, var);
				gs__op_bytes(kd, kn);
				gs__op_bytes(c3.ptr, c3.len);
			}
			if (rc < 0) return gs__initial_fail(g, vn, gs__cat("want a JSON object, got ", gs__cat_n(val), NULL, NULL));
			break;
		}
		}
	}
	return GS_OK;
}

/* ---- the v2 exports ---- */

static int64_t gs__v2_init(int32_t ptr, int32_t len) {
	gs__rd r = {(const unsigned char *)(uintptr_t)(uint32_t)ptr, (const unsigned char *)(uintptr_t)(uint32_t)ptr + (uint32_t)len, false};
	uint32_t version = gs__u32(&r), mode = gs__u32(&r), flags = gs__u32(&r);
	size_t nlen, clen;
	char num[24];
	gs__arena_reset();
	if (r.bad) return gs__init_fail("groupstate: init buffer malformed");
	if (version != 2) {
		gs__fmt_i64(num, version);
		return gs__init_fail(gs__cat("groupstate: host ABI version ", num, ", module implements version 2", NULL));
	}
	if (flags & ~(uint32_t)GS__INIT_KNOWN) { /* what follows may be laid out as this SDK does not know */
		static const char hex[] = "0123456789abcdef";
		uint32_t f = flags & ~(uint32_t)GS__INIT_KNOWN;
		char *q = num + sizeof num;
		*--q = 0;
		do *--q = hex[f & 15], f >>= 4; while (f);
		*--q = 'x', *--q = '0';
		return gs__init_fail(gs__cat("groupstate: host sets init flags ", q, " this SDK does not implement (rebuild with a newer SDK)", NULL));
	}
	const char *name = gs__bytes(&r, &nlen), *json = gs__bytes(&r, &clen);
	gs_slice names[GS__MAX_INPUTS];
	size_t ninputs = 0;
	if (flags & GS__INIT_HAS_INPUTS) {
		uint32_t n = gs__u32(&r);
		if (!r.bad && (n == 0 || n > GS__MAX_INPUTS)) {
			gs__fmt_i64(num, n);
			return gs__init_fail(gs__cat("groupstate: init buffer malformed: input_count ", num, " (want 1 to 16)", NULL));
		}
		for (uint32_t i = 0; i < n && !r.bad; i++) {
			names[i].ptr = gs__bytes(&r, &names[i].len);
			if (r.bad) break;
			const char *why = gs__input_name_problem(names[i]);
			gs__fmt_i64(num, i);
			if (why) return gs__init_fail(gs__cat("groupstate: init buffer malformed: input ", num, ": name ", why));
			for (uint32_t j = 0; j < i; j++) {
				if (names[j].len != names[i].len || memcmp(names[j].ptr, names[i].ptr, names[i].len)) continue;
				char other[24];
				gs__fmt_i64(other, j);
				const char *m = gs__cat("groupstate: init buffer malformed: input ", num, ": name \"", gs__cat_n(names[i]));
				return gs__init_fail(gs__cat(m, "\" already used by input ", other, NULL));
			}
			ninputs++;
		}
	}
	if (r.bad || r.p != r.end) return gs__init_fail("groupstate: init buffer malformed");
	gs_slice *inputs = NULL;
	if (ninputs) { /* copies that live as long as the instance */
		inputs = (gs_slice *)malloc(ninputs * sizeof(gs_slice));
		if (!inputs) return gs__init_fail("groupstate: out of memory");
		for (size_t i = 0; i < ninputs; i++) {
			char *d = gs__dup(names[i].ptr, names[i].len);
			if (!d) return gs__init_fail("groupstate: out of memory");
			inputs[i] = (gs_slice){d, names[i].len};
		}
	}
	if (mode > 2) {
		gs__fmt_i64(num, mode);
		return gs__init_fail(gs__cat("groupstate: unknown timeout mode ", num, NULL, NULL));
	}
	const char *j = gs__ws(json, json + clen);
	if (j == json + clen || *j != '{') return gs__init_fail("groupstate: config is not a JSON object");
	if (&gs__handler && gs__handler) return gs__init_fail("groupstate: a module registers a handler (GS_HANDLER) or a processor (GS_PROCESSOR), not both");
	char *n = gs__dup(name, nlen), *c = gs__dup(json, clen);
	if (!n || !c) return gs__init_fail("groupstate: out of memory");
	gs__cfg = (gs_config){{n, nlen}, {c, clen}, (int)mode, (flags & 1) != 0, NULL, inputs, ninputs};
	gs__nvars = 0, gs__decl_err = NULL;
	const gs_processor *p = gs__processor;
	for (int step = 0; step < 2; step++) {
		gs_init_fn fn = step == 0 ? (&gs__init_hook ? gs__init_hook : NULL) : p->init;
		if (!fn) continue;
		gs__declaring = step == 1;
		int rc = fn(&gs__cfg);
		gs__declaring = false;
		if (rc != GS_OK) {
			const char *m = gs__cfg.err;
			if (!m || !*m) m = gs__decl_err;
			if (!m || !*m) {
				gs__fmt_i64(num, rc);
				m = gs__cat("groupstate: init hook returned ", num, NULL, NULL);
			}
			return gs__init_fail(m);
		}
	}
	if (gs__decl_err) return gs__init_fail(gs__decl_err);
	gs__ready = true;
	gs__out_len = 0;
	gs__out_u32(0);
	gs__out_u32(0);
	gs__out_u32(gs__nvars);
	for (uint32_t i = 0; i < gs__nvars; i++) {
		gs__out_str(gs__decls[i].name, strlen(gs__decls[i].name));
		gs__out_u32(gs__decls[i].kind);
		gs__st_i64(gs__out_reserve(8), gs__decls[i].ttl_ms);
		gs__out_len += 8;
	}
	return gs__pack();
}

/* Runs the processor for group g; returns the error message, or NULL. */
static const char *gs__v2_call(gs_group *g, gs_slice initial) {
	const gs_processor *p = gs__processor;
	int rc = GS_OK;
	if (g->kind == GS__DATA) {
		rc = p->on_rows ? p->on_rows(g) : gs_fail(g, "groupstate: the processor has no on_rows");
	} else if (g->kind == GS__TIMERS) {
		if (!p->on_timer) rc = gs_fail(g, "groupstate: the processor has no on_timer");
		for (size_t i = 0; i < g->timer_count && rc == GS_OK && !g->fatal; i++) {
			if (g->skip[i]) continue;
			g->timer_idx = i;
			rc = p->on_timer(g, gs__timer_at(g, i));
		}
	} else {
		rc = p->on_initial_state ? p->on_initial_state(g, initial) : gs__apply_initial(g, initial);
	}
	if (g->fatal) return g->fatal;
	if (rc == GS_OK) return NULL;
	const char *m = rc == g->err_code ? g->err : NULL;
	if (!m || !*m) {
		char num[24];
		gs__fmt_i64(num, rc);
		m = gs__cat("groupstate: handler returned ", num, NULL, NULL);
	}
	return m;
}

static int64_t gs__v2_malformed(uint32_t i, const char *why) {
	char num[24];
	gs__fmt_i64(num, i);
	return gs__call_error(gs__cat("groupstate: process buffer malformed at group ", num, ": ", why));
}

static int64_t gs__v2_process(int32_t ptr, int32_t len) {
	gs__out_len = 0;
	gs__arena_reset();
	if (!gs__ready) return gs__call_error("groupstate: process called before a successful init");
	gs__rd r = {(const unsigned char *)(uintptr_t)(uint32_t)ptr, (const unsigned char *)(uintptr_t)(uint32_t)ptr + (uint32_t)len, false};
	uint32_t count = gs__u32(&r);
	int64_t t = gs__i64(&r), w = gs__i64(&r);
	if (r.bad) return gs__call_error("groupstate: process buffer malformed: short header");
	gs__out_u32(0);
	gs__out_u32(count);
	uint32_t first_kind = 0;
	for (uint32_t i = 0; i < count; i++) {
		gs_group g;
		memset(&g, 0, sizeof g);
		gs_slice initial = {NULL, 0};
		uint32_t kind = gs__u32(&r);
		g.key.ptr = gs__bytes(&r, &g.key.len);
		if (r.bad) return gs__v2_malformed(i, "short");
		if (kind > GS__INITIAL) return gs__v2_malformed(i, "unknown kind");
		if (i == 0) first_kind = kind;
		else if (kind != first_kind) return gs__v2_malformed(i, "groups of different kinds");
		if (kind == GS__DATA) {
			g.row_count = gs__u32(&r);
			g.rows = (const char *)r.p;
			for (size_t k = 0; k < g.row_count && !r.bad; k++) {
				size_t n;
				if (gs__cfg.ninputs) { /* the row's input: an index into the init's names */
					uint32_t in = gs__u32(&r);
					if (!r.bad && in >= gs__cfg.ninputs) {
						char a[24], b[24], c[24];
						gs__fmt_i64(a, (int64_t)k), gs__fmt_i64(b, in), gs__fmt_i64(c, (int64_t)gs__cfg.ninputs);
						return gs__v2_malformed(i, gs__cat(gs__cat("row ", a, ": input index ", b), " out of range (the deployment has ", c, " inputs)"));
					}
				}
				gs__bytes(&r, &n);
			}
			g.rows_end = (const char *)r.p;
			if (!r.bad && !g.row_count) return gs__v2_malformed(i, "a DATA group without rows");
		} else if (kind == GS__TIMERS) {
			g.timer_count = gs__u32(&r);
			g.timers = (const char *)r.p;
			if (!r.bad && (size_t)(r.end - r.p) / 8 < g.timer_count) r.bad = true;
			if (r.bad) return gs__v2_malformed(i, "short");
			r.p += 8 * g.timer_count;
			if (!g.timer_count) return gs__v2_malformed(i, "a TIMERS group without timers");
			for (size_t k = 1; k < g.timer_count; k++)
				if (gs__timer_at(&g, k) <= gs__timer_at(&g, k - 1)) return gs__v2_malformed(i, "timers out of order");
		} else {
			initial.ptr = gs__bytes(&r, &initial.len);
		}
		if (r.bad) return gs__v2_malformed(i, "short");
		g.index = (int)i;
		g.t = t, g.w = w;
		g.v2 = true, g.kind = (int)kind;
		gs__arena_reset();
		if (kind == GS__TIMERS) {
			g.skip = (bool *)gs_arena_alloc(g.timer_count);
			if (!g.skip) gs__die("groupstate: out of memory\n");
			memset(g.skip, 0, g.timer_count);
		}
		gs__ops.len = 0, gs__pages_used = 0;
		gs__host_group_begin((int32_t)i);
		size_t emits_at = gs__out_len;
		gs__out_u32(0);
		gs__emitted = 0;
		const char *m = gs__v2_call(&g, initial);
		if (m) { /* status 1: no emits, the message, no ops */
			gs__out_len = emits_at;
			gs__out_u32(0);
			gs__out_u32(1);
			gs__out_str(m, strlen(m));
			gs__out_u32(0);
		} else {
			gs__out_patch_u32(emits_at, gs__emitted);
			gs__out_u32(0);
			gs__out_u32(0);
			gs__out_str(gs__ops.p, gs__ops.len);
		}
		gs__ops.len = 0;
	}
	if (r.p != r.end) return gs__call_error("groupstate: trailing bytes in process buffer");
	return gs__pack();
}

GS__EXPORT("gs_abi_version") int32_t gs_abi_version(void) { return gs__has_processor() ? 2 : GS__V1_NAME(gs_abi_version)(); }
GS__EXPORT("gs_init") int64_t gs_init(int32_t ptr, int32_t len) {
	return gs__has_processor() ? gs__v2_init(ptr, len) : GS__V1_NAME(gs_init)(ptr, len);
}
GS__EXPORT("gs_process") int64_t gs_process(int32_t ptr, int32_t len) {
	return gs__has_processor() ? gs__v2_process(ptr, len) : GS__V1_NAME(gs_process)(ptr, len);
}

#endif /* GS_ABI_V2 */

#endif /* GROUPSTATE_IMPLEMENTED */
#endif /* GROUPSTATE_IMPLEMENTATION */
