// An Extism plugin with the per-key logic of the logincount sample, for `groupstate bench`:
// the peer measured against groupstate's invocation (extism_speedup). Extism's PDKs cannot be
// fetched here, so it is written against Extism's documented plugin imports
// (extism:host/env: input_length, input_load_u64, input_load_u8, alloc, store_u64, store_u8,
// output_set), the way the PDKs use them: input copied in 8 bytes at a time, output copied
// out 8 bytes at a time.
//
// Input: the key (JSON), a newline, the state ({"login_count":n} or empty), a newline, then
// one row per line. Output: the new state, a newline, the emitted row.
//
// Build (from the repository root):
//
//	clang --target=wasm32-unknown-unknown -nostdlib -O2 -g0 -Wl,--no-entry -Wl,--strip-all -o runtime/bench/testdata/extism/logincount.wasm runtime/bench/testdata/extism/logincount.c
#include <stdint.h>

#define EXTISM(name) __attribute__((import_module("extism:host/env"), import_name(name)))
EXTISM("input_length") extern uint64_t input_length(void);
EXTISM("input_load_u64") extern uint64_t input_load_u64(uint64_t offset);
EXTISM("input_load_u8") extern uint32_t input_load_u8(uint64_t offset);
EXTISM("alloc") extern uint64_t extism_alloc(uint64_t n);
EXTISM("store_u64") extern void store_u64(uint64_t offset, uint64_t v);
EXTISM("store_u8") extern void store_u8(uint64_t offset, uint32_t v);
EXTISM("output_set") extern void output_set(uint64_t offset, uint64_t n);

// No libc: the compiler may still call these.
void *memcpy(void *dst, const void *src, unsigned long n) {
	uint8_t *d = dst;
	const uint8_t *s = src;
	while (n--) *d++ = *s++;
	return dst;
}

void *memset(void *dst, int c, unsigned long n) {
	uint8_t *d = dst;
	while (n--) *d++ = (uint8_t)c;
	return dst;
}

static uint8_t in[1 << 16];
static uint8_t out[1 << 16];

static int put(int o, const char *s) {
	while (*s) out[o++] = (uint8_t)*s++;
	return o;
}

static int put_int(int o, int64_t v) {
	char tmp[24];
	int n = 0;
	if (v == 0) tmp[n++] = '0';
	while (v > 0) { tmp[n++] = (char)('0' + v % 10); v /= 10; }
	while (n > 0) out[o++] = (uint8_t)tmp[--n];
	return o;
}

__attribute__((export_name("handle"))) int32_t handle(void) {
	uint64_t n = input_length();
	if (n > sizeof in) return 1;
	uint64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t v = input_load_u64(i);
		for (int b = 0; b < 8; b++) in[i + b] = (uint8_t)(v >> (8 * b));
	}
	for (; i < n; i++) in[i] = (uint8_t)input_load_u8(i);

	// key
	uint64_t p = 0, keyStart = 0;
	while (p < n && in[p] != '\n') p++;
	uint64_t keyEnd = p++;
	// state: the digits after the colon, if any
	int64_t count = 0;
	while (p < n && in[p] != '\n') {
		if (in[p] >= '0' && in[p] <= '9') count = count * 10 + (in[p] - '0');
		p++;
	}
	p++;
	// rows: one per non-empty line
	while (p < n) {
		uint64_t start = p;
		while (p < n && in[p] != '\n') p++;
		if (p > start) count++;
		p++;
	}
	int o = put(0, "{\"login_count\":");
	o = put_int(o, count);
	o = put(o, "}\n{\"user_id\":");
	for (uint64_t k = keyStart; k < keyEnd; k++) out[o++] = in[k];
	o = put(o, ",\"total_logins\":");
	o = put_int(o, count);
	out[o++] = '}';

	uint64_t mem = extism_alloc((uint64_t)o);
	int j = 0;
	for (; j + 8 <= o; j += 8) {
		uint64_t v = 0;
		for (int b = 0; b < 8; b++) v |= (uint64_t)out[j + b] << (8 * b);
		store_u64(mem + (uint64_t)j, v);
	}
	for (; j < o; j++) store_u8(mem + (uint64_t)j, out[j]);
	output_set(mem, (uint64_t)o);
	return 0;
}
