"""One exception type for every user-facing failure.

A :class:`SentlabError` carries one paragraph that names the file, line or
params key at fault and says how to fix it. The CLI prints it without a
traceback and exits with status 2.
"""

from __future__ import annotations


class SentlabError(Exception):
    """A clear, actionable error for the user (bad input, missing asset, invalid params)."""

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(" ".join(message.split()))


class DataFormatError(SentlabError):
    """A data file does not have the expected format."""

    def __init__(self, path, line: int | None, problem: str, fix: str = ""):
        where = f"{path}" + (f", line {line}" if line is not None else "")
        super().__init__(f"Malformed data file {where}: {problem}. {fix}".strip())
        self.path, self.line = str(path), line


class AssetMissingError(SentlabError):
    """An external asset (data set, model, NLTK resource) cannot be found offline."""
