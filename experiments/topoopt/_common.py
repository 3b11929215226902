"""Shared by the TopoOpt Section 5 reproduction scripts in this folder.

:class:`JsonCache`: results cached in a JSON file next to a script, so that reruns only
fill gaps.  :data:`NOTE`: the model line every output states.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
#: Stated in every output (all results were computed after the multiring re-timing fix,
#: commit e30e0ed, which has its own regression test).
NOTE = ("iteration model, multiring all-reduce on direct-connect fabrics and ring + ECMP on "
        "switched ones (collective_method/routing auto)")


class JsonCache:
    """``key -> JSON object`` persisted after every :meth:`put` (atomic replace)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.data: dict[str, Any] = {}
        if self.path.exists():
            self.data = json.loads(self.path.read_text(encoding="utf-8"))

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def put(self, key: str, value: Any) -> None:
        self.data[key] = value
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True, default=_jsonable),
                       encoding="utf-8")
        tmp.replace(self.path)


def _jsonable(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if hasattr(x, "tolist"):
        return x.tolist()
    return str(x)


def finite(x: Any) -> float:
    """``x`` as a float, ``nan`` for ``None`` (JSON's stand-in for inf/nan)."""
    return math.nan if x is None else float(x)
