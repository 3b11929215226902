"""The application layer: the ``codesign`` command line (:mod:`codesign.app.cli`) and the
report of a results folder (:mod:`codesign.app.report`).

The top of the layering (docs/architecture.md section 2): it may import every package
and nothing imports it; ``python -m codesign`` (``codesign/__main__.py``) runs its
command line.
"""
