"""Which code made a result: a fingerprint of the package's sources and data.

``codesign.__version__`` changes only with releases, while the answers of the iteration
model change with most commits; a sweep resumed after such a change would mix records of
two models in one study without saying so.  :func:`code_fingerprint` hashes what the
answers depend on -- the Python sources and the data files (zoo, hardware catalog,
compute profiles, price lists) of the four packages -- so that a study can remember the
code that made it and say when a resume runs other code.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

__all__ = ["code_fingerprint", "PACKAGES"]

#: The packages whose files make up the fingerprint.
PACKAGES = ("codesign", "evaluators", "search", "topologies")
_SUFFIXES = (".py", ".yaml", ".yml", ".csv", ".json")


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A 16-hex-digit digest of the packages' source and data files (their paths relative
    to the installation and their bytes), computed once per process (~300 files, a few
    milliseconds).

    >>> len(code_fingerprint()) == 16 and code_fingerprint() == code_fingerprint()
    True
    """
    root = Path(__file__).resolve().parent.parent
    h = hashlib.blake2b(digest_size=8)
    for package in PACKAGES:
        base = root / package
        files = sorted(p for p in base.rglob("*") if p.suffix in _SUFFIXES and p.is_file()
                       and "__pycache__" not in p.parts)
        for path in files:
            h.update(str(path.relative_to(root)).encode())
            h.update(b"\0")
            h.update(path.read_bytes())
    return h.hexdigest()
