"""A page that rendered, published: its executed notebook copied to results/reports/ and its
HTML written beside it (images embedded; code hidden unless asked for), each under a
temporary name renamed once whole. nbconvert's command line exits 0 when its output could not
be written (a full disk), which would put a page cut short under its final name; here a write
that finds no room stops the job, naming the file and the bytes it needed.

    python -m reports.pages.publish OUTCOME NOTEBOOK OUT_NOTEBOOK OUT_HTML [--no-input]

Refused (exit 1, naming the page's error) when OUTCOME says the page did not render."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from kernels.io.atomic import saying_a_full_disk, write_text_atomic
from reports.pages import outcome


def templates_beside_nbconvert() -> list[str]:
    """The data folders (share/jupyter) of the installation nbconvert itself came from: its
    templates are there, not under sys.prefix, where an environment borrows another's
    packages (a plugin's venv, a --target install). The `jupyter nbconvert` command finds them
    by running from that installation; an exporter called here is told."""
    import nbconvert

    package = Path(nbconvert.__file__).resolve().parent
    found = []
    for prefix in (package.parent, *package.parents[2:5]):  # --target: site/; a venv: the prefix
        data = prefix / "share" / "jupyter"
        if (data / "nbconvert" / "templates").is_dir():
            found.append(str(data))
    return found


def html_of(notebook: str, code: bool) -> str:
    import nbformat
    from nbconvert import HTMLExporter

    given = [p for p in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if p]
    os.environ["JUPYTER_PATH"] = os.pathsep.join(dict.fromkeys([*given, *templates_beside_nbconvert()]))
    exporter = HTMLExporter()
    if not code:  # what nbconvert's --no-input sets
        exporter.exclude_input = exporter.exclude_input_prompt = exporter.exclude_output_prompt = True
    body, _ = exporter.from_notebook_node(nbformat.read(notebook, as_version=4))
    return body


def publish(result: str, notebook: str, out_notebook: str, out_html: str, code: bool) -> int:
    refused = outcome.unpublishable(result)
    if refused:
        print(f"error: {refused}", file=sys.stderr)
        return 1

    def written() -> int:
        write_text_atomic(out_notebook, Path(notebook).read_text(encoding="utf-8"))
        write_text_atomic(out_html, html_of(notebook, code))
        print(f"{notebook} -> {out_notebook}, {out_html}")
        return 0

    return saying_a_full_disk(written)


def main(argv: list[str]) -> int:
    about = __doc__.split("\n")[0]
    parser = argparse.ArgumentParser(prog="python -m reports.pages.publish", description=about)
    for name in ("outcome", "notebook", "out_notebook", "out_html"):
        parser.add_argument(name)
    parser.add_argument("--no-input", action="store_true", help="hide the code cells (as nbconvert's flag)")
    args = parser.parse_args(argv)
    return publish(args.outcome, args.notebook, args.out_notebook, args.out_html, code=not args.no_input)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
