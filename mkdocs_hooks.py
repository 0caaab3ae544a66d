"""mkdocs hooks: pages of the site that live under spec/, read where they are.

The learner's contract (spec/learner.md) is where the learner starter sends people, and it is
normative, so it stays in spec/ beside the semantics it cites; the site shows that file itself,
not a copy under docs/ that would have to be kept in step. A link of such a page to a file the
site does not have (``[semantics.md](semantics.md)``) is written as the file's repository path.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

SPEC_PAGES = {"learner.md": "spec/learner.md"}
"""Site page -> the file under spec/ it is read from."""

_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s:#]+\.md)(#[^)\s]*)?\)")


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    root = Path(config.config_file_path).parent
    for uri, path in SPEC_PAGES.items():
        files.append(File.generated(config, uri, abs_src_path=str(root / path)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    source = SPEC_PAGES.get(page.file.src_uri)
    if source is None:
        return markdown
    folder = Path(source).parent

    def unlinked(match: re.Match[str]) -> str:
        target = match.group(2)
        if files.get_file_from_path(target) is not None:
            return match.group(0)
        return f"`{(folder / target).as_posix()}`"

    return _LINK.sub(unlinked, markdown)
