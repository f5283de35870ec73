"""The shell commands of README.md and the docs pages, as a reader would type them.

Commands come from fenced code blocks marked bash, sh, shell or console (in a console block only
the lines after ``$ `` are commands; the lines after one are its output). Line continuations are
joined, comments dropped, and ``;``, ``&&``, ``||``, ``|`` and subshell parentheses split a line
into its commands. A file a page pulls in with ``--8<-- "FILE"`` (pymdownx.snippets, paths from
the repository's root) is read as part of it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHELL = {"bash", "sh", "shell", "console", "shell-session", "zsh"}
SEPARATORS = {";", "&&", "||", "|", "(", ")"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w-]*)[^\n]*\n"
                   r"(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$", re.M | re.S)
SNIPPET = re.compile(r"^[ \t]*-{1,3}8<-{1,3}[ \t]*[\"'](?P<path>[^\"']+)[\"'][ \t]*$", re.M)


@dataclass(frozen=True)
class Command:
    where: str                  # page:line of the command's first line
    argv: tuple[str, ...]
    output: tuple[str, ...] = field(default=())  # console blocks: the lines shown after it


def pages(root: Path = ROOT) -> list[Path]:
    """README.md and every page under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def split(line: str, where: str) -> list[tuple[str, ...]]:
    """One logical shell line into its commands (words after quoting, comments dropped)."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    try:
        tokens = list(lex)
    except ValueError as e:
        raise ValueError(f"{where}: cannot read {line!r} as shell words ({e})") from None
    out: list[tuple[str, ...]] = []
    cur: list[str] = []
    for tok in tokens:
        if tok in SEPARATORS:
            if cur:
                out.append(tuple(cur))
            cur = []
        elif tok and set(tok) <= set("<>&"):
            raise ValueError(f"{where}: {line!r} redirects ({tok}); this test runs commands "
                             "without a shell, so say what it should run")
        else:
            cur.append(tok)
    if cur:
        out.append(tuple(cur))
    return out


def block_commands(body: str, console: bool, where: str, first_line: int) -> list[Command]:
    """The commands of one code block's ``body``; ``first_line`` is its first line's number."""
    out: list[Command] = []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        start, line = i, lines[i]
        i += 1
        if console:
            if not line.startswith("$ "):
                continue
            line = line[2:]
        while line.rstrip().endswith("\\") and i < len(lines):
            line = line.rstrip()[:-1] + " " + lines[i].strip()
            i += 1
        shown: list[str] = []
        while console and i < len(lines) and not lines[i].startswith("$ "):
            shown.append(lines[i])
            i += 1
        loc = f"{where}:{first_line + start}"
        out += [Command(loc, argv, tuple(shown)) for argv in split(line, loc)]
    return out


def commands(path: Path, root: Path = ROOT) -> list[Command]:
    """Every shell command of the page at ``path`` (README.md or a docs page), then those of the
    pages it includes."""
    text = path.read_text()
    where = str(path.relative_to(root))
    out: list[Command] = []
    for m in FENCE.finditer(text):
        if m["lang"].lower() not in SHELL:
            continue
        body = "\n".join(line[len(m["indent"]):] for line in m["body"].splitlines())
        line = text.count("\n", 0, m.start("body")) + 1
        out += block_commands(body, m["lang"].lower() == "console", where, line)
    for m in SNIPPET.finditer(text):
        out += commands(root / m["path"], root)
    return out


def all_commands(root: Path = ROOT) -> list[Command]:
    return [c for p in pages(root) for c in commands(p, root)]
