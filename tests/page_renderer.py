"""The suite's page renderer: every report template run on a study's results/ as a kernel
runs them (an IPython shell with the inline backend, one shell for all the studies), each
page's outputs read back with the error that stopped it. It runs as a script
(``python tests/page_renderer.py DIR...``: it writes DIR/rendered.json), in an environment
where importing torch or triton fails: the report stage only reads files, and every page of
every study rendered here shows that it does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unittest.mock
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = sorted((ROOT / "reports").glob("*.ipynb"))


def _shell():
    from IPython.core.interactiveshell import InteractiveShell

    class Shell(InteractiveShell):
        def enable_gui(self, gui=None):  # the inline backend needs no event loop
            pass

    shell = Shell.instance()
    shell.enable_matplotlib("inline")
    # each figure a page shows is drawn, so one that cannot be drawn fails its page, but not
    # encoded as PNG (a third of the time): the tests read its alternative text
    import IPython.core.pylabtools

    def drawn(fig, *args, **kwargs) -> bytes:
        fig.canvas.draw()
        return b""

    IPython.core.pylabtools.print_figure = drawn
    # and drawn once: pyplot's own hook would draw every open figure again after each cell
    # (a kernel's interactive redraw; its errors are only printed, so it catches nothing)
    import matplotlib.pyplot as plt

    shell.events.unregister("post_execute", plt._draw_all_if_interactive)
    # what every page imports lives as long as the shell: frozen, the collections the pages'
    # figures set off walk only what the pages made (5 % of a grid's render)
    import gc

    import reports.pages.common  # noqa: F401 (pandas, seaborn, pyplot)

    gc.collect()
    gc.freeze()
    return shell


def _outputs(captured) -> list[dict]:
    return [
        {kind: str(value) for kind, value in out.data.items() if kind != "text/plain"}
        | {"text/plain": str(out.data.get("text/plain", ""))}
        for out in captured.outputs
    ]


def render_study(shell, study: Path) -> dict:
    """Every template run in ``study`` (its defaults read study/results/...): per template,
    its outputs in order and the error that stopped it, if one did."""
    from IPython.utils.capture import capture_output

    os.chdir(study)
    pages = {}
    for template in TEMPLATES:
        with unittest.mock.patch("gc.collect"):  # a full collection per page: 0.2 s, a test's only
            shell.reset(new_session=False)
        outputs, error = [], None
        for cell in json.loads(template.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            with capture_output() as captured:
                result = shell.run_cell("".join(cell["source"]), silent=False)
            outputs += _outputs(captured)
            failure = result.error_before_exec or result.error_in_exec
            if failure is not None:
                # what the notebook shows of it (papermill prints the same): the traceback
                error = {"type": type(failure).__name__, "message": str(failure), "shown": captured.stdout}
                break
        import matplotlib.pyplot as plt

        with unittest.mock.patch("gc.collect"):
            plt.close("all")
        pages[template.stem] = {"outputs": outputs, "error": error}
    return pages


def main(studies: list[str]) -> None:
    shell = _shell()
    for study in map(Path, studies):
        rendered = render_study(shell, study)
        (study / "rendered.json").write_text(json.dumps(rendered))


def render_in_a_kernel(studies: list[Path], timeout: int = 900) -> dict[Path, dict]:
    """Every page of each study, rendered by this file run as a script (its own IPython
    shell), torch and triton out of reach: study → {page: outputs and error}."""
    from workflow_run import without_torch

    done = subprocess.run(
        [sys.executable, __file__, *map(str, studies)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=without_torch(Path(studies[0]).parent / "no-torch") | {"MPLBACKEND": "Agg"},
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {study: json.loads((study / "rendered.json").read_text()) for study in studies}


if __name__ == "__main__":
    main(sys.argv[1:])
