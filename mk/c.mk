# C samples: samples/<name>/c/<name>.wasm, built from samples/<name>/c/<name>.c with the
# single-header SDK sdk/c/groupstate.h (clang + wasm-ld + wasi-libc; Debian's layout needs
# only --sysroot=/usr). Each source file repeats its exact build command at the top.
#
#   make samples-c   rebuild the C sample modules
#
# Reproducible: -O2 without debug info, stripped, source paths mapped relative to the
# repository (-ffile-prefix-map), and no timestamps in the output; two builds are identical.
# -mbulk-memory (part of WebAssembly 2.0, which the host runs) turns memcpy and memset into
# memory.copy and memory.fill, which the host runs as native copies instead of wasi-libc's
# byte and word loops: about a tenth less time per group for logincount (RATIONALE.md).

CLANG       ?= clang
C_SYSROOT   ?= /usr
C_WASMFLAGS := --target=wasm32-wasi --sysroot=$(C_SYSROOT) -mexec-model=reactor -O2 -mbulk-memory -g0 \
               -Wall -Werror -ffile-prefix-map=$(CURDIR)/= -Wl,--stack-first -Wl,--strip-all \
               -Isdk/c

C_SAMPLES := logincount sessions carts adjoin
C_MODULES := $(foreach s,$(C_SAMPLES),samples/$(s)/c/$(s).wasm)

SAMPLE_MODULES += $(C_MODULES)

.PHONY: samples-c
samples-c: $(C_MODULES)

# Always rebuilt (cheap), like the Go modules: the SDK header is a dependency too.
.PHONY: $(C_MODULES)
# carts and adjoin are transformWithState processors: ABI v2 (sdk/c/groupstate.h's GS_ABI_V2).
samples/carts/c/carts.wasm samples/adjoin/c/adjoin.wasm: C_WASMFLAGS += -DGS_ABI_V2

$(C_MODULES): samples/%.wasm:
	$(CLANG) $(C_WASMFLAGS) -o $@ samples/$*.c
