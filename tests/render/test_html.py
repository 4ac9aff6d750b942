from __future__ import annotations

from html.parser import HTMLParser

from optsched.model.plan import Plan
from optsched.model.snapshot import Snapshot
from optsched.render.html import render_html
from tests.render.conftest import DEFER_REASON

VOID = {"meta", "br", "rect", "line", "link", "img", "input", "hr"}


class Collector(HTMLParser):
    """Records element classes and checks that every opened element is closed in order."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.classes: list[str] = []
        self.titles: list[str] = []
        self.urls: list[str] = []
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        self.classes += (values.get("class") or "").split()
        self.urls += [v for k, v in attrs if k in ("src", "href") and v]
        if tag not in VOID:
            self.stack.append(tag)
        self._in_title = tag == "title"

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.classes += (dict(attrs).get("class") or "").split()

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}> with open {self.stack[-3:]}")
        else:
            self.stack.pop()
        self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.titles.append(data)


def _parse(text: str) -> Collector:
    parser = Collector()
    parser.feed(text)
    parser.close()
    return parser


def test_html_is_well_formed_and_self_contained(small_snapshot: Snapshot, small_plan: Plan) -> None:
    text = render_html(small_snapshot, small_plan)
    parsed = _parse(text)
    assert parsed.errors == []
    assert parsed.stack == []
    assert parsed.urls == []
    assert text.startswith("<!DOCTYPE html>")


def test_one_cell_per_gpu(small_snapshot: Snapshot, small_plan: Plan) -> None:
    parsed = _parse(render_html(small_snapshot, small_plan))
    assert parsed.classes.count("gpu") == sum(n.gpu_count for n in small_snapshot.nodes)


def test_usage_plan_islands_and_health_are_drawn(small_snapshot: Snapshot, small_plan: Plan) -> None:
    parsed = _parse(render_html(small_snapshot, small_plan))
    # h100-03 has GPUs 0, 1 and half of 2 in use before the plan.
    assert parsed.classes.count("existing") == 3
    # 16 whole GPUs for ml/train and one share for ml/notebook.
    assert parsed.classes.count("planned") == 17
    # Three 8-GPU NVSwitch islands and two A100 pairs; the T4 declares none.
    assert parsed.classes.count("island") == 5
    # The unhealthy A100 GPU is crossed out with two lines.
    assert parsed.classes.count("bad") == 2


def test_hover_titles_name_pod_and_workload(small_snapshot: Snapshot, small_plan: Plan) -> None:
    titles = "\n".join(_parse(render_html(small_snapshot, small_plan)).titles)
    assert "h100-01 GPU 3" in titles and "planned: ml/train main#0" in titles
    assert "planned: ml/notebook main#0" in titles
    assert "unhealthy" in titles


def test_tables_and_fragmentation_present(small_snapshot: Snapshot, small_plan: Plan) -> None:
    text = render_html(small_snapshot, small_plan)
    assert DEFER_REASON in text
    # The same node-filter diagnosis --explain prints.
    assert "podset main: 3 of 5 nodes eligible" in text
    assert "3.50 → 1.25" in text
    assert "topology-rack=r1" in text
