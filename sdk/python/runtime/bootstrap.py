# The sources importer (glue.c runs it in gs_init, before anything else is imported): a meta
# path finder over the embedded sources, so that `import groupstate` and the handler's own
# modules work with no file system. Compiled into the runtime module by freeze_sdk.py (as
# "<string>", the name it had when the glue ran it as text); the SDK's modules run from their
# bytecode when the embedded source is the text it was compiled from.
import sys, _groupstate
from _frozen_importlib import ModuleSpec
class _Sources:
    def __init__(self, files):
        self.files = files
    def find_spec(self, name, path=None, target=None):
        base = name.replace('.', '/')
        if base + '/__init__.py' in self.files:
            spec = ModuleSpec(name, self, origin=base + '/__init__.py', is_package=True)
        elif base + '.py' in self.files:
            spec = ModuleSpec(name, self, origin=base + '.py')
        else:
            return None
        spec.has_location = True
        return spec
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        origin = module.__spec__.origin
        src = self.files[origin]
        code = _groupstate.frozen_code(origin, src)
        if code is None:
            code = _groupstate.compile(src, origin)
        exec(code, module.__dict__)
    def get_source(self, name):
        base = name.replace('.', '/')
        src = self.files.get(base + '.py') or self.files.get(base + '/__init__.py')
        return None if src is None else src.decode('utf-8', 'replace')
sys.meta_path.append(_Sources(_groupstate.files()))
