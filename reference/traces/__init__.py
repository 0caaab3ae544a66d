"""Public traces read into kvsched workloads (docs/traces.md).

:mod:`.layouts` names each layout's columns, :mod:`.rows` reads and checks a file's rows one at
a time, :mod:`.prefixes` turns Mooncake's block hashes into prefix groups and :mod:`.convert`
applies the import's rules: failed rows, selection, time, clipping, limits.
"""

from .convert import DEFAULT_LIMITS, ImportOptions, ImportReport, import_trace
from .layouts import LAYOUT_NAMES, LAYOUTS, Layout, TraceLayout, layout_named
from .rows import TraceError, TraceRow, read_rows

__all__ = [
    "DEFAULT_LIMITS",
    "LAYOUTS",
    "LAYOUT_NAMES",
    "ImportOptions",
    "ImportReport",
    "Layout",
    "TraceError",
    "TraceLayout",
    "TraceRow",
    "import_trace",
    "layout_named",
    "read_rows",
]
