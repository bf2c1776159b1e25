/*
 * glue.c: the groupstate ABI v1 (abi/README.md) for CPython 3.11 built as a WASI reactor
 * (issue 31). Linked with libpython3.11.a instead of Programs/python.o by build.sh.
 *
 * - gs_init starts the interpreter (once per instance), installs the importer of the
 *   handler's sources (embedded in the module by internal/pybuild, see "Sources" below),
 *   imports the groupstate package, gives it the init buffer and imports the handler's entry.
 * - gs_process decodes the process buffer here in C, calls the entry handle(key, rows, state)
 *   once per group through the C API and encodes the results. The state is a GroupState, a C
 *   type defined here (no Python code runs per group but the handler's). A Python exception
 *   (SystemExit included: nothing here calls PyErr_Print, which would exit) fails its group
 *   with the traceback as the error.
 * - The groupstate package's modules run from bytecode compiled when this module was built
 *   (gs_frozen_sdk.h, see frozen_code), when the embedded sources are the text it was
 *   compiled from.
 *
 * - ABI v2 (abi/README.md section 9, Spark 4's StatefulProcessor): internal/pybuild writes the
 *   version into the sources slot (the build decides it from the handler's entry: a class is a
 *   StatefulProcessor). gs_init and gs_process then hand their buffers to the groupstate
 *   package (groupstate.stateful_processor._init_v2 / _process_v2), which parses them, runs the
 *   processor and returns the result bytes; _groupstate.group_begin and _groupstate.state are
 *   the host's functions for it.
 *
 * Nothing here touches files, the environment or sockets: the interpreter's standard library
 * is frozen into the module, and the handler's sources are in its memory.
 */
#define PY_SSIZE_T_CLEAN
#include "Python.h"
#include "marshal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#define GS_EXPORT(name) __attribute__((export_name(name)))
#define GS_IMPORT(name) __attribute__((import_module("groupstate"), import_name(name)))

GS_IMPORT("log") void gs_host_log(int32_t level, const char *ptr, int32_t len);
GS_IMPORT("group_begin") void gs_host_group_begin(int32_t index);
GS_IMPORT("state") int32_t gs_host_state(const void *req, int32_t req_len, void *resp, int32_t resp_cap);

/* ------------------------------------------------------------------------------------------
 * Sources. internal/pybuild writes the handler's .py files (and the groupstate package) into
 * gs_sources_area with an active data segment, and their length into gs_sources_slot.len. It
 * finds the slot by its magic, reads the area's address and capacity from it, and refuses
 * sources larger than the capacity. The area is zero-filled memory (.bss): it costs nothing in
 * the module file, and an instance's memory holds only what was written into it.
 *
 * Blob layout (little-endian): u32 file count, then per file a u32 name length, the name (a
 * path such as "logincount.py" or "groupstate/__init__.py"), a u32 content length and the
 * content. The file "__groupstate_entry__" holds "module:function" (v1) or "module:Class" (v2).
 * The slot's abi field is the module's ABI version (1 or 2; 0, as built, reads as 1).
 * ------------------------------------------------------------------------------------------ */
#define GS_SOURCES_CAP (4u << 20)
char gs_sources_area[GS_SOURCES_CAP] __attribute__((used));

struct gs_sources_slot {
	char magic[24];
	char *area;
	uint32_t cap;
	uint32_t len;
	uint32_t abi;
};
/* The magic is 24 bytes with no terminator; internal/pybuild (pybuild.slotMagic) matches it. */
__attribute__((used)) volatile struct gs_sources_slot gs_sources_slot = {
	{'g', 's', '-', 'p', 'y', 't', 'h', 'o', 'n', '-', 's', 'o', 'u', 'r', 'c', 'e', 's', '-', 'v', '2', '.', '.', '.', '.'},
	gs_sources_area,
	GS_SOURCES_CAP,
	0,
	0,
};

/* ------------------------------------------------------------------------------------------
 * Buffers
 * ------------------------------------------------------------------------------------------ */
static uint8_t *in_buf;
static size_t in_cap;

typedef struct {
	uint8_t *p;
	size_t len, cap;
	int oom;
} gs_buf;

static gs_buf out;

static void buf_reserve(gs_buf *b, size_t n) {
	if (b->oom || b->len + n <= b->cap) return;
	size_t c = b->cap ? b->cap : 4096;
	while (c < b->len + n) c *= 2;
	uint8_t *p = realloc(b->p, c);
	if (!p) {
		b->oom = 1;
		return;
	}
	b->p = p;
	b->cap = c;
}
static void buf_put(gs_buf *b, const void *d, size_t n) {
	buf_reserve(b, n);
	if (b->oom) return;
	memcpy(b->p + b->len, d, n);
	b->len += n;
}
static void buf_u32(gs_buf *b, uint32_t v) {
	uint8_t d[4] = {v, v >> 8, v >> 16, v >> 24};
	buf_put(b, d, 4);
}
static void buf_i64(gs_buf *b, int64_t x) {
	uint64_t v = (uint64_t)x;
	uint8_t d[8];
	for (int i = 0; i < 8; i++) d[i] = (uint8_t)(v >> (8 * i));
	buf_put(b, d, 8);
}
static void buf_bytes(gs_buf *b, const void *d, size_t n) {
	buf_u32(b, (uint32_t)n);
	buf_put(b, d, n);
}
static void put_u32_at(gs_buf *b, size_t at, uint32_t v) {
	if (b->oom) return;
	uint8_t d[4] = {v, v >> 8, v >> 16, v >> 24};
	memcpy(b->p + at, d, 4);
}

static int64_t pack(const void *p, size_t n) { return (int64_t)(((uint64_t)(uintptr_t)p << 32) | (uint32_t)n); }

typedef struct {
	const uint8_t *p, *end;
	int bad;
} rd;

static uint32_t rd_u32(rd *r) {
	if (r->bad || r->end - r->p < 4) {
		r->bad = 1;
		return 0;
	}
	uint32_t v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 | (uint32_t)r->p[3] << 24;
	r->p += 4;
	return v;
}
static int64_t rd_i64(rd *r) {
	uint64_t lo = rd_u32(r), hi = rd_u32(r);
	return (int64_t)(lo | hi << 32);
}
static const uint8_t *rd_bytes(rd *r, uint32_t *n) {
	*n = rd_u32(r);
	if (r->bad || (size_t)(r->end - r->p) < *n) {
		r->bad = 1;
		*n = 0;
		return NULL;
	}
	const uint8_t *s = r->p;
	r->p += *n;
	return s;
}

/* ------------------------------------------------------------------------------------------
 * Exports
 * ------------------------------------------------------------------------------------------ */
static volatile uint32_t group_cell = 0xFFFFFFFFu;

static int32_t module_abi(void) { return gs_sources_slot.abi == 2 ? 2 : 1; }

GS_EXPORT("gs_abi_version") int32_t gs_abi_version(void) { return module_abi(); }

GS_EXPORT("gs_group_cell") int32_t gs_group_cell(void) { return (int32_t)(uintptr_t)&group_cell; }

GS_EXPORT("gs_alloc") int32_t gs_alloc(int32_t size) {
	if (size <= 0 || size > (1 << 30)) return 0;
	if ((size_t)size > in_cap) {
		size_t c = in_cap ? in_cap : 65536;
		while (c < (size_t)size) c *= 2;
		free(in_buf);
		in_buf = malloc(c);
		if (!in_buf) {
			in_cap = 0;
			return 0;
		}
		in_cap = c;
	}
	return (int32_t)(uintptr_t)in_buf;
}

/* The interpreter's objects, kept for the instance's life. */
static int ready;
static PyObject *entry;       /* the handler's function */
static PyObject *scan_once;   /* json's C scanner: groupstate._scan_once(str, index) -> (value, end) */
static PyObject *empty_str;
static PyObject *format_exc;  /* groupstate._format_exception(exc) -> str */

/* What the groupstate package binds at its import (_groupstate._bind) and sets at init
 * (_groupstate._configure), for GroupState below and the outputs' encoding. */
static PyObject *err_value, *err_type, *err_runtime; /* groupstate.GroupState{Value,Type,Runtime}Error */
static PyObject *encode_chunks; /* groupstate._encode_chunks(value, 0) -> the chunks of its compact JSON */
static PyObject *parse_duration_ns; /* groupstate._parse_duration_ns(str) -> int */
static int timeout_mode;      /* 0 none, 1 processing time, 2 event time */
static int has_watermark;

/* The message of the current Python exception: its traceback as groupstate._format_exception
 * formats it (or a fallback), at most 8 KiB (the end kept: the exception is on the last line).
 * Clears the exception. Returns a new reference to a str, or NULL. */
static PyObject *exception_text(void) {
	PyObject *t, *v, *tb;
	PyErr_Fetch(&t, &v, &tb);
	if (!t) return PyUnicode_FromString("groupstate: unknown error");
	PyErr_NormalizeException(&t, &v, &tb);
	if (tb && v) PyException_SetTraceback(v, tb);
	PyObject *s = format_exc && v ? PyObject_CallOneArg(format_exc, v) : NULL;
	if (!s || !PyUnicode_Check(s)) {
		Py_XDECREF(s);
		PyErr_Clear();
		s = v ? PyObject_Str(v) : NULL;
		if (!s) {
			PyErr_Clear();
			s = PyUnicode_FromString("groupstate: an exception that cannot be formatted");
		}
	}
	Py_XDECREF(t);
	Py_XDECREF(v);
	Py_XDECREF(tb);
	return s;
}

/* Appends the current exception's text as a byte string. */
static void put_exception(gs_buf *b) {
	PyObject *s = exception_text();
	Py_ssize_t n = 0;
	const char *u = s ? PyUnicode_AsUTF8AndSize(s, &n) : NULL;
	if (!u) {
		PyErr_Clear();
		u = "groupstate: an exception that cannot be formatted";
		n = (Py_ssize_t)strlen(u);
	}
	const Py_ssize_t max = 8192;
	if (n > max) {
		u += n - max;
		n = max;
	}
	buf_bytes(b, u, (size_t)n);
	Py_XDECREF(s);
}

static int64_t fail_init(const char *msg) {
	out.len = 0;
	out.oom = 0;
	buf_u32(&out, 1);
	buf_bytes(&out, msg, strlen(msg));
	return pack(out.p, out.len);
}

static int64_t fail_init_exception(void) {
	out.len = 0;
	out.oom = 0;
	buf_u32(&out, 1);
	put_exception(&out);
	return pack(out.p, out.len);
}

/* ------------------------------------------------------------------------------------------
 * The _groupstate built-in module: the embedded sources and the host's log.
 * ------------------------------------------------------------------------------------------ */
static PyObject *m_files(PyObject *self, PyObject *unused) {
	PyObject *d = PyDict_New();
	if (!d) return NULL;
	uint32_t len = gs_sources_slot.len;
	if (len > GS_SOURCES_CAP) len = GS_SOURCES_CAP;
	rd r = {(const uint8_t *)gs_sources_area, (const uint8_t *)gs_sources_area + len, 0};
	uint32_t n = len ? rd_u32(&r) : 0;
	for (uint32_t i = 0; i < n && !r.bad; i++) {
		uint32_t nl, cl;
		const uint8_t *name = rd_bytes(&r, &nl);
		const uint8_t *content = rd_bytes(&r, &cl);
		if (r.bad) break;
		PyObject *k = PyUnicode_DecodeUTF8((const char *)name, nl, NULL);
		PyObject *v = PyBytes_FromStringAndSize((const char *)content, cl);
		if (!k || !v || PyDict_SetItem(d, k, v) < 0) {
			Py_XDECREF(k);
			Py_XDECREF(v);
			Py_DECREF(d);
			return NULL;
		}
		Py_DECREF(k);
		Py_DECREF(v);
	}
	if (r.bad) {
		Py_DECREF(d);
		PyErr_SetString(PyExc_RuntimeError, "groupstate: the module's embedded sources are malformed (rebuild it)");
		return NULL;
	}
	return d;
}

/* ------------------------------------------------------------------------------------------
 * GroupState: PySpark's GroupState (applyInPandasWithState) as a C type, so that a group runs
 * no Python code but the handler's (it was a Python class: its __init__, properties and
 * methods were five to eight Python calls per group). Spark's errors are groupstate's Python
 * exception classes, with the messages the Python class had. run_group reads the outcome
 * (action, timeout, the state's JSON) from the struct.
 * ------------------------------------------------------------------------------------------ */
enum { ACTION_KEEP = 0, ACTION_UPDATE = 1, ACTION_REMOVE = 2 };

typedef struct {
	PyObject_HEAD
	PyObject *value; /* the state value, NULL when there is none */
	PyObject *raw;   /* its compact JSON (UTF-8 bytes) after update, else NULL */
	int exists, timed_out, action;
	long long T, W, timeout;
} gs_state;

static PyTypeObject gs_state_type;

/* One of groupstate's error classes, or RuntimeError before the package bound them. */
#define ERR(cls) ((cls) ? (cls) : PyExc_RuntimeError)

/* Compact JSON of value (groupstate._encode), a new str or NULL with an exception set. */
static PyObject *encode_str(PyObject *value) {
	if (!encode_chunks) {
		PyErr_SetString(PyExc_RuntimeError, "groupstate: the package is not loaded");
		return NULL;
	}
	PyObject *zero = PyLong_FromLong(0);
	PyObject *chunks = zero ? PyObject_CallFunctionObjArgs(encode_chunks, value, zero, NULL) : NULL;
	Py_XDECREF(zero);
	if (!chunks) return NULL;
	PyObject *s = PyUnicode_Join(empty_str, chunks);
	Py_DECREF(chunks);
	return s;
}

/* The compact JSON of the plain values handlers mostly make, written as UTF-8 straight into b
 * (no chunk list, no joined str): exact dicts with str keys, exact lists and tuples, exact
 * str, int and finite float, bool and None, at most 32 levels deep. Returns 1 when written,
 * 0 when the value is anything else (b as it was; the caller then uses json's encoder, which
 * gives the same bytes for these and raises its own errors for the rest), -1 with an
 * exception set (out of memory). The bytes are json's (groupstate._encode): separators "," and
 * ":", ensure_ascii off, json's escapes, int.__repr__ and float.__repr__. */
static int json_fast_value(gs_buf *b, PyObject *v, int depth);

static int json_fast_str(gs_buf *b, PyObject *v) {
	Py_ssize_t n;
	const char *u = PyUnicode_AsUTF8AndSize(v, &n);
	if (!u) {
		PyErr_Clear(); /* a lone surrogate: json's encoder path decides */
		return 0;
	}
	static const char hex[] = "0123456789abcdef";
	buf_reserve(b, (size_t)n + 2);
	buf_put(b, "\"", 1);
	Py_ssize_t from = 0;
	for (Py_ssize_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)u[i];
		if (c >= 0x20 && c != '"' && c != '\\') continue;
		buf_put(b, u + from, (size_t)(i - from));
		from = i + 1;
		char e[6] = {'\\', 0, 0, 0, 0, 0};
		size_t el = 2;
		switch (c) {
		case '"': e[1] = '"'; break;
		case '\\': e[1] = '\\'; break;
		case '\b': e[1] = 'b'; break;
		case '\f': e[1] = 'f'; break;
		case '\n': e[1] = 'n'; break;
		case '\r': e[1] = 'r'; break;
		case '\t': e[1] = 't'; break;
		default:
			e[1] = 'u', e[2] = '0', e[3] = '0', e[4] = hex[c >> 4], e[5] = hex[c & 0xf];
			el = 6;
		}
		buf_put(b, e, el);
	}
	buf_put(b, u + from, (size_t)(n - from));
	buf_put(b, "\"", 1);
	return 1;
}

static int json_fast_repr(gs_buf *b, PyObject *v, reprfunc repr) {
	PyObject *r = repr(v);
	if (!r) return -1;
	Py_ssize_t n;
	const char *u = PyUnicode_AsUTF8AndSize(r, &n);
	if (!u) {
		Py_DECREF(r);
		return -1;
	}
	buf_put(b, u, (size_t)n);
	Py_DECREF(r);
	return 1;
}

static int json_fast_value(gs_buf *b, PyObject *v, int depth) {
	if (depth > 32) return 0;
	if (PyUnicode_CheckExact(v)) return json_fast_str(b, v);
	if (v == Py_None) {
		buf_put(b, "null", 4);
		return 1;
	}
	if (v == Py_True) {
		buf_put(b, "true", 4);
		return 1;
	}
	if (v == Py_False) {
		buf_put(b, "false", 5);
		return 1;
	}
	if (PyLong_CheckExact(v)) {
		int overflow;
		long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
		if (overflow) return json_fast_repr(b, v, PyLong_Type.tp_repr);
		char d[24];
		int n = snprintf(d, sizeof d, "%lld", x);
		buf_put(b, d, (size_t)n);
		return 1;
	}
	if (PyFloat_CheckExact(v)) {
		if (!isfinite(PyFloat_AS_DOUBLE(v))) return 0;
		return json_fast_repr(b, v, PyFloat_Type.tp_repr);
	}
	if (PyDict_CheckExact(v)) {
		buf_put(b, "{", 1);
		Py_ssize_t pos = 0;
		PyObject *k, *x;
		int first = 1;
		while (PyDict_Next(v, &pos, &k, &x)) {
			if (!PyUnicode_CheckExact(k)) return 0;
			if (!first) buf_put(b, ",", 1);
			first = 0;
			int r = json_fast_str(b, k);
			if (r <= 0) return r;
			buf_put(b, ":", 1);
			Py_INCREF(x); /* a value's repr may run code that changes the dict */
			r = json_fast_value(b, x, depth + 1);
			Py_DECREF(x);
			if (r <= 0) return r;
		}
		buf_put(b, "}", 1);
		return 1;
	}
	if (PyList_CheckExact(v) || PyTuple_CheckExact(v)) {
		buf_put(b, "[", 1);
		for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(v); i++) {
			if (i) buf_put(b, ",", 1);
			PyObject *x = PySequence_Fast_GET_ITEM(v, i);
			Py_INCREF(x);
			int r = json_fast_value(b, x, depth + 1);
			Py_DECREF(x);
			if (r <= 0) return r;
		}
		buf_put(b, "]", 1);
		return 1;
	}
	return 0;
}

/* value's compact JSON appended to b (no length prefix): the fast path, else json's encoder.
 * 0, or -1 with an exception set. */
static int json_put(gs_buf *b, PyObject *value) {
	size_t at = b->len;
	int r = json_fast_value(b, value, 0);
	if (r > 0) return 0;
	b->len = at;
	if (r < 0) return -1;
	PyObject *s = encode_str(value);
	if (!s) return -1;
	Py_ssize_t n;
	const char *u = PyUnicode_AsUTF8AndSize(s, &n);
	if (!u) {
		Py_DECREF(s);
		return -1;
	}
	buf_put(b, u, (size_t)n);
	Py_DECREF(s);
	return 0;
}

static void state_reset(gs_state *s, int exists, PyObject *value, int timed_out, long long T, long long W) {
	Py_CLEAR(s->value);
	Py_CLEAR(s->raw);
	s->exists = exists;
	if (exists) {
		Py_INCREF(value);
		s->value = value;
	}
	s->timed_out = timed_out;
	s->T = T;
	s->W = W;
	s->action = ACTION_KEEP;
	s->timeout = 0;
}

static gs_state *state_alloc(void) {
	gs_state *s = PyObject_GC_New(gs_state, &gs_state_type);
	if (!s) return NULL;
	s->value = s->raw = NULL;
	s->exists = s->timed_out = s->action = 0;
	s->T = s->W = s->timeout = 0;
	PyObject_GC_Track(s);
	return s;
}

/* GroupState(exists, value, timed_out, processing_time_ms, watermark_ms) */
static PyObject *state_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
	int exists, timed_out;
	PyObject *value;
	long long T, W;
	static char *kwlist[] = {"exists", "value", "timed_out", "processing_time_ms", "watermark_ms", NULL};
	if (!PyArg_ParseTupleAndKeywords(args, kwds, "pOpLL:GroupState", kwlist, &exists, &value, &timed_out, &T, &W)) return NULL;
	gs_state *s = state_alloc();
	if (s) state_reset(s, exists, value, timed_out, T, W);
	return (PyObject *)s;
}

static int state_traverse(gs_state *s, visitproc visit, void *arg) {
	Py_VISIT(s->value);
	Py_VISIT(s->raw);
	return 0;
}

static int state_clear(gs_state *s) {
	Py_CLEAR(s->value);
	Py_CLEAR(s->raw);
	return 0;
}

static void state_dealloc(gs_state *s) {
	PyObject_GC_UnTrack(s);
	state_clear(s);
	PyObject_GC_Del(s);
}

static PyObject *state_get_exists(gs_state *s, void *unused) { return PyBool_FromLong(s->exists); }

static PyObject *state_get_get(gs_state *s, void *unused) {
	if (!s->exists) {
		PyErr_SetString(ERR(err_value), "groupstate: state is either not defined or has already been removed");
		return NULL;
	}
	Py_INCREF(s->value);
	return s->value;
}

static PyObject *state_get_option(gs_state *s, void *unused) {
	PyObject *v = s->exists ? s->value : Py_None;
	Py_INCREF(v);
	return v;
}

static PyObject *state_get_timed_out(gs_state *s, void *unused) { return PyBool_FromLong(s->timed_out); }

static PyObject *state_update(gs_state *s, PyObject *v) {
	if (v == Py_None) {
		PyErr_SetString(ERR(err_type), "groupstate: null is not a valid state value");
		return NULL;
	}
	gs_buf scratch = {0}; /* not static: json's encoder may run code that updates a state */
	PyObject *raw = NULL;
	int r = json_put(&scratch, v);
	if (r == 0) raw = scratch.oom ? PyErr_NoMemory() : PyBytes_FromStringAndSize((const char *)scratch.p, (Py_ssize_t)scratch.len);
	free(scratch.p);
	if (r == 0) {
		if (!raw) return NULL;
	} else {
		if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_ValueError)) return NULL;
		/* raise GroupStateTypeError(f"groupstate: encoding state: {e}") from None */
		PyObject *t, *e, *tb;
		PyErr_Fetch(&t, &e, &tb);
		PyErr_NormalizeException(&t, &e, &tb);
		PyObject *msg = e ? PyUnicode_FromFormat("groupstate: encoding state: %S", e) : NULL;
		Py_XDECREF(t);
		Py_XDECREF(e);
		Py_XDECREF(tb);
		PyObject *err = msg ? PyObject_CallOneArg(ERR(err_type), msg) : NULL;
		Py_XDECREF(msg);
		if (!err) return NULL;
		PyException_SetCause(err, NULL); /* from None: also suppresses the context */
		PyErr_SetObject((PyObject *)Py_TYPE(err), err);
		Py_DECREF(err);
		return NULL;
	}
	Py_INCREF(v);
	Py_XSETREF(s->value, v);
	Py_XSETREF(s->raw, raw);
	s->exists = 1;
	s->action = ACTION_UPDATE;
	Py_RETURN_NONE;
}

static PyObject *state_remove(gs_state *s, PyObject *unused) {
	Py_CLEAR(s->value);
	Py_CLEAR(s->raw);
	s->exists = 0;
	s->action = ACTION_REMOVE;
	Py_RETURN_NONE;
}

static PyObject *state_set_timeout_duration(gs_state *s, PyObject *d) {
	if (timeout_mode != 1) {
		PyErr_SetString(ERR(err_runtime), "groupstate: cannot set timeout duration without processing_time timeout");
		return NULL;
	}
	if (PyBool_Check(d) || !(PyLong_Check(d) || PyUnicode_Check(d))) {
		PyErr_SetString(ERR(err_type), "groupstate: a timeout duration is an int of milliseconds or a string such as \"10s\"");
		return NULL;
	}
	long long ms;
	int overflow = 0;
	if (PyUnicode_Check(d)) {
		PyObject *ns_o = PyObject_CallOneArg(parse_duration_ns, d);
		if (!ns_o) return NULL;
		long long ns = PyLong_AsLongLong(ns_o); /* the parser's result fits in 64 bits */
		Py_DECREF(ns_o);
		if (ns == -1 && PyErr_Occurred()) return NULL;
		ms = ns / 1000000; /* truncated toward zero, as the Python class did */
	} else {
		ms = PyLong_AsLongLongAndOverflow(d, &overflow);
		if (ms == -1 && PyErr_Occurred()) return NULL;
	}
	if (overflow < 0 || (!overflow && ms <= 0)) {
		PyErr_SetString(ERR(err_value), "groupstate: timeout duration must be positive");
		return NULL;
	}
	long long ts;
	if (overflow > 0 || __builtin_add_overflow(s->T, ms, &ts)) {
		PyErr_SetString(ERR(err_value), "groupstate: timeout duration overflows the processing time");
		return NULL;
	}
	s->timeout = ts;
	Py_RETURN_NONE;
}

static PyObject *state_set_timeout_timestamp(gs_state *s, PyObject *t) {
	if (timeout_mode != 2) {
		PyErr_SetString(ERR(err_runtime), "groupstate: cannot set timeout timestamp without event_time timeout");
		return NULL;
	}
	if (PyBool_Check(t) || !PyLong_Check(t)) {
		PyErr_SetString(ERR(err_type), "groupstate: a timeout timestamp is an int of epoch milliseconds");
		return NULL;
	}
	int overflow = 0;
	long long ts = PyLong_AsLongLongAndOverflow(t, &overflow);
	if (ts == -1 && PyErr_Occurred()) return NULL;
	if (overflow < 0 || (!overflow && ts <= 0)) {
		PyErr_SetString(ERR(err_value), "groupstate: timeout timestamp must be positive");
		return NULL;
	}
	if (!overflow && ts < s->W) {
		PyErr_Format(ERR(err_value), "groupstate: timeout timestamp (%lld) cannot be earlier than the current watermark (%lld)", ts, s->W);
		return NULL;
	}
	if (overflow) {
		PyErr_SetString(ERR(err_value), "groupstate: timeout timestamp must fit in 64 bits");
		return NULL;
	}
	s->timeout = ts;
	Py_RETURN_NONE;
}

static PyObject *state_watermark(gs_state *s, PyObject *unused) {
	if (!has_watermark) {
		PyErr_SetString(ERR(err_runtime), "groupstate: no watermark is defined (configure event_time with a watermark_delay)");
		return NULL;
	}
	return PyLong_FromLongLong(s->W);
}

static PyObject *state_processing_time(gs_state *s, PyObject *unused) { return PyLong_FromLongLong(s->T); }

static PyObject *state_str(gs_state *s) { return PyUnicode_FromFormat("GroupState(%R)", s->exists ? s->value : Py_None); }

static PyGetSetDef state_getset[] = {
	{"exists", (getter)state_get_exists, NULL, "Whether the key has a state value.", NULL},
	{"get", (getter)state_get_get, NULL, "The state value; raises GroupStateValueError when there is none.", NULL},
	{"getOption", (getter)state_get_option, NULL, "The state value, or None when there is none.", NULL},
	{"hasTimedOut", (getter)state_get_timed_out, NULL, "Whether this is a timeout call (no rows).", NULL},
	{NULL},
};

static PyMethodDef state_methods[] = {
	{"update", (PyCFunction)state_update, METH_O,
	 "update(newValue): sets the state value; None is refused (GroupStateTypeError), as is a value JSON cannot encode."},
	{"remove", (PyCFunction)state_remove, METH_NOARGS, "remove(): removes the state value (a timeout set in this call stays)."},
	{"setTimeoutDuration", (PyCFunction)state_set_timeout_duration, METH_O,
	 "setTimeoutDuration(durationMs): times the key out durationMs (an int of milliseconds, or a duration string such as "
	 "\"10s\") of processing time from now, unless it gets rows first. Needs the deployment's timeout mode processing_time."},
	{"setTimeoutTimestamp", (PyCFunction)state_set_timeout_timestamp, METH_O,
	 "setTimeoutTimestamp(timestampMs): times the key out when the watermark passes timestampMs (epoch milliseconds). "
	 "Needs the deployment's timeout mode event_time."},
	{"getCurrentWatermarkMs", (PyCFunction)state_watermark, METH_NOARGS,
	 "getCurrentWatermarkMs(): the batch's event-time watermark; raises without event_time in the spec."},
	{"getCurrentProcessingTimeMs", (PyCFunction)state_processing_time, METH_NOARGS,
	 "getCurrentProcessingTimeMs(): the batch's processing time (the same for every group of the batch)."},
	{NULL},
};

static PyTypeObject gs_state_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "groupstate.GroupState",
	.tp_basicsize = sizeof(gs_state),
	.tp_dealloc = (destructor)state_dealloc,
	.tp_repr = (reprfunc)state_str,
	.tp_str = (reprfunc)state_str,
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
	.tp_doc = "The state of one key for one call: PySpark's GroupState (applyInPandasWithState).\n\n"
	          "Values are plain Python values stored as JSON (dicts, lists, str, int, float, bool).",
	.tp_traverse = (traverseproc)state_traverse,
	.tp_clear = (inquiry)state_clear,
	.tp_methods = state_methods,
	.tp_getset = state_getset,
	.tp_new = state_new,
};

/* _bind(value_error, type_error, runtime_error, encode_chunks, parse_duration_ns), at the
 * groupstate package's import. */
static PyObject *m_bind(PyObject *self, PyObject *args) {
	PyObject *a[5];
	if (!PyArg_UnpackTuple(args, "_bind", 5, 5, &a[0], &a[1], &a[2], &a[3], &a[4])) return NULL;
	PyObject **dst[5] = {&err_value, &err_type, &err_runtime, &encode_chunks, &parse_duration_ns};
	for (int i = 0; i < 5; i++) {
		Py_INCREF(a[i]);
		Py_XSETREF(*dst[i], a[i]);
	}
	Py_RETURN_NONE;
}

/* _configure(timeout_mode, has_watermark), at init. */
static PyObject *m_configure(PyObject *self, PyObject *args) {
	int mode, wm;
	if (!PyArg_ParseTuple(args, "ip", &mode, &wm)) return NULL;
	timeout_mode = mode;
	has_watermark = wm;
	Py_RETURN_NONE;
}

/* The SDK's modules compiled when the runtime was built (gs_frozen_sdk.h, written by build.sh
 * with sdk/python/runtime/freeze_sdk.py): the bytecode of each groupstate/NAME.py with the
 * FNV-1a hash of the source it was compiled from. */
#include "gs_frozen_sdk.h"

static uint64_t fnv1a(const uint8_t *p, size_t n) {
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* frozen_code(origin, source) -> the code object frozen for origin when source is the text it
 * was compiled from, else None (the importer compiles the text then). */
static PyObject *m_frozen_code(PyObject *self, PyObject *args) {
	const char *origin;
	const char *src;
	Py_ssize_t n;
	if (!PyArg_ParseTuple(args, "sy#", &origin, &src, &n)) return NULL;
	for (const struct gs_frozen *f = gs_frozen_sdk; f->name; f++) {
		if (strcmp(f->name, origin) != 0) continue;
		if (f->source_len != (size_t)n || f->source_hash != fnv1a((const uint8_t *)src, (size_t)n)) break;
		return PyMarshal_ReadObjectFromString((const char *)f->code, (Py_ssize_t)f->code_len);
	}
	Py_RETURN_NONE;
}

/* compile(source, origin) -> code: the builtin compile(source, origin, "exec", dont_inherit=True)
 * of bytes, without the builtin's check for an AST argument, whose first use creates all of
 * the ast module's types (about 8 ms of an instance's start). */
static PyObject *m_compile(PyObject *self, PyObject *args) {
	const char *src;
	Py_ssize_t n;
	PyObject *origin;
	if (!PyArg_ParseTuple(args, "y#U", &src, &n, &origin)) return NULL;
	if (strlen(src) != (size_t)n) {
		PyErr_SetString(PyExc_ValueError, "source code string cannot contain null bytes");
		return NULL;
	}
	PyCompilerFlags flags = _PyCompilerFlags_INIT;
	flags.cf_flags = PyCF_SOURCE_IS_UTF8;
	return Py_CompileStringObject(src, origin, Py_file_input, &flags, -1);
}

static PyObject *m_log(PyObject *self, PyObject *args) {
	int level;
	const char *s;
	Py_ssize_t n;
	if (!PyArg_ParseTuple(args, "is#", &level, &s, &n)) return NULL;
	gs_host_log(level, s, (int32_t)n);
	Py_RETURN_NONE;
}

/* group_begin(i): group i of the process buffer is about to run (ABI v2, abi/README.md 9.1). */
static PyObject *m_group_begin(PyObject *self, PyObject *arg) {
	long i = PyLong_AsLong(arg);
	if (i == -1 && PyErr_Occurred()) return NULL;
	group_cell = (uint32_t)i;
	gs_host_group_begin((int32_t)i);
	Py_RETURN_NONE;
}

static char *resp_buf;
static size_t resp_cap;

/* state(request, reads_at) -> bytes, or None when the host refused the request: sends the op
 * list request through groupstate.state (abi/README.md 9.5) and returns the answers. When they
 * do not fit, the writes were applied all the same, and only the reads (request[reads_at:])
 * are sent again with a buffer of the size the host asked for. */
static PyObject *m_state(PyObject *self, PyObject *args) {
	const char *req;
	Py_ssize_t n, reads_at;
	if (!PyArg_ParseTuple(args, "y#n", &req, &n, &reads_at)) return NULL;
	if (reads_at < 0 || reads_at > n || n > INT32_MAX) {
		PyErr_SetString(PyExc_ValueError, "groupstate: bad state request");
		return NULL;
	}
	if (!resp_buf) {
		resp_cap = 65536 + 4096;
		resp_buf = malloc(resp_cap);
		if (!resp_buf) return PyErr_NoMemory();
	}
	for (int attempt = 0;; attempt++) {
		int32_t got = gs_host_state(req, (int32_t)n, resp_buf, (int32_t)resp_cap);
		if (got < 0) Py_RETURN_NONE;
		if ((size_t)got <= resp_cap) return PyBytes_FromStringAndSize(resp_buf, got);
		if (attempt == 3) {
			PyErr_SetString(PyExc_RuntimeError, "groupstate: the state answers keep growing");
			return NULL;
		}
		free(resp_buf);
		resp_buf = malloc((size_t)got);
		resp_cap = resp_buf ? (size_t)got : 0;
		if (!resp_buf) return PyErr_NoMemory();
		req += reads_at; /* resend only the reads */
		n -= reads_at;
		reads_at = 0;
	}
}

static PyMethodDef gs_methods[] = {
	{"group_begin", m_group_begin, METH_O, "group_begin(i): the host's group_begin (ABI v2)."},
	{"state", m_state, METH_VARARGS, "state(request, reads_at) -> bytes or None: the host's state function (ABI v2)."},
	{"files", m_files, METH_NOARGS, "files() -> dict: the embedded sources, path -> bytes."},
	{"log", m_log, METH_VARARGS, "log(level, message): writes to the host's log."},
	{"_bind", m_bind, METH_VARARGS, "_bind(value_error, type_error, runtime_error, encode_chunks, parse_duration_ns): the groupstate package's parts GroupState uses."},
	{"_configure", m_configure, METH_VARARGS, "_configure(timeout_mode, has_watermark): the deployment's, for GroupState."},
	{"compile", m_compile, METH_VARARGS, "compile(source, origin) -> code: compile(source, origin, 'exec', dont_inherit=True)."},
	{"frozen_code", m_frozen_code, METH_VARARGS, "frozen_code(origin, source) -> the SDK module's code compiled at build time, or None."},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef gs_module = {PyModuleDef_HEAD_INIT, "_groupstate", NULL, -1, gs_methods};

static PyObject *gs_module_init(void) {
	if (PyType_Ready(&gs_state_type) < 0) return NULL;
	PyObject *m = PyModule_Create(&gs_module);
	if (!m) return NULL;
	Py_INCREF(&gs_state_type);
	if (PyModule_AddObject(m, "GroupState", (PyObject *)&gs_state_type) < 0) {
		Py_DECREF(&gs_state_type);
		Py_DECREF(m);
		return NULL;
	}
	return m;
}

/* The sources importer (bootstrap.py), compiled when the module was built (gs_frozen_sdk.h):
 * installed before anything else is imported, so that `import groupstate` and the handler's
 * own modules work with no file system. Run in __main__ as PyRun_SimpleString would; 0 or -1. */
static int run_bootstrap(void) {
	PyObject *code = PyMarshal_ReadObjectFromString((const char *)gs_frozen_bootstrap, (Py_ssize_t)sizeof gs_frozen_bootstrap);
	PyObject *main = code ? PyImport_AddModule("__main__") : NULL; /* borrowed */
	PyObject *d = main ? PyModule_GetDict(main) : NULL;
	PyObject *r = d ? PyEval_EvalCode(code, d, d) : NULL;
	Py_XDECREF(code);
	if (!r) {
		PyErr_Clear();
		return -1;
	}
	Py_DECREF(r);
	return 0;
}

static int start_interpreter(void) {
	PyStatus st;
	PyPreConfig pre;
	PyPreConfig_InitIsolatedConfig(&pre);
	pre.utf8_mode = 1;
	st = Py_PreInitialize(&pre);
	if (PyStatus_Exception(st)) return -1;
	if (PyImport_AppendInittab("_groupstate", gs_module_init) < 0) return -1;
	PyConfig c;
	PyConfig_InitIsolatedConfig(&c);
	c.site_import = 0;
	c.pathconfig_warnings = 0;
	c.install_signal_handlers = 0;
	c.write_bytecode = 0;
	c.user_site_directory = 0;
	c.buffered_stdio = 0;
	c.module_search_paths_set = 1; /* empty: no file system paths */
	c.use_frozen_modules = 1;
	c.safe_path = 1;
	/* A fixed string hash seed: the same set iteration order in every instance and run. */
	c.use_hash_seed = 1;
	c.hash_seed = 0;
	st = PyConfig_SetString(&c, &c.program_name, L"python");
	if (!PyStatus_Exception(st)) st = PyConfig_SetString(&c, &c.home, L"/");
	if (!PyStatus_Exception(st)) st = Py_InitializeFromConfig(&c);
	PyConfig_Clear(&c);
	if (PyStatus_Exception(st)) return -1;
	return 0;
}

static PyObject *attr_of(const char *module, const char *name) {
	PyObject *m = PyImport_ImportModule(module);
	if (!m) return NULL;
	PyObject *a = PyObject_GetAttrString(m, name);
	Py_DECREF(m);
	return a;
}

/* A v2 call into the groupstate package: fn(buffer) -> bytes; 0 and an exception set, or the
 * bytes copied into out (after prefix bytes of the given length, already in out). */
static int call_v2(PyObject *fn, int32_t ptr, int32_t len) {
	PyObject *arg = PyBytes_FromStringAndSize((const char *)(uintptr_t)ptr, (Py_ssize_t)(uint32_t)len);
	PyObject *res = arg ? PyObject_CallOneArg(fn, arg) : NULL;
	Py_XDECREF(arg);
	if (!res) return -1;
	char *b;
	Py_ssize_t n;
	if (PyBytes_AsStringAndSize(res, &b, &n) < 0) {
		Py_DECREF(res);
		return -1;
	}
	buf_put(&out, b, (size_t)n);
	Py_DECREF(res);
	return 0;
}

static PyObject *init_v2_fn, *process_v2_fn;
static int v2_fast_init(void);

/* gs_init of a v2 module, the interpreter started: groupstate.stateful_processor._init_v2(init
 * buffer) parses the buffer, imports the handler, runs the processor's init and returns the
 * declarations (abi/README.md 9.2). */
static int64_t init_v2(int32_t ptr, int32_t len) {
	format_exc = attr_of("groupstate", "_format_exception");
	if (!format_exc) return fail_init_exception();
	init_v2_fn = attr_of("groupstate.stateful_processor", "_init_v2");
	process_v2_fn = init_v2_fn ? attr_of("groupstate.stateful_processor", "_process_v2") : NULL;
	if (!process_v2_fn) return fail_init_exception();
	out.len = 0;
	out.oom = 0;
	buf_u32(&out, 0);
	buf_u32(&out, 0);
	if (call_v2(init_v2_fn, ptr, len) < 0) return fail_init_exception();
	if (out.oom) return fail_init("groupstate: out of memory");
	if (v2_fast_init() < 0) return fail_init_exception();
	ready = 1;
	return pack(out.p, out.len);
}

GS_EXPORT("gs_init") int64_t gs_init(int32_t ptr, int32_t len) {
	rd r = {(const uint8_t *)(uintptr_t)ptr, (const uint8_t *)(uintptr_t)ptr + (uint32_t)len, 0};
	uint32_t version = rd_u32(&r), mode = rd_u32(&r), flags = rd_u32(&r);
	uint32_t name_len, config_len;
	const uint8_t *name = rd_bytes(&r, &name_len);
	const uint8_t *config = rd_bytes(&r, &config_len);
	/* v2: what follows config depends on the flags; the groupstate package checks it. */
	if (r.bad || (module_abi() == 1 && r.p != r.end)) return fail_init("groupstate: malformed init buffer");
	if (version != (uint32_t)module_abi()) {
		char msg[96];
		snprintf(msg, sizeof msg, "groupstate: host ABI version %u, module implements version %d", version, (int)module_abi());
		return fail_init(msg);
	}
	if (ready) return fail_init("groupstate: gs_init called twice");
	if (start_interpreter() < 0) return fail_init("groupstate: the Python interpreter failed to start");
	if (run_bootstrap() < 0) return fail_init("groupstate: installing the sources importer failed");
	empty_str = PyUnicode_FromString("");
	if (!empty_str) return fail_init("groupstate: out of memory");
	if (module_abi() == 2) return init_v2(ptr, len);

	format_exc = attr_of("groupstate", "_format_exception");
	if (!format_exc) return fail_init_exception();
	scan_once = attr_of("groupstate", "_scan_once");
	if (!scan_once) return fail_init_exception();
	if (!encode_chunks || !err_value) return fail_init("groupstate: the groupstate package did not bind its parts (_groupstate._bind)");
	/* groupstate._init(name, config, timeout_mode, flags) -> the entry function */
	PyObject *init = attr_of("groupstate", "_init");
	if (!init) return fail_init_exception();
	entry = PyObject_CallFunction(init, "y#y#II", (const char *)name, (Py_ssize_t)name_len,
	                              (const char *)config, (Py_ssize_t)config_len, mode, flags);
	Py_DECREF(init);
	if (!entry) return fail_init_exception();
	ready = 1;
	out.len = 0;
	out.oom = 0;
	buf_u32(&out, 0);
	buf_u32(&out, 0);
	return pack(out.p, out.len);
}

static int64_t fail_call(const char *msg) {
	out.len = 0;
	out.oom = 0;
	buf_u32(&out, 1);
	buf_bytes(&out, msg, strlen(msg));
	return out.oom ? 0 : pack(out.p, out.len);
}

/* Decodes one JSON value (a row, a key, a state) with json's C scanner, without json.loads's
 * checks in Python: the host hands over valid JSON (rows and keys), and a state is what a
 * handler stored. Leading whitespace is skipped (ASCII, so its byte count is its index);
 * trailing bytes are ignored. A new reference, or NULL with an exception set. */
static PyObject *decode_json(const uint8_t *p, uint32_t n, const char *what) {
	uint32_t i = 0;
	while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r')) i++;
	PyObject *s = PyUnicode_DecodeUTF8((const char *)p, n, NULL);
	if (!s) return NULL;
	PyObject *idx = PyLong_FromUnsignedLong(i);
	PyObject *t = idx ? PyObject_CallFunctionObjArgs(scan_once, s, idx, NULL) : NULL;
	Py_XDECREF(idx);
	Py_DECREF(s);
	if (!t) {
		if (PyErr_ExceptionMatches(PyExc_StopIteration)) {
			PyErr_Clear();
			PyErr_Format(PyExc_ValueError, "groupstate: %s is not JSON", what);
		}
		return NULL;
	}
	PyObject *v = PyTuple_GET_ITEM(t, 0);
	Py_INCREF(v);
	Py_DECREF(t);
	return v;
}

/* Appends value's UTF-8 JSON (groupstate._encode) as a byte string; -1 with an exception set. */
static int put_json(gs_buf *b, PyObject *value) {
	size_t at = b->len;
	buf_u32(b, 0);
	if (json_put(b, value) < 0) return -1;
	put_u32_at(b, at, (uint32_t)(b->len - at - 4));
	return 0;
}

/* The GroupState object of the next group: the previous group's, unless its handler kept a
 * reference to it (then a new one). A new reference, or NULL with an exception set. */
static gs_state *spare_state;
static gs_state *group_state(void) {
	if (!spare_state || Py_REFCNT(spare_state) != 1) {
		Py_CLEAR(spare_state);
		spare_state = state_alloc();
		if (!spare_state) return NULL;
	}
	Py_INCREF(spare_state);
	return spare_state;
}

/* Runs one group whose input starts at r; appends its result to out. Returns -1 when the
 * process buffer is malformed (r->bad). */
static int run_group(rd *r, int64_t T, int64_t W) {
	uint32_t flags = rd_u32(r), key_len, state_len;
	const uint8_t *key = rd_bytes(r, &key_len);
	const uint8_t *state_raw = rd_bytes(r, &state_len);
	uint32_t row_count = rd_u32(r);
	if (r->bad) return -1;
	size_t start = out.len;
	buf_u32(&out, 0); /* emit_count, patched below */
	uint32_t emits = 0;
	PyObject *k = NULL, *key_tuple = NULL, *chunk = NULL, *rows = NULL;
	PyObject *result = NULL, *it = NULL, *item = NULL;
	PyObject *value = NULL;
	gs_state *state = NULL;
	int failed = 1;

	chunk = PyList_New(row_count);
	if (!chunk) goto done;
	for (uint32_t i = 0; i < row_count; i++) {
		uint32_t n;
		const uint8_t *row = rd_bytes(r, &n);
		if (r->bad) {
			Py_DECREF(chunk);
			return -1;
		}
		PyObject *v = decode_json(row, n, "a row");
		if (!v) {
			/* skip the rest of the group's rows, so the next group is read right */
			for (uint32_t j = i + 1; j < row_count; j++) rd_bytes(r, &n);
			if (r->bad) {
				Py_DECREF(chunk);
				return -1;
			}
			goto done;
		}
		PyList_SET_ITEM(chunk, i, v);
	}
	k = decode_json(key, key_len, "the key");
	if (!k) goto done;
	key_tuple = PyTuple_Pack(1, k);
	if (!key_tuple) goto done;
	PyObject *chunks = row_count ? PyList_New(1) : PyList_New(0);
	if (!chunks) goto done;
	if (row_count) {
		Py_INCREF(chunk);
		PyList_SET_ITEM(chunks, 0, chunk);
	}
	rows = PyObject_GetIter(chunks);
	Py_DECREF(chunks);
	if (!rows) goto done;
	int exists = (flags & 2) != 0;
	if (exists) {
		value = decode_json(state_raw, state_len, "the stored state");
		if (!value) goto done;
	} else {
		value = Py_None;
		Py_INCREF(value);
	}
	state = group_state();
	if (!state) goto done;
	state_reset(state, exists, value, (flags & 1) != 0, (long long)T, (long long)W);

	result = PyObject_CallFunctionObjArgs(entry, key_tuple, rows, (PyObject *)state, NULL);
	if (!result) goto done;
	if (result != Py_None) {
		if (PyDict_Check(result) || PyUnicode_Check(result) || PyBytes_Check(result)) {
			PyErr_Format(PyExc_TypeError, "groupstate: the handler returned a %s; yield output rows, or return a list of them",
			             Py_TYPE(result)->tp_name);
			goto done;
		}
		it = PyObject_GetIter(result);
		if (!it) goto done;
		while ((item = PyIter_Next(it)) != NULL) {
			if (put_json(&out, item) < 0) goto done;
			emits++;
			Py_CLEAR(item);
		}
		if (PyErr_Occurred()) goto done;
	}
	int action = state->action;
	long long timeout = state->timeout;
	const char *sb = "";
	Py_ssize_t sn = 0;
	if (action == ACTION_UPDATE) {
		sb = PyBytes_AS_STRING(state->raw);
		sn = PyBytes_GET_SIZE(state->raw);
	}
	put_u32_at(&out, start, emits);
	buf_u32(&out, 0);
	buf_u32(&out, (uint32_t)action);
	buf_u32(&out, timeout ? 1 : 0);
	buf_i64(&out, timeout);
	buf_bytes(&out, sb, (size_t)sn);
	buf_u32(&out, 0);
	failed = 0;
done:
	if (failed) {
		/* status 1: no emits, KEEP, no timeout, no state, the traceback as the error */
		out.len = start;
		buf_u32(&out, 0);
		buf_u32(&out, 1);
		buf_u32(&out, 0);
		buf_u32(&out, 0);
		buf_i64(&out, 0);
		buf_u32(&out, 0);
		put_exception(&out);
	}
	Py_XDECREF(item);
	Py_XDECREF(it);
	Py_XDECREF(result);
	if (state) {
		/* the next group reuses it unless the handler kept it */
		if (Py_REFCNT(state) == 2) state_reset(state, 0, NULL, 0, 0, 0);
		Py_DECREF(state);
	}
	Py_XDECREF(rows);
	Py_XDECREF(chunk);
	Py_XDECREF(key_tuple);
	Py_XDECREF(k);
	Py_XDECREF(value);
	return 0;
}

/* ------------------------------------------------------------------------------------------
 * ABI v2's DATA calls in C. groupstate.stateful_processor._process_v2 defines what a call does;
 * a call whose groups are all DATA groups, in a well-formed buffer, runs here instead, group by
 * group as _process_v2 runs it (the same _Group, Rows and TimerValues objects, the same module
 * global _cur, the same handler call, output encoding and errors), without its Python loop
 * over the buffer. Every other call (timers, initial state, a malformed buffer) goes to
 * _process_v2 itself, and so does every call while groupstate.stateful_processor._c_data_calls
 * is not True (the tests run both ways and compare).
 * ------------------------------------------------------------------------------------------ */
static PyObject *sp_dict;   /* groupstate.stateful_processor's namespace (a reference to the module is kept) */
static PyObject *v2_group_cls, *v2_rows_cls, *v2_tv_cls, *v2_trim_tb, *v2_loads;
static PyObject *s_cur, *s_ops, *s_fatal, *s_handle_rows, *s_processor, *s_inputs, *s_c_data_calls;

/* 0, or -1 with an exception set. */
static int v2_fast_init(void) {
	PyObject *m = PyImport_ImportModule("groupstate.stateful_processor");
	if (!m) return -1;
	sp_dict = PyModule_GetDict(m); /* the module (never released) keeps it */
	v2_group_cls = PyObject_GetAttrString(m, "_Group");
	v2_rows_cls = v2_group_cls ? PyObject_GetAttrString(m, "Rows") : NULL;
	v2_tv_cls = v2_rows_cls ? PyObject_GetAttrString(m, "TimerValues") : NULL;
	v2_trim_tb = v2_tv_cls ? PyObject_GetAttrString(m, "_without_sdk_frames") : NULL;
	v2_loads = v2_trim_tb ? attr_of("groupstate", "_loads") : NULL;
	if (!v2_loads) return -1;
	s_cur = PyUnicode_InternFromString("_cur");
	s_ops = PyUnicode_InternFromString("ops");
	s_fatal = PyUnicode_InternFromString("fatal");
	s_handle_rows = PyUnicode_InternFromString("handleInputRows");
	s_processor = PyUnicode_InternFromString("_processor");
	s_inputs = PyUnicode_InternFromString("inputs");
	s_c_data_calls = PyUnicode_InternFromString("_c_data_calls");
	return s_cur && s_ops && s_fatal && s_handle_rows && s_processor && s_inputs && s_c_data_calls ? 0 : -1;
}

/* Whether the process buffer p is well formed as _process_v2 reads it and holds DATA groups
 * only (kind 0, at least one row, input indexes below ninputs when there are inputs). */
static int v2_all_data(const uint8_t *p, uint32_t len, uint32_t ninputs) {
	rd r = {p, p + len, 0};
	uint32_t count = rd_u32(&r), n;
	rd_i64(&r);
	rd_i64(&r);
	if (r.bad || count == 0) return 0;
	for (uint32_t i = 0; i < count; i++) {
		uint32_t kind = rd_u32(&r);
		rd_bytes(&r, &n);
		uint32_t rows = rd_u32(&r);
		if (r.bad || kind != 0 || rows == 0) return 0;
		for (uint32_t k = 0; k < rows; k++) {
			if (ninputs && rd_u32(&r) >= ninputs) return 0;
			rd_bytes(&r, &n);
			if (r.bad) return 0;
		}
	}
	return r.p == r.end;
}

/* _emit(result, parts), the rows appended to out: 0, or -1 with an exception set. */
static int v2_emit(PyObject *result, uint32_t *emits) {
	if (result == Py_None) return 0;
	if (PyDict_Check(result) || PyUnicode_Check(result) || PyBytes_Check(result)) {
		PyErr_Format(ERR(err_type), "groupstate: the processor returned a %s; yield output rows, or return a list of them",
		             _PyType_Name(Py_TYPE(result)));
		return -1;
	}
	PyObject *it = PyObject_GetIter(result), *row;
	if (!it) return -1;
	while ((row = PyIter_Next(it)) != NULL) {
		size_t at = out.len;
		buf_u32(&out, 0);
		int rc = json_put(&out, row);
		Py_DECREF(row);
		if (rc < 0) {
			Py_DECREF(it);
			if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError)) {
				PyObject *t, *v, *tb;
				PyErr_Fetch(&t, &v, &tb);
				PyErr_NormalizeException(&t, &v, &tb);
				PyObject *msg = v ? PyObject_Str(v) : NULL;
				Py_XDECREF(t);
				Py_XDECREF(v);
				Py_XDECREF(tb);
				if (msg) {
					PyErr_Format(ERR(err_type), "groupstate: encoding an output row: %U", msg);
					Py_DECREF(msg);
				}
			}
			return -1;
		}
		put_u32_at(&out, at, (uint32_t)(out.len - at - 4));
		(*emits)++;
	}
	Py_DECREF(it);
	return PyErr_Occurred() ? -1 : 0;
}

/* One DATA group's handler call, its rows (rows, a list of (input index, bytes)) and key (JSON)
 * as _process_v2 makes them; its outputs appended to out. 0, or -1 with an exception set. */
static int v2_run_data(PyObject *proc, const uint8_t *key, uint32_t key_len, PyObject *rowlist, PyObject *tv, uint32_t *emits) {
	PyObject *kb = PyBytes_FromStringAndSize((const char *)key, (Py_ssize_t)key_len);
	PyObject *k = kb ? PyObject_CallOneArg(v2_loads, kb) : NULL;
	Py_XDECREF(kb);
	PyObject *key_tuple = k ? PyTuple_Pack(1, k) : NULL;
	Py_XDECREF(k);
	PyObject *rows = key_tuple ? PyObject_CallOneArg(v2_rows_cls, rowlist) : NULL;
	PyObject *result = rows ? PyObject_CallMethodObjArgs(proc, s_handle_rows, key_tuple, rows, tv, NULL) : NULL;
	Py_XDECREF(rows);
	Py_XDECREF(key_tuple);
	if (!result) return -1;
	int rc = v2_emit(result, emits);
	Py_DECREF(result);
	return rc;
}

/* The error text of a failed group, as _process_v2 makes it: the group's fatal error, else
 * the pending exception's traceback without the SDK's leading frames. Clears the exception.
 * A new reference, or NULL with an exception set (which fails the call, as in _process_v2). */
static PyObject *v2_group_error(PyObject *g) {
	PyObject *t, *v, *tb;
	PyErr_Fetch(&t, &v, &tb);
	PyErr_NormalizeException(&t, &v, &tb);
	if (tb && v) PyException_SetTraceback(v, tb);
	PyObject *err = PyObject_GetAttr(g, s_fatal);
	if (err == Py_None) {
		Py_CLEAR(err);
		PyObject *e = v ? PyObject_CallOneArg(v2_trim_tb, v) : NULL;
		err = e ? PyObject_CallOneArg(format_exc, e) : NULL;
		Py_XDECREF(e);
	}
	Py_XDECREF(t);
	Py_XDECREF(v);
	Py_XDECREF(tb);
	return err;
}

/* Appends a failed group's result: no emits, status 1, the end of err (at most 8192
 * characters, UTF-8 with errors replaced), no ops. 0, or -1 with an exception set. */
static int v2_put_failed(PyObject *err) {
	if (!PyUnicode_Check(err)) {
		PyErr_SetString(PyExc_TypeError, "groupstate: a group's error is not a str");
		return -1;
	}
	Py_ssize_t n = PyUnicode_GET_LENGTH(err);
	PyObject *tail = PyUnicode_Substring(err, n > 8192 ? n - 8192 : 0, n);
	PyObject *m = tail ? PyUnicode_AsEncodedString(tail, "utf-8", "replace") : NULL;
	Py_XDECREF(tail);
	if (!m) return -1;
	buf_u32(&out, 0);
	buf_u32(&out, 1);
	buf_bytes(&out, PyBytes_AS_STRING(m), (size_t)PyBytes_GET_SIZE(m));
	buf_u32(&out, 0);
	Py_DECREF(m);
	return 0;
}

/* Runs a v2 call in C when its buffer holds DATA groups only (v2_all_data) and the processor
 * is there: 1 with the result in out, 0 to leave the call to _process_v2, or -1 with an
 * exception set (an exception that would have escaped _process_v2: the call fails). */
static int v2_process_data(const uint8_t *p, uint32_t len) {
	if (!sp_dict) return 0;
	PyObject *proc = PyDict_GetItemWithError(sp_dict, s_processor); /* borrowed */
	PyObject *inputs = proc ? PyDict_GetItemWithError(sp_dict, s_inputs) : NULL;
	PyObject *on = inputs ? PyDict_GetItemWithError(sp_dict, s_c_data_calls) : NULL;
	if (!proc || proc == Py_None || !inputs || !PyList_Check(inputs) || on != Py_True) return PyErr_Occurred() ? -1 : 0;
	uint32_t ninputs = (uint32_t)PyList_GET_SIZE(inputs);
	if (!v2_all_data(p, len, ninputs)) return 0;
	Py_INCREF(proc);
	rd r = {p, p + len, 0};
	uint32_t count = rd_u32(&r);
	int64_t T = rd_i64(&r), W = rd_i64(&r);
	PyObject *tv = PyObject_CallFunction(v2_tv_cls, "LL", (long long)T, (long long)W);
	PyObject *kind = PyLong_FromLong(0);
	int rc = tv && kind ? 1 : -1;
	out.len = 0;
	out.oom = 0;
	buf_u32(&out, 0);
	buf_u32(&out, count);
	for (uint32_t i = 0; i < count && rc == 1; i++) {
		uint32_t key_len, n, m;
		rd_u32(&r);
		const uint8_t *key = rd_bytes(&r, &key_len);
		n = rd_u32(&r);
		PyObject *rowlist = PyList_New(n);
		for (uint32_t k = 0; rowlist && k < n; k++) {
			uint32_t idx = ninputs ? rd_u32(&r) : 0;
			const uint8_t *raw = rd_bytes(&r, &m);
			PyObject *row = Py_BuildValue("(Iy#)", idx, (const char *)raw, (Py_ssize_t)m);
			if (!row) Py_CLEAR(rowlist);
			else PyList_SET_ITEM(rowlist, k, row);
		}
		PyObject *g = rowlist ? PyObject_CallOneArg(v2_group_cls, kind) : NULL;
		if (!g) {
			Py_XDECREF(rowlist);
			rc = -1;
			break;
		}
		group_cell = i;
		gs_host_group_begin((int32_t)i);
		size_t start = out.len;
		uint32_t emits = 0;
		PyObject *err = NULL;
		if (PyDict_SetItem(sp_dict, s_cur, g) < 0) {
			rc = -1;
		} else {
			buf_u32(&out, 0); /* emit_count, patched below */
			int ok = v2_run_data(proc, key, key_len, rowlist, tv, &emits);
			if (PyDict_SetItem(sp_dict, s_cur, Py_None) < 0) {
				PyErr_Clear(); /* cannot fail: the key is there */
			}
			if (ok < 0) {
				err = v2_group_error(g);
				if (!err) rc = -1;
			} else {
				err = PyObject_GetAttr(g, s_fatal);
				if (!err) rc = -1;
				else if (err == Py_None) Py_CLEAR(err);
			}
		}
		if (rc == 1 && !err) {
			PyObject *ops = PyObject_GetAttr(g, s_ops);
			PyObject *b = ops ? PyBytes_FromObject(ops) : NULL;
			Py_XDECREF(ops);
			if (!b) {
				rc = -1;
			} else {
				put_u32_at(&out, start, emits);
				buf_u32(&out, 0); /* status 0 */
				buf_u32(&out, 0); /* error "" */
				buf_bytes(&out, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
				Py_DECREF(b);
			}
		} else if (rc == 1) {
			out.len = start;
			if (v2_put_failed(err) < 0) rc = -1;
		}
		Py_XDECREF(err);
		Py_DECREF(g);
		Py_DECREF(rowlist);
	}
	Py_XDECREF(kind);
	Py_XDECREF(tv);
	Py_DECREF(proc);
	return rc;
}

GS_EXPORT("gs_process") int64_t gs_process(int32_t ptr, int32_t len) {
	if (!ready) return fail_call("groupstate: gs_process before a successful gs_init");
	if (module_abi() == 2) {
		/* groupstate.stateful_processor._process_v2(process buffer) -> the result buffer (or a
		 * whole-call error it wrote itself); an exception escaping it fails the call. */
		out.len = 0;
		out.oom = 0;
		int fast = v2_process_data((const uint8_t *)(uintptr_t)ptr, (uint32_t)len);
		if (fast == 0) {
			out.len = 0;
			out.oom = 0;
		}
		if (fast < 0 || (fast == 0 && call_v2(process_v2_fn, ptr, len) < 0)) {
			PyObject *s = exception_text();
			const char *u = s ? PyUnicode_AsUTF8(s) : NULL;
			if (!u) PyErr_Clear();
			int64_t res = fail_call(u ? u : "groupstate: the processor failed");
			Py_XDECREF(s);
			group_cell = 0xFFFFFFFFu;
			return res;
		}
		group_cell = 0xFFFFFFFFu;
		return out.oom ? 0 : pack(out.p, out.len);
	}
	rd r = {(const uint8_t *)(uintptr_t)ptr, (const uint8_t *)(uintptr_t)ptr + (uint32_t)len, 0};
	uint32_t count = rd_u32(&r);
	int64_t T = rd_i64(&r), W = rd_i64(&r);
	if (r.bad) return fail_call("groupstate: malformed process buffer");
	out.len = 0;
	out.oom = 0;
	buf_u32(&out, 0);
	buf_u32(&out, count);
	for (uint32_t i = 0; i < count; i++) {
		group_cell = i;
		if (run_group(&r, T, W) < 0) {
			group_cell = 0xFFFFFFFFu;
			return fail_call("groupstate: malformed process buffer");
		}
	}
	group_cell = 0xFFFFFFFFu;
	if (r.p != r.end) return fail_call("groupstate: malformed process buffer (trailing bytes)");
	if (out.oom) {
		/* the host reads 0 as a result out of memory: a whole-call failure, retried */
		return 0;
	}
	return pack(out.p, out.len);
}
