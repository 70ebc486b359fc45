"""The README and the pages under docs/ stay true to the project: every relative link
reaches a file (and a heading, where it names one), and every `python -m kernels …` and
`snakemake …` command they show, in a code block or inline, is one the real command lines
accept: the package's parser, and the workflow's rules, profiles and config files. The
commands that run something are run by the tests of what they do (the plugin of
docs/plugins.md: test_readme_plugin.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from workflow_run import ROOT

from kernels.cli import build_parser

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
PLACEHOLDER = re.compile(r"[\[\]…<>]|\.\.\.|YOUR_|\$")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.*)$", text, re.M)}


def test_the_readme_is_short_and_links_every_page_of_docs():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 120
    for page in PAGES[1:]:
        assert f"](docs/{page.name})" in readme or f"](docs/{page.name}#" in readme, page.name


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_reaches_its_file_and_heading(page):
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        found = (page.parent / path).resolve() if path else page
        assert found.exists(), f"{page.name}: {target}"
        if anchor and found.suffix == ".md":
            assert anchor in anchors(found), f"{page.name}: {target}"


def shown_commands(prefix: str) -> list[tuple[str, str]]:
    """(page, command) for each command starting with ``prefix`` in a code block (with its
    continuation lines) or an inline code span (which may run over a line break)."""
    found = []
    for page in PAGES:
        text = page.read_text()
        blocks = re.findall(r"```[^\n]*\n(.*?)```", text, re.S)
        lines = [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]
        spans = re.findall(r"`([^`]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
        for command in lines + spans:
            command = " ".join(command.split())
            if command.startswith(prefix):
                found.append((page.name, command))
    return found


def subcommands() -> dict:
    parser = build_parser()
    return next(a for a in parser._actions if a.choices and "measure" in a.choices).choices


def test_every_kernels_command_shown_is_one_the_command_line_takes():
    """A whole command parses; a synopsis (with placeholders) names only options its
    subcommand has."""
    commands = shown_commands("python -m kernels ")
    assert len(commands) >= 10  # the pages show the command line throughout
    parsers = subcommands()
    parsed = 0
    for page, command in commands:
        words = command.split()
        if len(words) < 4 or words[3] not in parsers:
            assert words[3:4] in ([], ["..."], ["…"]), f"{page}: `{command}`: no such command"
            continue
        options = {o for a in parsers[words[3]]._actions for o in a.option_strings}
        for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*", command):
            assert option in options, f"{page}: `{command}`: {words[3]} has no {option}"
        if len(words) > 4 and not PLACEHOLDER.search(command):
            try:
                parsers[words[3]].parse_args(shlex.split(command)[4:])
            except SystemExit as err:
                pytest.fail(f"{page}: `{command}` is refused by the command line ({err})")
            parsed += 1
    assert parsed >= 2


def test_every_snakemake_command_shown_names_real_rules_profiles_and_files():
    rules = set(re.findall(r"^(?:rule|checkpoint) (\w+):", _workflow(), re.M))
    commands = shown_commands("snakemake ")
    assert commands
    for page, command in commands:
        words = shlex.split(command)[1:]
        for i, word in enumerate(words):
            if word == "--profile":
                assert (ROOT / words[i + 1]).is_dir(), f"{page}: {command}"
            elif word.endswith((".yaml", ".yml")) and not word.startswith("--"):
                assert (ROOT / word).is_file(), f"{page}: {command}"
            elif re.fullmatch(r"[a-z_]+", word) and (i == 0 or not words[i - 1].startswith("-")):
                assert word in rules, f"{page}: {command}: no rule {word}"


def _workflow() -> str:
    return "".join(p.read_text() for p in [ROOT / "Snakefile", *(ROOT / "workflow" / "rules").glob("*.smk")])
