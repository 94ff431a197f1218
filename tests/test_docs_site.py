"""The documentation site builds with ``mkdocs build --strict``: a broken link, a page missing from
the navigation's files or an API reference that names nothing fails the build. The site is built once
per session (``site``); the checks on its pages read that build.

What a user meets first is checked too: the home page opens with the quick start, every page is in the
navigation, links name pages by their title rather than their file name, and no Sphinx role
(``:func:`name```) is left raw in any page: docs/_hooks/sphinx_roles.py turns the roles of the
docstrings into links and fails the strict build on one it cannot resolve or one left in a page."""

from __future__ import annotations

import doctest
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
HOOK = DOCS / "_hooks" / "sphinx_roles.py"

# a role left in HTML: Markdown turns its backquoted target into a code span, or leaves the backquote
RAW_ROLE = re.compile(r":(?:py:)?[a-z]+:(?:<code>|`|&#96;)")
# a Markdown link to a page of the site: [text](page.md) or [text](page.md#anchor)
PAGE_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+?\.md)(#[^)\s]*)?\)")


def _mkdocs_build(project: Path, site_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(project)}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site, built once for every test of this module: (the build's result, the site folder)."""
    site_dir = tmp_path_factory.mktemp("docs") / "site"
    return _mkdocs_build(ROOT, site_dir), site_dir


def _built(site) -> Path:
    result, site_dir = site
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return site_dir


def _docs_pages() -> set[str]:
    """Every Markdown page under docs/, as the navigation names it ("api/metrics.md")."""
    return {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if "_hooks" not in p.parts}


def _nav_pages(nav) -> list[str]:
    pages = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages.extend(_nav_pages(value) if isinstance(value, list) else [value])
    return pages


def _config() -> dict:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))


@pytest.mark.slow
def test_docs_site_builds_strictly(site):
    site_dir = _built(site)
    assert (site_dir / "api" / "calibrators" / "index.html").is_file()
    reference = (site_dir / "api" / "calibrators" / "index.html").read_text(encoding="utf-8")
    assert "PAVCalibrator" in reference
    assert "finite_proba" in reference


def test_navigation_lists_every_docs_page_once():
    nav = _nav_pages(_config()["nav"])
    assert len(nav) == len(set(nav)), (
        f"pages listed twice in the navigation: {sorted(p for p in nav if nav.count(p) > 1)}"
    )
    assert set(nav) == _docs_pages(), (
        f"pages missing from the navigation: {sorted(_docs_pages() - set(nav))}; "
        f"navigation entries with no page: {sorted(set(nav) - _docs_pages())}"
    )
    assert "limits.md" in nav
    # and the strict build fails on a page left out, should a page be added without a nav entry
    assert _config()["validation"]["nav"]["omitted_files"] == "warn"


def test_navigation_starts_with_the_home_page_then_the_guide():
    nav = _config()["nav"]
    assert next(iter(nav[0].values())) == "index.md"
    sections = [next(iter(entry)) for entry in nav]
    assert sections[1] == "Guide"
    guide = _nav_pages(nav[1]["Guide"])
    assert "architecture.md" not in guide
    assert "design.md" not in guide
    assert sections.index("Guide") < next(i for i, e in enumerate(nav) if "architecture.md" in _nav_pages([e]))


@pytest.mark.slow
def test_no_raw_sphinx_role_in_any_built_page(site):
    site_dir = _built(site)
    pages = sorted(site_dir.rglob("*.html"))
    assert len(pages) > len(_docs_pages())  # every page, plus 404.html
    found = []
    for page in pages:
        prose = re.sub(r"<pre\b.*?</pre>", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
        found += [f"{page.relative_to(site_dir)}: {m[0]}" for m in RAW_ROLE.finditer(prose)]
    assert not found, "raw Sphinx roles in the site:\n" + "\n".join(found[:30])
    # the roles became links to the objects they name
    strategies = (site_dir / "api" / "strategies" / "index.html").read_text(encoding="utf-8")
    assert re.search(r'<a class="autorefs[^"]*"[^>]*href="#streamcal\.buckets\.as_buckets"', strategies)
    compose = (site_dir / "api" / "compose" / "index.html").read_text(encoding="utf-8")
    assert re.search(r'href="#streamcal\.persist\.load"[^>]*><code>load</code></a>', compose)


def test_the_check_finds_raw_roles_as_html_shows_them():
    for html in (":func:<code>streamcal.buckets.as_buckets</code>", ":class:`Thing`", ":py:meth:<code>close</code>"):
        assert RAW_ROLE.search(html), html
    for html in (
        '<a class="autorefs" href="#x"><code>as_buckets</code></a>',
        "Note: <code>x</code>",
        "e.g.:<code>x</code>",
    ):
        assert not RAW_ROLE.search(html), html


def test_home_page_opens_with_the_quick_start():
    text = (DOCS / "index.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert sections[0] == "Quick start"
    assert sections.index("Guide") > 0
    quick_start = text.split("\n## ")[1]
    assert re.search(r"pip install", quick_start)
    assert "streamcal demo" in quick_start
    assert "```python\n>>> " in quick_start
    assert "streamcal replay" in quick_start
    assert "--plot" in quick_start
    images = re.findall(r"!\[[^\]]+\]\(([^)]+\.png)\)", quick_start)
    assert images, "the quick start shows no figure"
    for image in images:
        assert (DOCS / image).is_file(), image
        assert (DOCS / image).stat().st_size < 200_000, f"{image} is {(DOCS / image).stat().st_size} bytes"


@pytest.mark.slow
def test_built_home_page_opens_with_the_quick_start(site):
    home = (_built(site) / "index.html").read_text(encoding="utf-8")
    assert re.findall(r'<h2 id="([^"]+)"', home)[0] == "quick-start"


def test_home_page_python_blocks_are_doctests_that_pass():
    blocks = re.findall(r"```python\n(.*?)```", (DOCS / "index.md").read_text(encoding="utf-8"), re.DOTALL)
    assert blocks, "the home page has no python block"
    parser = doctest.DocTestParser()
    for i, block in enumerate(blocks):
        test = parser.get_doctest(block, {}, f"docs/index.md block {i}", "docs/index.md", 0)
        assert test.examples, f"home page python block {i} is not written as a doctest (>>>)"
        runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
        runner.run(test)
        assert runner.failures == 0, f"home page python block {i}: {runner.failures} example(s) failed"


def _links_named_by_file_name(text: str) -> list[str]:
    named = []
    for match in PAGE_LINK.finditer(text):
        label, target = match[1].strip("`"), Path(match[2])
        if label in {target.name, target.stem, match[2]} or label.endswith(".md"):
            named.append(match[0])
    return named


def test_links_name_pages_by_title_not_by_file_name():
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        found += [f"{page.relative_to(ROOT)}: {link}" for link in _links_named_by_file_name(text)]
    assert not found, "links named by a file name instead of the page's title:\n" + "\n".join(found)


def test_the_link_check_finds_file_names():
    assert _links_named_by_file_name("see [streaming_pav](streaming_pav.md)")
    assert _links_named_by_file_name("see [streaming_pav.md](streaming_pav.md#threads)")
    assert _links_named_by_file_name("([architecture](../architecture.md))")
    assert not _links_named_by_file_name("see [Streaming PAV](streaming_pav.md)")
    assert not _links_named_by_file_name("see [figures and command](benchmarks.md#replay)")


ROLE_PACKAGE = {
    "rolepkg/__init__.py": '''
        """A package whose docstrings use Sphinx roles.

        :func:`helper` is re-exported, :class:`~rolepkg.things.Thing` is shortened to its name,
        :meth:`rolepkg.things.Thing.close` is a method; :func:`rolepkg.things.nowhere` names nothing.
        """

        from rolepkg.things import Thing, helper

        __all__ = ["Thing", "helper"]
        ''',
    "rolepkg/things.py": '''
        """Things."""


        def helper():
            """Help; see :class:`Thing` and the private :func:`_private`."""


        def _private():
            """Private."""


        class Thing:
            """A thing; :meth:`close` ends it."""

            def close(self):
                """End the :class:`Thing`."""
        ''',
    "docs/index.md": """
        # Roles

        A raw role left in Markdown: :func:`helper`.

        ::: rolepkg
        """,
    "mkdocs.yml": f"""
        site_name: roles
        hooks:
          - {HOOK}
        plugins:
          - mkdocstrings:
              handlers:
                python:
                  paths: [.]
                  options:
                    extensions:
                      - {HOOK}:SphinxRolesExtension
                    show_root_heading: true
                    show_source: false
        """,
}


def test_strict_build_fails_on_a_role_that_names_nothing_or_one_left_raw(tmp_path):
    for name, text in ROLE_PACKAGE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    result = _mkdocs_build(tmp_path, tmp_path / "site")
    log = result.stdout + result.stderr
    assert result.returncode != 0, log[-3000:]
    assert "Sphinx role that names nothing: rolepkg: :func:`rolepkg.things.nowhere`" in log, log[-3000:]
    assert "raw Sphinx role in index.md" in log, log[-3000:]
    assert "Markdown: :func:<code>helper</code>" in log, log[-3000:]
    assert len(re.findall(r"Sphinx role", log)) == 3, log[-3000:]  # those two, and the one left unresolved
    # strict mode aborts after writing the pages: the roles that name objects are links to them
    page = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    links = re.findall(r'<a class="autorefs[^"]*"[^>]*href="#([^"]+)"[^>]*>(.*?)</a>', page)
    assert ("rolepkg.helper", "<code>helper</code>") in links  # resolved in the package's own module
    assert ("rolepkg.Thing", "<code>Thing</code>") in links  # "~" keeps the last name
    assert ("rolepkg.Thing.close", "<code>rolepkg.things.Thing.close</code>") in links
    assert ("rolepkg.Thing.close", "<code>close</code>") in links  # a method named from its class
    # a private object no page documents is its name in code, not a broken link
    assert '<span title="rolepkg.things._private"><code>_private</code></span>' in page
