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
