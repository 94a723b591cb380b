"""The BIG-bench archive's fallback download reads the right link and hash out of a PEP 503 index page."""

import pytest

from hero_core.eval.benchmarks.bigbench import ARCHIVE_NAME, archive_link

PAGE = """<html><body>
<a href="https://files.example/aa/bigbench-0.0.1.tar.gz#sha256=111">bigbench-0.0.1.tar.gz</a>
<a href="https://files.example/bb/{name}#sha256=abc123">{name}</a>
</body></html>"""


def test_archive_link_picks_the_pinned_version_and_its_hash():
    url, sha = archive_link(PAGE.format(name=ARCHIVE_NAME))
    assert url == f"https://files.example/bb/{ARCHIVE_NAME}"
    assert sha == "abc123"


def test_archive_link_refuses_a_page_without_the_pinned_version():
    with pytest.raises(ValueError, match=ARCHIVE_NAME):
        archive_link(PAGE.format(name="bigbench-2.0.0.tar.gz"))
