# Rust samples: samples/<name>/rust/<name>.wasm, built from samples/<name>/rust/src/lib.rs with
# the dependency-free SDK in sdk/rust, by plain rustc (no cargo, no crates).
#
#   make samples-rust   rebuild the Rust sample modules
#   make test-rust      run the Rust SDK's native unit tests
#
# RUSTC must be a rustc with the wasm32-wasi target (Debian's /usr/bin/rustc 1.63 has it; the
# rustup rustc on PATH may not). A wasm32-wasi cdylib is a reactor: no _start, no _initialize.
# The flags make rebuilds byte-identical: no debug info, no symbols, relative paths only.

RUSTC        ?= /usr/bin/rustc
RUST_TARGET  := wasm32-wasi
RUST_FLAGS   := --edition 2021 --target $(RUST_TARGET) -C opt-level=s -C debuginfo=0 \
                -C strip=symbols -C panic=abort --remap-path-prefix=$(CURDIR)=.
RUST_SDK_DIR := sdk/rust/target/$(RUST_TARGET)
RUST_SDK     := $(RUST_SDK_DIR)/libgroupstate.rlib

RUST_SAMPLES := logincount sessions
RUST_MODULES := $(foreach s,$(RUST_SAMPLES),samples/$(s)/rust/$(s).wasm)

SAMPLE_MODULES += $(RUST_MODULES)

.PHONY: samples-rust test-rust $(RUST_SDK) $(RUST_MODULES)

samples-rust: $(RUST_MODULES)

# Always rebuilt, like the Go modules: the SDK sources are dependencies too.
$(RUST_SDK):
	@mkdir -p $(RUST_SDK_DIR)
	$(RUSTC) $(RUST_FLAGS) --crate-type=rlib --crate-name groupstate -C metadata=groupstate \
		-o $@ sdk/rust/src/lib.rs

$(RUST_MODULES): samples/%.wasm: $(RUST_SDK)
	$(RUSTC) $(RUST_FLAGS) --crate-type=cdylib --crate-name $(notdir $*) -C lto=fat -C codegen-units=1 \
		-L $(RUST_SDK_DIR) --extern groupstate=$(RUST_SDK) -o $@ $(dir $@)src/lib.rs

test-rust:
	@mkdir -p sdk/rust/target/test
	$(RUSTC) --edition 2021 --test -o sdk/rust/target/test/groupstate sdk/rust/src/lib.rs
	sdk/rust/target/test/groupstate
