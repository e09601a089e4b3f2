"""Old import paths of modules that moved, kept working for one release with a `DeprecationWarning`.

A package that moved modules calls `alias_moved_modules({"old.path": "new.path", ...})` from its
`__init__`. Importing an old path then returns the new module itself (so pickles of the process and
Ray backends that name an old path still load, and `isinstance` checks keep holding) and warns once;
`python -m old.path` runs the new module as `__main__` (with a `FutureWarning`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import CodeType, ModuleType

_MOVED: dict[str, str] = {}


class _MovedModuleLoader(importlib.abc.Loader):
    def __init__(self, new_name: str) -> None:
        self.new_name = new_name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} moved to {self.new_name}; the old path goes away in the next release",
            DeprecationWarning,
            stacklevel=3,
        )
        module = importlib.import_module(self.new_name)
        self._own_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The new module already ran; give it back the spec the import machinery just overwrote.
        module.__spec__ = self._own_spec

    def get_code(self, fullname: str) -> CodeType | None:
        """`python -m old.path`: runpy runs the new module's code as `__main__`. Shown by default
        (a `FutureWarning`): it is a command a person typed."""
        warnings.warn(f"{fullname} moved to {self.new_name}: run `python -m {self.new_name}`; the old path goes away "
                      "in the next release", FutureWarning, stacklevel=2)
        spec = importlib.util.find_spec(self.new_name)
        if spec is None or not isinstance(spec.loader, importlib.abc.InspectLoader):
            raise ImportError(f"{self.new_name} has no code to run")
        return spec.loader.get_code(self.new_name)


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        new_name = _MOVED.get(fullname)
        if new_name is None:
            return None
        new_spec = importlib.util.find_spec(new_name)  # its file: what `python -m old.path` shows as argv[0]
        return importlib.util.spec_from_loader(fullname, _MovedModuleLoader(new_name),
                                               origin=new_spec.origin if new_spec is not None else None)


_FINDER = _MovedModuleFinder()


def alias_moved_modules(moves: dict[str, str]) -> None:
    """Make each old module path import its new module, with a deprecation warning."""
    _MOVED.update(moves)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
