"""The docs a user reads hold: every link reaches a file (and its heading), and every command
they quote still runs as written.

A ``kibitz …`` command is parsed by Kibitz's own argument parser, so a renamed command or
option fails here, not in a newcomer's shell. A ``python bench/….py …`` command must name a
script that exists and options that the script (or the bench module it takes its command line
from) defines; running every benchmark is the benchmarks' job, not the test suite's.
"""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from pipeline.cli.main import build_parser

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [
        REPO / "README.md",
        REPO / "bench" / "README.md",
        *(REPO / "infra").rglob("README.md"),
        *(REPO / "docs").rglob("*.md"),
        *(REPO / "models").glob("*/MODEL_CARD.md"),
    ]
)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```(\w*)\s*$")
# ``kibitz`` and its (sub)commands, not a model name (``kibitz-meta-go``) or a message (``kibitz
# train: …``); a bench script by its path.
COMMAND_START = re.compile(r"^(kibitz(\s+-\S+)*\s+[A-Za-z|-]+|python3? bench/\S+\.py)(\s|$)")
REDIRECT = re.compile(r"\s+\d?>>?\s*\S+")


def _rel(page: Path) -> str:
    return str(page.relative_to(REPO))


def slug(heading: str) -> str:
    """A heading's anchor as GitHub writes it: lower case, punctuation dropped but ``-`` and
    ``_``, spaces to hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    in_fence = False
    for line in page.read_text().splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
        if in_fence or not line.startswith("#"):
            continue
        base = slug(line.lstrip("#"))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list[tuple[int, str]]:
    out = []
    in_fence = False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
        if in_fence:
            continue
        line = re.sub(r"`[^`]*`", "", line)  # code spans are not links
        out += [(number, a or b) for a, b in LINK.findall(line)]
    return out


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_link_reaches_its_file_and_heading(page):
    broken = []
    for number, target in links(page):
        if re.match(r"^[a-z]+:", target):  # http(s), mailto: not checked offline
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{_rel(page)}:{number}: {target} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{_rel(page)}:{number}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def quoted_commands(page: Path) -> list[tuple[int, str, bool]]:
    """The ``kibitz`` and ``python bench/`` commands of a page's shell blocks (continuation
    lines joined, comments and prompts dropped; whole commands) and of its inline code spans
    (mentions: ``kibitz extract --part K/N`` names a command and an option, not a run)."""
    out: list[tuple[int, str, bool]] = []
    lines = page.read_text().splitlines()
    fence: str | None = None
    pending, start = "", 0
    for number, line in enumerate(lines, 1):
        match = FENCE.match(line)
        if match:
            fence = None if fence is not None else match.group(1)
            continue
        if fence in ("bash", "sh", "shell", "console"):
            text = line.split(" # ")[0].strip()
            text = text.removeprefix("$ ")
            if not pending:
                start = number
            if text.endswith("\\"):
                pending += text[:-1] + " "
                continue
            text, pending = " ".join((pending + text).split()), ""
            if COMMAND_START.match(text):
                out += [
                    (start, part.strip(), True)
                    for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", text)
                    if COMMAND_START.match(part.strip())
                ]
        elif fence is None:
            for span in re.findall(r"`([^`]+)`", line):
                if COMMAND_START.match(span):
                    out.append((number, span.replace("…", "").replace("...", ""), False))
    return out


def _options(parser: argparse.ArgumentParser) -> set[str]:
    """A parser's options and its subcommands' (a mention may leave the subcommand out:
    ``kibitz ingest … --address auto``)."""
    out = {s for a in parser._actions for s in a.option_strings}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            out |= {s for sub in action.choices.values() for s in _options(sub)}
    return out


def _kibitz_problem(argv: list[str], whole: bool = True) -> str | None:
    """A whole command must parse; a mention must name commands that exist (``a|b`` for
    several, an upper-case word for any) and options those commands take."""
    parser = build_parser()
    if whole:
        try:
            parser.parse_args(argv)
        except SystemExit as stop:
            return None if stop.code == 0 else "the parser refused it"
        return None
    flags: list[str] = []
    for word in argv:
        if word.startswith("-") or flags:  # an option, or an option's value
            flags += [word.split("=")[0]] if word.startswith("-") else []
            continue
        commands = next(
            (a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None
        )
        if commands is None or word.isupper():
            break
        names = word.split("|")
        if any(name not in commands for name in names):
            return f"no command {word!r}"
        parser = commands[names[0]]
    known = {"-v", *_options(parser)}
    unknown = [f for f in flags if f not in known]
    return f"no option {', '.join(unknown)}" if unknown else None


def _bench_problem(argv: list[str]) -> str | None:
    script = REPO / argv[0]
    if not script.exists():
        return f"{argv[0]} does not exist"
    source = script.read_text()
    for module in re.findall(r"^from (\w+) import", source, re.M):  # its bench helpers
        sibling = [p for p in (REPO / "bench").glob(f"*/{module}.py")]
        source += "".join(p.read_text() for p in sibling)
    unknown = [
        flag for flag in (a.split("=")[0] for a in argv[1:] if a.startswith("--"))
        if f'"{flag}"' not in source and f"'{flag}'" not in source
    ]
    return f"{argv[0]} has no option {', '.join(unknown)}" if unknown else None


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_quoted_command_runs_as_written(page):
    broken = []
    for number, command, whole in quoted_commands(page):
        try:
            # a synopsis's [optional parts] are checked as given, a redirection is the shell's
            words = shlex.split(REDIRECT.sub("", re.sub(r"[\[\]]", " ", command)))
        except ValueError as error:
            broken.append(f"{_rel(page)}:{number}: {command!r} ({error})")
            continue
        words = [w for w in words if not re.fullmatch(r"[A-Z_]+=\S*", w)]  # VAR=value prefixes
        problem = (
            _kibitz_problem(words[1:], whole)
            if words[0] == "kibitz"
            else _bench_problem(words[1:])
        )
        if problem:
            broken.append(f"{_rel(page)}:{number}: {command!r} ({problem})")
    assert not broken, "\n".join(broken)


def test_the_checks_catch_what_they_are_for(tmp_path):
    """A hand-made page: one good and one broken link, one good and two broken commands."""
    (tmp_path / "other.md").write_text("# Other page\n\n## A `code` heading, too\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-code-heading-too) [bad](other.md#nowhere) [gone](missing.md)\n\n"
        "```bash\nkibitz estimate chess game.pgn \\\n    --player alice   # a comment\n"
        "kibitz estimate chess game.pgn --no-such-option\n```\n\n"
        "Run `python bench/speed/no_such_bench.py --games 3`.\n"
    )
    found = links(page)
    assert [t for _, t in found] == ["other.md#a-code-heading-too", "other.md#nowhere", "missing.md"]
    assert anchors(tmp_path / "other.md") == {"other-page", "a-code-heading-too"}
    commands = quoted_commands(page)
    assert commands == [
        (4, "kibitz estimate chess game.pgn --player alice", True),
        (6, "kibitz estimate chess game.pgn --no-such-option", True),
        (9, "python bench/speed/no_such_bench.py --games 3", False),
    ]
    assert _kibitz_problem(shlex.split(commands[0][1])[1:]) is None
    assert _kibitz_problem(shlex.split(commands[1][1])[1:]) == "the parser refused it"
    assert _kibitz_problem(["models", "list|fetch|check"], whole=False) is None
    assert _kibitz_problem(["extract", "--part", "K/N"], whole=False) is None
    assert _kibitz_problem(["COMMAND", "--help"], whole=False) is None
    assert _kibitz_problem(["models", "lst"], whole=False) == "no command 'lst'"
    assert _kibitz_problem(["extract", "--parts"], whole=False) == "no option --parts"
    assert _bench_problem(["bench/speed/no_such_bench.py"]).endswith("does not exist")
    assert _bench_problem(["bench/accuracy/meta_compare.py", "--splits", "5"]) is None
    assert "--nope" in _bench_problem(["bench/accuracy/meta_compare.py", "--nope"])
