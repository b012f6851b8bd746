"""Forwards for names that moved to a higher module (issue 32, "One engine").

A lower module may not import a higher one, so an old import path such as ``llmsizing.moe.deepseek_memory``
is kept for one release by a module ``__getattr__`` that finds the name in its new home on first use and warns
with a :class:`DeprecationWarning` naming it. CHANGES.md lists every forward and when it goes.
"""

import functools
import gc
import importlib
import warnings


def forward(module_name: str, moved: dict[str, str]):
    """A module ``__getattr__`` for ``module_name`` that forwards each name in ``moved`` (name -> the module
    it moved to) with a :class:`DeprecationWarning`, and raises :class:`AttributeError` for any other name."""

    def __getattr__(name: str):
        if name not in moved:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        warnings.warn(f"{module_name}.{name} moved to {moved[name]}.{name}; import it from there (this "
                      "forward goes in the next release)", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(moved[name]), name)

    return __getattr__


def retire(module_name: str, retired: dict[str, tuple[object, str]], moved: dict[str, str] | None = None):
    """A module ``__getattr__`` for ``module_name`` that still gives each old constant in ``retired`` (name ->
    (its value, what replaces it)) with a :class:`DeprecationWarning` naming the replacement, and forwards the
    names in ``moved`` as :func:`forward` does."""
    moved_getattr = forward(module_name, moved or {})

    def __getattr__(name: str):
        if name not in retired:
            return moved_getattr(name)
        value, replacement = retired[name]
        warnings.warn(f"{module_name}.{name} is retired: it is not the range the library states; use "
                      f"{replacement} (this name goes in the next release)", DeprecationWarning, stacklevel=2)
        return value

    return __getattr__


def keep_hash(cls):
    """Give the frozen dataclass ``cls`` a ``__hash__`` worked out once per instance (the dataclass's own
    value, the hash of the tuple of its hashed fields, kept in the instance and left out of its pickle: a
    str's hash differs between processes), as :class:`~llmsizing.model.Model` has (issue 35: a planner's
    search hashes the same GPUs, nodes and layouts thousands of times in the keys of its kept results, 2-3 us
    each). The tuple is formed here, not by calling the dataclass's ``__hash__`` (which runs in ``cls``'s
    module: a call back into the module that hashes, tests/test_layers.py)."""
    import dataclasses
    import operator

    names = tuple(f.name for f in dataclasses.fields(cls) if (f.compare if f.hash is None else f.hash))
    # (the same tuple, formed in C: ~1 us less for each new instance, pick49; one name gives its value alone)
    values = operator.attrgetter(*names) if len(names) > 1 else lambda self: tuple([getattr(self, n)
                                                                                     for n in names])

    def __hash__(self) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(values(self))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    cls.__hash__ = __hash__
    cls.__getstate__ = __getstate__
    return cls


def paused_gc(fn):
    """Run ``fn`` with Python's cyclic garbage collector paused, restored as it was on return or on an error
    (issue 35: a planner's search allocates some 100,000 short-lived tuples, dicts and arrays, which set off
    12-22 young collections, 5-15 ms, and now and then a full one, ~60 ms with the catalogues and pandas
    alive, a fifth of a search; the search makes no reference cycles it relies on the collector to free, and
    reference counting frees the rest as before). Nothing computed changes: only when cycles, if any, are
    collected (at the next collection after ``fn`` returns). Nested calls leave the outer one's pause alone.
    The CPython docs (``gc`` module) describe the generations and :func:`gc.disable`."""
    @functools.wraps(fn)
    def wrapper(*args, **kw):
        if not gc.isenabled():
            return fn(*args, **kw)
        gc.disable()
        try:
            return fn(*args, **kw)
        finally:
            gc.enable()

    return wrapper
