"""Safe reading and atomic writing of every user file (YAML, JSON, CSV, XML).

One reader for every input, so that each of these is a one-line
:class:`~codesign.errors.InvalidSpecError` naming the file (and the line where
there is one) instead of a hang, a traceback or an exhausted machine:

* not a regular file (a FIFO would block ``open`` forever, a directory or a
  device is not a spec): checked with ``os.stat`` before opening, and the file
  is opened with ``O_NONBLOCK`` so a file swapped for a FIFO in between cannot
  hang either;
* larger than :data:`MAX_INPUT_BYTES` (spec files are kilobytes; a schedule of
  millions of transfers is tens of megabytes);
* not UTF-8: UTF-16/32 (byte-order mark or NUL bytes) and binary files are
  named as such;
* YAML with anchors and aliases whose expansion is larger than
  :data:`MAX_YAML_NODES` nodes ("billion laughs"): PyYAML builds shared
  objects, but any later walk (validation, an error message) expands them, so
  the expanded size is computed on the composed node graph (memoised per
  node, linear in the file) and refused before construction.

Outputs go through :func:`write_text_atomic`: a temporary file in the target
folder, then ``os.replace``, so a failure never leaves a partial file, with
clear errors for a missing folder or a directory target.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from codesign.errors import InvalidSpecError, invalid

__all__ = ["MAX_INPUT_BYTES", "MAX_YAML_NODES", "MAX_JSON_DEPTH", "read_text", "read_bytes",
           "load_yaml_file", "load_yaml_text", "load_json_file", "load_json_text",
           "write_text_atomic", "write_bytes_atomic", "is_file", "is_dir", "exists",
           "check_output_path"]

#: Largest input file, bytes (override per call for schedules).
MAX_INPUT_BYTES = 64 * 2 ** 20
#: Largest YAML document after alias expansion, in nodes (scalars + collections).
MAX_YAML_NODES = 1_000_000
#: Deepest nesting accepted in JSON/YAML input (Python's recursion limit is ~1000).
MAX_JSON_DEPTH = 100


def _mode(path: str | Path) -> int | None:
    """``st_mode`` of ``path`` (symlinks followed), or ``None`` when nothing can be found
    there -- also for a name the system cannot look up at all (a part longer than 255
    bytes, a NUL byte), where :meth:`pathlib.Path.is_file` raises on Python 3.11."""
    try:
        return os.stat(path).st_mode
    except (OSError, ValueError):
        return None


def is_file(path: str | Path) -> bool:
    """Whether ``path`` is a regular file; ``False`` for any name that cannot be one."""
    mode = _mode(path)
    return mode is not None and stat.S_ISREG(mode)


def is_dir(path: str | Path) -> bool:
    """Whether ``path`` is a folder; ``False`` for any name that cannot be one."""
    mode = _mode(path)
    return mode is not None and stat.S_ISDIR(mode)


def exists(path: str | Path) -> bool:
    """Whether anything is at ``path``; ``False`` for any name that cannot be looked up."""
    return _mode(path) is not None


def _unusable_name(path: Path) -> str | None:
    """Why no file can be written at ``path`` whatever exists (a name part longer than
    the file system allows, a NUL byte), or ``None``."""
    if "\0" in str(path):
        return "the name contains a NUL byte"
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            return exc.strerror
    return None


def _cannot(verb: str, what: str, path: str | Path, why: str) -> InvalidSpecError:
    """The one-line error of every file this module refuses to read or write."""
    return InvalidSpecError(f"cannot {verb} {what} {str(path)!r}: {why}")


def _check_path(path: object, what: str) -> None:
    """Refuse what is not a file name (``os.stat(5)`` would stat file descriptor 5, and
    None or a mapping raise TypeError): every reader names ``what`` it wanted."""
    if not isinstance(path, (str, os.PathLike)) or isinstance(os.fspath(path), bytes):
        raise invalid(what, path, "a file path (a string or a pathlib.Path)")


def read_bytes(path: str | Path, *, what: str = "file",
               max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    """Read a regular file of at most ``max_bytes`` bytes, never blocking.

    Raises
    ------
    InvalidSpecError
        ``path`` not a path (a number, None, a mapping: ``invalid <what> 5``), or the
        file is missing, unreadable, not a regular file, or too large.
    """
    _check_path(path, what)
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise _cannot("read", what, p, "no such file") from None
    except OSError as exc:
        raise _cannot("read", what, p, exc.strerror) from None
    if not stat.S_ISREG(st.st_mode):
        kind = ("a directory" if stat.S_ISDIR(st.st_mode) else
                "a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else
                "a device or socket")
        raise _cannot("read", what, p, f"it is {kind}, expected a regular file")
    if st.st_size > max_bytes:
        raise _cannot("read", what, p, f"{st.st_size} bytes, larger than the {max_bytes} "
                      "allowed for this input")
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise _cannot("read", what, p, exc.strerror) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped after the stat above
            raise _cannot("read", what, p, "not a regular file")
        chunks, total = [], 0
        while block := os.read(fd, 1 << 20):
            total += len(block)
            if total > max_bytes:  # the file grew while reading
                raise _cannot("read", what, p, f"larger than the {max_bytes} bytes allowed "
                              "for this input")
            chunks.append(block)
    except OSError as exc:
        raise _cannot("read", what, p, exc.strerror) from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_text(path: str | Path, *, what: str = "file",
              max_bytes: int = MAX_INPUT_BYTES) -> str:
    """Read a UTF-8 text file safely (see :func:`read_bytes`); a BOM is dropped.

    Raises
    ------
    InvalidSpecError
        As :func:`read_bytes` (``path`` not a path included), or the content is
        UTF-16/32 or binary, or not UTF-8.
    """
    data = read_bytes(path, what=what, max_bytes=max_bytes)
    head = data[:4096]
    # A byte-order mark, or NUL bytes in at least a quarter of the first 4 KiB.
    if data.startswith((b"\xff\xfe", b"\xfe\xff")) \
            or head.count(b"\x00") >= max(1, len(head) // 4):
        raise _cannot("read", what, path, "it is UTF-16/UTF-32 encoded; save it as UTF-8")
    if b"\x00" in data:
        raise _cannot("read", what, path, "it contains NUL bytes (a binary file?); expected "
                      "UTF-8 text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise _cannot("read", what, path, f"not UTF-8 text (byte 0x{data[exc.start]:02x} at "
                      f"line {line}); save it as UTF-8") from None
    return text[1:] if text.startswith("\ufeff") else text


def _yaml_error(exc: Exception, where: str) -> InvalidSpecError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    at = f" at line {mark.line + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or "syntax error"
    return InvalidSpecError(f"invalid YAML in {where}{at}: {problem}")


def _check_unique_keys(node: Any, where: str) -> None:
    """Refuse a mapping that states one key twice: YAML loaders keep the last silently
    (``study: s1`` then ``study: s2`` ran s2).  Merge keys (``<<``) are not keys."""
    import yaml

    seen: dict[tuple[str, str], int] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
            continue
        line = key.start_mark.line + 1
        first = seen.get((key.tag, key.value))
        seen.setdefault((key.tag, key.value), line)
        if first is not None:
            raise InvalidSpecError(
                f"invalid YAML in {where} at line {line}: duplicate key {key.value!r} (also "
                f"at line {first}); state each key once")


def _expanded_size(root: Any, where: str, limit: int) -> None:
    """Count nodes of the YAML graph with aliases expanded; refuse above ``limit``; refuse
    duplicate keys in a mapping (:func:`_check_unique_keys`)."""
    import yaml

    memo: dict[int, int] = {}
    active: set[int] = set()
    # Iterative post-order walk: a deep document must not hit the recursion limit.
    stack: list[tuple[Any, int, bool]] = [(root, 0, False)]
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if key in memo and not done:
            continue
        if depth > MAX_JSON_DEPTH:
            line = node.start_mark.line + 1 if getattr(node, "start_mark", None) else "?"
            raise InvalidSpecError(f"invalid YAML in {where} at line {line}: nested deeper "
                                   f"than {MAX_JSON_DEPTH} levels")
        if isinstance(node, yaml.ScalarNode):
            memo[key] = 1
            continue
        children = ([c for pair in node.value for c in pair]
                    if isinstance(node, yaml.MappingNode) else list(node.value))
        if not done:
            if isinstance(node, yaml.MappingNode):
                _check_unique_keys(node, where)
            if key in active:  # a recursive alias: expands forever
                raise InvalidSpecError(f"invalid YAML in {where}: a recursive alias (&anchor "
                                       f"used inside itself)")
            active.add(key)
            stack.append((node, depth, True))
            stack.extend((c, depth + 1, False) for c in children if id(c) not in memo)
            continue
        active.discard(key)
        total = 1 + sum(memo[id(c)] for c in children)
        if total > limit:
            line = node.start_mark.line + 1
            raise InvalidSpecError(
                f"invalid YAML in {where} at line {line}: anchors and aliases expand to more "
                f"than {limit} values (an alias bomb?); write the data out without aliases")
        memo[key] = total


def load_yaml_text(text: str, *, where: str = "YAML input",
                   max_nodes: int = MAX_YAML_NODES) -> Any:
    """Load YAML with the safe loader, refusing alias bombs and deep nesting."""
    import yaml

    try:
        loader = yaml.SafeLoader(text)
    except yaml.YAMLError as exc:  # non-printable characters are refused by the reader
        raise _yaml_error(exc, where) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, where, max_nodes)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, where) from None
    except RecursionError:
        raise InvalidSpecError(f"invalid YAML in {where}: nested too deeply") from None
    finally:
        loader.dispose()


def load_yaml_file(path: str | Path, *, what: str = "spec file",
                   max_bytes: int = MAX_INPUT_BYTES) -> Any:
    """Read and load a YAML file safely (:func:`read_text` + :func:`load_yaml_text`)."""
    text = read_text(path, what=what, max_bytes=max_bytes)
    return load_yaml_text(text, where=f"{what} {str(path)!r}")


def load_json_file(path: str | Path, *, what: str = "JSON file",
                   max_bytes: int = MAX_INPUT_BYTES) -> Any:
    """Read and parse a JSON file safely; NaN/Infinity literals and deep nesting are errors."""
    text = read_text(path, what=what, max_bytes=max_bytes)
    return load_json_text(text, where=f"{what} {str(path)!r}")


def load_json_text(text: str, *, where: str = "JSON input") -> Any:
    """Parse JSON text; NaN/Infinity literals, huge numbers and deep nesting are errors."""
    _check_json_depth(text, where)

    def bad_constant(name: str) -> Any:
        raise InvalidSpecError(f"invalid JSON in {where}: {name} is not a number "
                               f"(JSON has no NaN or Infinity)")

    try:
        return json.loads(text, parse_constant=bad_constant)
    except json.JSONDecodeError as exc:
        raise InvalidSpecError(f"invalid JSON in {where} at line {exc.lineno}: "
                               f"{exc.msg}") from None
    except RecursionError:
        raise InvalidSpecError(f"invalid JSON in {where}: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer literal of more than 4300 digits
        raise InvalidSpecError(f"invalid JSON in {where}: {str(exc)[:120]}") from None


def _check_json_depth(text: str, where: str) -> None:
    depth, in_string, escape = 0, False, False
    for line_no, line in enumerate(text.splitlines() or [text], 1):
        for ch in line:
            if in_string:
                if escape:
                    escape = False
                elif ch == "\\":
                    escape = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch in "[{":
                depth += 1
                if depth > MAX_JSON_DEPTH:
                    raise InvalidSpecError(f"invalid JSON in {where} at line {line_no}: nested "
                                           f"deeper than {MAX_JSON_DEPTH} levels")
            elif ch in "]}":
                depth -= 1


def check_output_path(path: str | Path, *, what: str = "output file") -> Path:
    """Check that ``path`` can be written: its folder exists and it is not a directory."""
    p = Path(path)
    if not str(p) or str(p).endswith(("/", os.sep)):
        raise _cannot("write", what, p, "expected a file name, not a folder")
    if why := _unusable_name(p):
        raise _cannot("write", what, p, why)
    if p.is_dir():
        raise _cannot("write", what, p, "it is a directory; give a file name inside it")
    folder = p.parent if str(p.parent) else Path(".")
    if not folder.is_dir():
        # The nearest part of the folder that exists says why: a file in the way, or a
        # folder to create first.
        ancestor = folder
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if ancestor.exists() and not ancestor.is_dir():
            raise _cannot("write", what, p, f"{str(ancestor)!r} is a file, not a folder")
        raise _cannot("write", what, p, f"folder {str(folder)!r} does not exist (create it "
                      "first)")
    if p.exists() and not p.is_file():
        raise _cannot("write", what, p, "it exists and is not a regular file")
    return p


def check_output_folder(path: str | Path, *, what: str = "output folder") -> Path:
    """Check, before any work, that folder ``path`` exists or can be created.

    Nothing is created here (a refused or failed run leaves no empty folder): ``path``
    must be a directory if it exists, and its nearest existing ancestor a writable one.
    """
    p = Path(path)
    if not str(path):
        raise _cannot("write", what, p, "expected a folder name")
    if why := _unusable_name(p):
        raise _cannot("write", what, p, why)
    if p.exists():
        if not p.is_dir():
            raise _cannot("write", what, p, "it exists and is a file, not a folder")
        if not os.access(p, os.W_OK):
            raise _cannot("write", what, p, "the folder is not writable")
        _probe_folder(p, what, p)
        return p
    parent = p.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise _cannot("write", what, p, f"{str(parent)!r} is a file, not a folder")
    if not os.access(parent, os.W_OK):
        raise _cannot("write", what, p, f"folder {str(parent)!r} is not writable")
    _probe_folder(parent, what, p)
    return p


def _probe_folder(folder: Path, what: str, target: Path) -> None:
    """Create and remove a folder in ``folder``: ``os.access`` says yes to root and on
    pseudo or read-only file systems (``/proc``), where the real mkdir later fails."""
    import tempfile

    try:
        os.rmdir(tempfile.mkdtemp(prefix=".codesign-probe-", dir=folder))
    except OSError as exc:
        raise _cannot("write", what, target, f"no folder can be created in {str(folder)!r} "
                      f"({exc.strerror or exc})") from None


def write_text_atomic(path: str | Path, text: str, *, what: str = "output file") -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`write_bytes_atomic`)."""
    return write_bytes_atomic(path, text.encode("utf-8"), what=what)


def write_bytes_atomic(path: str | Path, data: bytes, *, what: str = "output file") -> Path:
    """Write ``data`` to ``path`` atomically: temp file in the folder, then rename.

    Raises
    ------
    InvalidSpecError
        Missing folder, a directory target, or an OS error (permissions, disk full);
        no partial file is left behind.
    """
    p = check_output_path(path, what=what)
    folder = p.parent if str(p.parent) else Path(".")
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
        tmp = None
    except OSError as exc:
        raise _cannot("write", what, p, exc.strerror) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return p
