"""The plugin module docs/plugins.md shows (a PyTorch function and a Triton kernel), taken from
that page itself: it registers, validates against float64 and its Triton kernel moves the
bytes its own traffic model says, counted in the interpreter."""

import json
import os
import subprocess
import sys

from workflow_run import ROOT, env

FENCE = "```python\n# mypkg/attention.py\n"

COUNT = """
import json, torch, kernels
from kernels.catalog import get
from kernels.impl.inputs import make_qkv
from kernels.measure.traffic import count_traffic
from kernels.study.cost import summarize
from kernels.study.point import Point
found = []
for T, causal, (bm, bn) in ((33, True, (16, 32)), (100, False, (32, 16))):
    q, k, v = make_qkv(2, 1, T, 16, torch.float16, "cpu", T)
    with count_traffic() as counter:
        kernels.attention(q, k, v, impl="my_flash", causal=causal, block_m=bm, block_n=bn)
    model = summarize(Point("my_flash", 2, 1, T, 16, "float16", causal, bm, bn))
    found.append({"counted": counter.total, "model": model["traffic_model_bytes"]})
print(json.dumps({"found": found, "origin": get("my_torch").origin}))
"""


def readme_plugin(folder) -> None:
    text = (ROOT / "docs" / "plugins.md").read_text()
    start = text.index(FENCE) + len("```python\n")
    package = folder / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "attention.py").write_text(text[start : text.index("```", start)])


def test_the_readme_plugin_validates_and_counts_as_modelled(tmp_path):
    readme_plugin(tmp_path)
    environment = env() | {
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
        "ATTNIO_PLUGINS": "mypkg.attention",
        "ATTNIO_INTERPRET": "1",
    }
    verdicts = tmp_path / "validate.json"
    flags = ["--device", "cpu", "--dtype", "float32", "float16", "--tokens", "1", "33", "100"]
    flags += ["--head-dim", "16", "--block-m", "16", "--block-n", "32", "--json", str(verdicts)]
    done = subprocess.run(
        [sys.executable, "-m", "kernels", "validate", "--impl", "my_torch", "my_flash", *flags],
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    results = json.loads(verdicts.read_text())
    assert {r["impl"] for r in results} == {"my_torch", "my_flash"}
    assert all(r["verdict"] == "pass" for r in results)
    counted = subprocess.run(
        [sys.executable, "-c", COUNT], env=environment, capture_output=True, text=True, timeout=600
    )
    assert counted.returncode == 0, counted.stderr[-2000:]
    report = json.loads(counted.stdout.strip().splitlines()[-1])
    assert report["origin"] == "mypkg.attention"
    assert all(f["counted"] == f["model"] and f["counted"] > 0 for f in report["found"]), report
