"""Runs a callback right after a module has been imported (or now, if it already was).

A ``sys.meta_path`` finder that only wraps the loader of the modules it was asked about,
so registering with Dynamo/Inductor costs nothing until the program imports them, and
always happens before their first use (Dynamo caches its stream handlers on first use).
"""
import importlib.abc
import importlib.util
import sys
import threading
from typing import Callable, Dict, List

_lock = threading.Lock()
_pending: Dict[str, List[Callable]] = {}


def on_import(name: str, callback: Callable) -> None:
    module = sys.modules.get(name)
    if module is not None and getattr(getattr(module, "__spec__", None), "_initializing", False) is False:
        callback(module)
        return
    with _lock:
        _pending.setdefault(name, []).append(callback)
        if _Finder.instance not in sys.meta_path:
            sys.meta_path.insert(0, _Finder.instance)


class _Loader(importlib.abc.Loader):
    def __init__(self, inner, name):
        self._inner = inner
        self._name = name

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        with _lock:
            callbacks = _pending.pop(self._name, [])
        for cb in callbacks:
            cb(module)


class _Finder(importlib.abc.MetaPathFinder):
    instance: "_Finder"

    def find_spec(self, fullname, path, target=None):
        if fullname not in _pending:
            return None
        # Let the other finders locate the module; only the loader is wrapped.
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader, fullname)
                return spec
        return None


_Finder.instance = _Finder()
