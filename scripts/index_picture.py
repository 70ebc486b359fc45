"""The picture of the index the README shows (docs/index.png): results/index.html as headless
Chromium draws it, the top of the page at a common window width.

    python scripts/index_picture.py [RESULTS_INDEX] [PICTURE]

Needs Chromium (Debian's package chromium; `.ci/run` installs it for the tests)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--window-size=1200,1500",
]


def main(index: str = "results/index.html", picture: str = "docs/index.png") -> int:
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        print("no Chromium on PATH: install Debian's chromium package", file=sys.stderr)
        return 1
    page = Path(index).resolve()
    if not page.is_file():
        print(f"{index}: no index; run the study first (make reproduce)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as profile:
        where = [f"--user-data-dir={profile}", f"--screenshot={Path(picture).resolve()}"]
        done = subprocess.run(
            [browser, *FLAGS, *where, page.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )
    if done.returncode != 0 or not Path(picture).is_file():
        print(done.stderr[-2000:], file=sys.stderr)
        return 1
    print(f"{index} -> {picture}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
