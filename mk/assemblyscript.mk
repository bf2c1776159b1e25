# AssemblyScript samples: samples/<name>/assemblyscript/<name>.wasm, built from <name>.ts with
# the compiler pinned in sdk/assemblyscript/package.json (install it with
# `cd sdk/assemblyscript && npm ci`, as .ci/install-toolchains does).
#
#   make samples-assemblyscript
#
# Flags (docs/handlers/assemblyscript.md explains each):
#   --runtime minimal          TLSF allocator + a mark & sweep GC the SDK runs between groups
#   --exportStart _initialize  top-level code (the handler's registration) runs in the WASI
#                              reactor initializer, which the host calls after instantiation
#   --use abort=__gs_abort     aborts go to stderr and trap, instead of importing env.abort
#   -O3                        optimized; assertions are kept (no --noAssert)

ASC ?= sdk/assemblyscript/node_modules/.bin/asc
ASCFLAGS := --runtime minimal --exportStart _initialize --use abort=__gs_abort -O3

# carts and adjoin are transformWithState processors (ABI v2): their entry files re-export
# assembly/exports-v2 instead of assembly/exports; the flags are the same.
AS_SAMPLES := logincount sessions carts adjoin
AS_MODULES := $(foreach s,$(AS_SAMPLES),samples/$(s)/assemblyscript/$(s).wasm)

SAMPLE_MODULES += $(AS_MODULES)

.PHONY: samples-assemblyscript
samples-assemblyscript: $(AS_MODULES)

# Always rebuilt: the SDK is a dependency too, and asc is quick.
.PHONY: $(AS_MODULES)
$(AS_MODULES): samples/%.wasm:
	$(ASC) $(basename $@).ts -o $@ $(ASCFLAGS)
