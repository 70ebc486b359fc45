"""Make an executed report notebook depend only on its inputs: cell ids numbered in order
(papermill and nbformat draw random ones), papermill's and the kernel client's timings
removed, the paths papermill ran from dropped, and object addresses in plain-text outputs
(``<Styler at 0x…>``) blanked, so that two renders from the same tables are byte-identical,
notebook and HTML.

    python -m reports.stable NOTEBOOK
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from kernels.io.atomic import write_text_atomic

TIMINGS = ("start_time", "end_time", "duration")
# where papermill found the template and wrote the result: the run's places, not its content
PLACES = ("input_path", "output_path")
ADDRESS = re.compile(r" at 0x[0-9a-f]+>")


def stabilize(notebook: dict) -> dict:
    for index, cell in enumerate(notebook["cells"]):
        cell["id"] = f"cell-{index}"
        cell.get("metadata", {}).pop("execution", None)
        timings = cell.get("metadata", {}).get("papermill", {})
        for key in TIMINGS:
            timings.pop(key, None)
        for output in cell.get("outputs", []):
            output.get("metadata", {}).pop("papermill", None)
            plain = output.get("data", {}).get("text/plain")
            if plain:
                text = "".join(plain) if isinstance(plain, list) else plain
                output["data"]["text/plain"] = ADDRESS.sub(">", text)
    for key in TIMINGS + PLACES:
        notebook.get("metadata", {}).get("papermill", {}).pop(key, None)
    return notebook


def main(path: str) -> None:
    notebook = Path(path)
    data = stabilize(json.loads(notebook.read_text(encoding="utf-8")))
    write_text_atomic(notebook, json.dumps(data, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
