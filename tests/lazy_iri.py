"""pytest plugin for `make test` (``-p tests.lazy_iri``, loaded before the installed plugins): jsonschema's IRI
check is built when it is first used, not when jsonschema is imported.

nbval imports nbformat, which imports jsonschema, in every pytest process (`make test`: the controller and
each worker). jsonschema's format checkers import ``rfc3987_syntax`` (the MIT package of
``jsonschema[format-nongpl]``), which builds 39 Lark Earley parsers at import: about 2.5 s CPU per process
(``python -X importtime -c "import jsonschema"``). No notebook schema uses the ``iri`` formats, so the parsers
are never used here. This plugin puts a stand-in ``rfc3987_syntax`` module in ``sys.modules`` before nbval
loads: jsonschema gets the stand-in's ``is_valid_syntax``, which imports the real package and calls it the
first time it is called; any other name is looked up on the real package (imported then). Validation gives
the same answers; only the moment the parsers are built moves. (The alternative, the GPL ``rfc3987``
package, which jsonschema prefers when installed, is not an option for this repository.)
"""

import importlib
import importlib.util
import sys
import types

_NAME = "rfc3987_syntax"


def _real():
    """The real ``rfc3987_syntax``, imported on first use (its parsers are built then)."""
    module = sys.modules.get(_NAME)
    if module is None or getattr(module, "_lazy_stand_in", False):
        sys.modules.pop(_NAME, None)
        module = importlib.import_module(_NAME)
    return module


def _install() -> None:
    if _NAME in sys.modules or "jsonschema" in sys.modules:
        return                      # too late (or done already): jsonschema has its checkers
    spec = importlib.util.find_spec(_NAME)
    if spec is None:
        return                      # not installed: jsonschema skips the IRI checks on its own

    stand_in = types.ModuleType(_NAME, "Stand-in for rfc3987_syntax: the real package is imported on first use "
                                       "(tests/lazy_iri.py).")
    stand_in.__spec__ = spec
    stand_in._lazy_stand_in = True

    def is_valid_syntax(term: str, value: str):
        return _real().is_valid_syntax(term, value)

    def __getattr__(name: str):
        if name.startswith("__"):   # the import system asks for __path__ etc.: not the package's names
            raise AttributeError(name)
        return getattr(_real(), name)

    stand_in.is_valid_syntax = is_valid_syntax
    stand_in.__getattr__ = __getattr__
    sys.modules[_NAME] = stand_in


_install()
