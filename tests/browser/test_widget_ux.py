"""Issue 25 on the Voila route: the static copy of a widget's default view hides once the live widget renders
(the rule travels in the widget's own output, so no route needs an extension), and the summary is the wrapped
one. The lab's checks are in test_lab.py (``test_static_default_figure_is_hidden_once_the_widget_renders``)."""

from __future__ import annotations

import pytest
from conftest import SHOTS  # (conftest puts tools/ on sys.path)


@pytest.mark.parametrize("voila_page", ["15_serving.ipynb"], indirect=True, ids=["15_serving"])
def test_voila_hides_the_static_copy_of_the_default_view(voila_page):
    page, blocked = voila_page.page, voila_page.blocked      # (opened once, shared with the chapter's tests)
    page.locator(".llmsizing-summary").first.wait_for(state="visible", timeout=240_000)
    state = page.evaluate("""() => { const m = document.querySelector('.llmsizing-default-of-serving_widget');
       const a = m && m.closest('.jp-OutputArea'), img = a && a.querySelector('img');
       return {marker: !!m, image: !!img, live: !!document.querySelector('.llmsizing-live-serving_widget'),
               height: a ? a.getBoundingClientRect().height : null}; }""")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "voila-15-static-copy-hidden.png"))
    assert state["marker"] and state["image"] and state["live"], state
    assert state["height"] == 0, f"the static copy takes {state['height']} px under the live widget"
    assert not blocked, f"requests left the machine: {blocked}"


def test_static_site_keeps_the_static_copy_of_the_default_view(chromium, built_site, guard_network):
    """The static site runs no widget, so it carries no live rule: chapter 12's marked copy shows its figure.
    (Skipped until `make book` has built _build/html.)"""
    import check_site

    rel = next(p for p in check_site.chapter_pages() if "12_how_many_gpus" in p)
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    try:
        blocked = guard_network(page)
        page.goto(built_site.base_url + rel, wait_until="load")
        state = page.evaluate("""() => { const m = document.querySelector('.llmsizing-default-of-planner_widget');
           const c = m && m.closest('.cell'), img = c && c.querySelector('img');
           return {marker: !!m, height: img ? img.getBoundingClientRect().height : 0,
                   live: !!document.querySelector('[class*="llmsizing-live-"]')}; }""")
        assert state["marker"] and not state["live"], state
        assert state["height"] > 100, f"chapter 12's static copy of the planner's default view is hidden: {state}"
        assert not blocked, blocked
    finally:
        page.close()
