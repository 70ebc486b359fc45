"""The packed index (reports.pack): what it links is copied with the same relative path, a
missing file is named and left out, a link out of its folder is refused."""

import pytest

from reports.pack import local_links, pack


def test_local_links_are_the_files_beside_the_page():
    page = (
        "<a href='reports/a%20b.html#top'>x</a><a href='#here'>y</a><a href='https://x.org/p'>z</a>"
        "<img src='data:image/png;base64,AAAA'><a href='points/p.json?v=1'>p</a><a href='reports/a%20b.html'>"
    )
    assert local_links(page) == ["reports/a b.html", "points/p.json"]


def test_pack_copies_what_the_index_links(tmp_path, capsys):
    results = tmp_path / "results"
    (results / "points").mkdir(parents=True)
    (results / "points" / "p.json").write_text('{"ok": 1}')
    (results / "metrics.csv").write_text("a\n1\n")
    (results / "unlinked.csv").write_text("b\n")
    index = results / "index.html"
    index.write_text("<a href='points/p.json'>r</a><a href='metrics.csv'>m</a><a href='logs/gone.log'>l</a>")
    out = results / "packed" / "index"
    assert pack(index, out) == ["logs/gone.log"]
    assert "logs/gone.log, which does not exist" in capsys.readouterr().err
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "index.html",
        "metrics.csv",
        "points/p.json",
    ]
    assert (out / "points" / "p.json").read_text() == '{"ok": 1}'


def test_a_link_out_of_the_folder_is_refused(tmp_path):
    (tmp_path / "secret.txt").write_text("x")
    index = tmp_path / "results" / "index.html"
    index.parent.mkdir()
    index.write_text("<a href='../secret.txt'>s</a>")
    with pytest.raises(ValueError, match="leaves"):
        pack(index, tmp_path / "out")


def test_a_packed_report_still_finds_the_index_warnings_it_links(tmp_path):
    """A report links the index's warnings in one line instead of repeating them; packed,
    the link lands on the index's warning box."""
    import pandas as pd

    from reports.pages.common import INDEX_WARNINGS
    from reports.pages.index import render, validation_summary
    from reports.pages.inputs import METRICS

    point = {"impl": "sdpa", "batch": 1, "heads": 1, "tokens": 16, "head_dim": 16, "dtype": "float32"}
    point |= {"causal": False, "inputs": "normal", "status": "skipped", "reason": "a test's reason"}
    metrics = pd.DataFrame([dict.fromkeys(METRICS) | point])
    results = tmp_path / "results"
    (results / "reports").mkdir(parents=True)
    page = render({"device": "cpu"}, metrics, validation_summary([]), {"storage": "Storage"}, pd.DataFrame())
    (results / "index.html").write_text(page)
    (results / "reports" / "storage.html").write_text(f"<a href='{INDEX_WARNINGS}'>warnings</a>")
    out = tmp_path / "packed"
    assert pack(results / "index.html", out) == []
    packed = out / "reports" / "storage.html"
    target, anchor = local_links(packed.read_text())[0], INDEX_WARNINGS.split("#")[1]
    landed = (packed.parent / target).resolve()
    assert landed == (out / "index.html").resolve()
    assert f"id='{anchor}'" in landed.read_text() and "a test&#x27;s reason" in landed.read_text()
