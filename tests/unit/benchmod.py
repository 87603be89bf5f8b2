"""A benchmark script of bench/ loaded as a module for its unit tests (bench/ is not a package; its
own imports, such as `common`, resolve once bench/ is on the path)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"


def load(script: str) -> ModuleType:
    """bench/SCRIPT.py as the module bench_SCRIPT, registered under that name while it runs: a
    dataclass looks its module up in sys.modules."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{script}", BENCH / f"{script}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
