# The CPython runtime module of Python handlers (issue 31): sdk/python/runtime/python.wasm,
# CPython 3.11.2 from Debian's source package built for wasm32-wasi with Debian's clang-14,
# lld-14, wasi-libc and libclang-rt-14-dev-wasm32 (.ci/install-toolchains installs them and
# enables deb-src), with glue.c exporting ABI v1 and v2. See sdk/python/runtime/build.sh.
#
#   make python-runtime   rebuild sdk/python/runtime/python.wasm (about 10 minutes on 2 cores
#                         the first time; configure's cache makes later builds faster)
#
# Not part of `make samples fixtures`: .ci/run runs it on its own and checks the result byte for
# byte (sdk/python/runtime/README.md). Python samples are not committed as modules: internal/pybuild
# makes them from samples/<name>/python/*.py and this runtime, in pure Go.

.PHONY: python-runtime
python-runtime:
	sdk/python/runtime/build.sh
