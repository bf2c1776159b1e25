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
 * The implementation exports memory, gs_abi_version, gs_alloc, gs_init and gs_process, and
 * imports only groupstate.group_begin, groupstate.log (when gs_log is used) and, on a fatal
 * out-of-memory, wasi_snapshot_preview1.fd_write. See docs/handlers/c.md and abi/README.md.
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
};

struct gs_config {
	gs_slice name, json;
	int mode;
	bool has_watermark;
	const char *err;
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

GS__EXPORT("gs_abi_version") int32_t gs_abi_version(void) { return GS_ABI_VERSION; }

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

GS__EXPORT("gs_init") int64_t gs_init(int32_t ptr, int32_t len) {
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
	gs__out_len = 0;
	gs__out_u32(1);
	gs__out_str(msg, strlen(msg));
	return gs__pack();
}

GS__EXPORT("gs_process") int64_t gs_process(int32_t ptr, int32_t len) {
	gs__out_len = 0;
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
		gs__arena_reset();
		gs__host_group_begin((int32_t)i);
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

gs_rows gs_rows_begin(gs_group *g) { return (gs_rows){g->rows, g->rows_end, g->row_count}; }

bool gs_rows_next(gs_rows *it, gs_slice *row) {
	if (!it->left) return false;
	const unsigned char *p = (const unsigned char *)it->p; /* lengths were checked when parsed */
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
	if (gs__cfg.mode != GS_TIMEOUT_PROCESSING_TIME)
		return gs__err(g, GS_ERR_DURATION_NOT_ALLOWED, "groupstate: cannot set timeout duration without processing_time timeout");
	if (d <= 0) return gs__err(g, GS_ERR_NON_POSITIVE_DURATION, "groupstate: timeout duration must be positive");
	if (g->t > INT64_MAX - d)
		return gs__err(g, GS_ERR_NON_POSITIVE_DURATION, "groupstate: timeout duration must be positive: processing time + duration overflows");
	g->timeout_set = true, g->timeout_ms = g->t + d;
	return GS_OK;
}

int gs_set_timeout_timestamp(gs_group *g, int64_t ts) {
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

#endif /* GROUPSTATE_IMPLEMENTED */
#endif /* GROUPSTATE_IMPLEMENTATION */
