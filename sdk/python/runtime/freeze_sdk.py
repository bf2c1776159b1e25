"""Writes gs_frozen_sdk.h for glue.c: the groupstate package (sdk/python/groupstate/*.py)
compiled to bytecode when the runtime module is built, so that an instance's start runs the
SDK's modules without compiling them from text.

    PYTHONHASHSEED=0 python3.11 freeze_sdk.py SDK_DIR BOOTSTRAP OUT.h     (build.sh runs it)

Each entry is the module's import path ("groupstate/__init__.py", as internal/pybuild names
the embedded sources), the length and FNV-1a hash of the source it was compiled from, and the
marshalled code object (compiled as the sources importer compiles the text: the same file name,
dont_inherit). At import the glue uses the bytecode only when the embedded source is that very
text; otherwise the importer compiles the text, as before. BOOTSTRAP (bootstrap.py, the
sources importer itself) is compiled as "<string>" into gs_frozen_bootstrap: the glue runs it
at every instance's start.

The hash seed is fixed (PYTHONHASHSEED=0) so that the bytes do not depend on the run: marshal
writes a set constant in iteration order.
"""
import marshal
import os
import sys

if sys.version_info[:2] != (3, 11):
    sys.exit(f"freeze_sdk.py: CPython 3.11 needed (the runtime's bytecode), not {sys.version}")
if os.environ.get("PYTHONHASHSEED") != "0":
    sys.exit("freeze_sdk.py: run with PYTHONHASHSEED=0")

sdk_dir, bootstrap, out = sys.argv[1], sys.argv[2], sys.argv[3]


def fnv1a(b):
    h = 0xCBF29CE484222325
    for c in b:
        h = ((h ^ c) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


lines = [
    "/* Written by sdk/python/runtime/freeze_sdk.py (build.sh): the groupstate package's bytecode. */",
    "struct gs_frozen {",
    "\tconst char *name;",
    "\tsize_t source_len;",
    "\tuint64_t source_hash;",
    "\tconst unsigned char *code;",
    "\tsize_t code_len;",
    "};",
]
entries = []
for i, fname in enumerate(sorted(f for f in os.listdir(sdk_dir) if f.endswith(".py"))):
    with open(os.path.join(sdk_dir, fname), "rb") as f:
        src = f.read()
    name = "groupstate/" + fname
    code = marshal.dumps(compile(src, name, "exec", dont_inherit=True))
    lines.append(f"static const unsigned char gs_frozen_code_{i}[] = {{")
    for at in range(0, len(code), 24):
        lines.append("\t" + ",".join(str(c) for c in code[at:at + 24]) + ",")
    lines.append("};")
    entries.append(f'\t{{"{name}", {len(src)}u, 0x{fnv1a(src):016x}ull, gs_frozen_code_{i}, sizeof gs_frozen_code_{i}}},')
with open(bootstrap, "rb") as f:
    code = marshal.dumps(compile(f.read(), "<string>", "exec", dont_inherit=True))
lines.append("static const unsigned char gs_frozen_bootstrap[] = {")
for at in range(0, len(code), 24):
    lines.append("\t" + ",".join(str(c) for c in code[at:at + 24]) + ",")
lines.append("};")
lines.append("static const struct gs_frozen gs_frozen_sdk[] = {")
lines += entries
lines.append("\t{0},")
lines.append("};")
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
