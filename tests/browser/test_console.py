"""The web console in a real browser against a real `attest dev`: collections, ingest, search, ask (answered and
abstained), cluster, quality, the fallback banner with the embedder down, the key prompt with auth on, phone width
and the keyboard. The tests of this module run in order on one cluster (the collection the first creates is the one
the others use). Each takes a screenshot of its page."""

from __future__ import annotations

import json
import re

from playwright.sync_api import Page, expect

from conftest import ADMIN_KEY, EVAL_REPORT, FIXTURES

COLLECTION = "console"
FIXTURE = FIXTURES / "squad-slice.jsonl"
ANSWERABLE = "Where was Super Bowl 50 played?"
UNANSWERABLE = "Who was the first emperor of the Inca empire?"
TIMEOUT_MS = 60_000


def shot(page: Page, shots, name: str) -> None:
    page.screenshot(path=str(shots / f"{name}.png"))


def open_page(page: Page, dev, name: str, collection: str | None = COLLECTION) -> None:
    page.goto(f"{dev.url}/#/{name}")
    expect(page.locator("main#view")).to_have_attribute("data-page", name)
    if collection:
        expect(page.locator("#collection option", has_text=collection)).to_have_count(1, timeout=TIMEOUT_MS)
        page.select_option("#collection", collection)


def test_collections_create_stats_and_drop(page: Page, dev, shots):
    page.goto(dev.url)
    expect(page).to_have_title(re.compile("Collections"))
    page.fill("#c-name", COLLECTION)
    page.fill("#c-shards", "2")
    page.click("#create-form summary")  # the index parameters are folded away until asked for
    page.fill("#c-nlist", "64")
    page.fill("#c-m", "48")
    page.click("#create-form button[type=submit]")
    expect(page.get_by_test_id("created")).to_contain_text(COLLECTION)
    row = page.locator(f"tr[data-collection={COLLECTION}]")
    expect(row).to_contain_text("nlist 64 · m 48")
    row.get_by_role("button", name="Stats").click()
    expect(page.get_by_test_id("stats-table").locator("tbody tr")).to_have_count(2)
    # Size on disk: a new replica already holds its log files.
    size = page.get_by_test_id("stats-table").locator("tbody tr").first.locator("td").nth(5)
    expect(size).to_have_text(re.compile(r"^[1-9][0-9.]* (B|KB|MB)$"))
    assert all(s["disk_bytes"] > 0 for s in dev.api("GET", f"/v1/collections/{COLLECTION}/stats")["shards"])
    assert dev.api("GET", f"/v1/collections/{COLLECTION}")["index"]["nlist"] == 64

    # A second collection, dropped through the confirmation dialog (cancel first: nothing happens).
    page.fill("#c-name", "scratch")
    page.click("#create-form button[type=submit]")
    scratch = page.locator("tr[data-collection=scratch]")
    expect(scratch).to_have_count(1)
    scratch.get_by_role("button", name="Drop scratch").click()
    page.locator("#confirm-dialog").get_by_role("button", name="Cancel").click()
    expect(scratch).to_have_count(1)
    scratch.get_by_role("button", name="Drop scratch").click()
    expect(page.locator("#confirm-text")).to_contain_text("cannot be undone")
    page.click("#confirm-yes")
    expect(scratch).to_have_count(0)
    names = [c["name"] for c in dev.api("GET", "/v1/collections")["collections"]]
    assert names == [COLLECTION], names
    # A refusal is shown with the API's message.
    page.fill("#c-name", COLLECTION)
    page.click("#create-form button[type=submit]")
    expect(page.get_by_test_id("error")).to_contain_text("already exists")
    page.get_by_test_id("error").evaluate("e => e.remove()")
    page.fill("#c-name", "")
    row.get_by_role("button", name="Stats").click()
    expect(page.get_by_test_id("stats-table")).to_be_visible()
    shot(page, shots, "collections")


def test_ingest_a_jsonl_file(page: Page, dev, shots):
    open_page(page, dev, "ingest")
    page.set_input_files("#ingest-input", str(FIXTURE))
    item = page.locator(f"li.file[data-file='{FIXTURE.name}']")
    expect(item).to_have_class(re.compile(r"\bdone\b"), timeout=TIMEOUT_MS)
    expect(item.locator("progress")).to_have_attribute("value", "1")
    expect(item.get_by_test_id("accepted")).to_have_text("40 accepted")
    expect(item.get_by_test_id("duplicates")).to_have_text("1 near-duplicates")
    expect(item.get_by_test_id("rejected")).to_have_text("2 rejected")
    rows = item.locator("tbody tr")
    expect(rows.nth(0)).to_contain_text("22")
    expect(rows.nth(0)).to_contain_text("near-duplicate of document `squad-dev-a0000-p000`")
    expect(rows.nth(1)).to_contain_text("21")
    expect(rows.nth(1)).to_contain_text("invalid JSON")
    expect(rows.nth(2)).to_contain_text("23")
    expect(rows.nth(2)).to_contain_text("missing `text`")
    # A Markdown file is one document titled by its first heading.
    md = {"name": "notes.md", "mimeType": "text/markdown",
          "buffer": b"# Console notes\n\nThe console uploads Markdown as one document.\n"}
    page.set_input_files("#ingest-input", files=[md])
    note = page.locator("li.file[data-file='notes.md']")
    expect(note.get_by_test_id("accepted")).to_have_text("1 accepted", timeout=TIMEOUT_MS)
    shot(page, shots, "ingest")


def test_search_shows_lanes_and_highlights(page: Page, dev, shots):
    open_page(page, dev, "search")
    page.fill("#s-query", "Denver Broncos defeated the Carolina Panthers")
    page.fill("input[name=k]", "5")
    page.click("#search-form button[type=submit]")
    hits = page.get_by_test_id("hits").locator("li.hit")
    expect(hits).to_have_count(5, timeout=TIMEOUT_MS)
    first = hits.first
    expect(first.locator(".lane", has_text="dense")).to_contain_text("#")
    expect(first.locator(".lane", has_text="bm25")).to_contain_text("#")
    expect(first).to_contain_text("shard")
    expect(first.locator("mark").first).to_have_text(re.compile("denver|broncos|carolina|panthers|defeated", re.IGNORECASE))
    expect(page.get_by_test_id("fallback-banner")).to_have_count(0)
    expect(page.get_by_test_id("degraded-banner")).to_have_count(0)
    # One lane only: every hit has a BM25 rank and none a dense one.
    page.check("input[name=lanes][value=bm25]")
    page.click("#search-form button[type=submit]")
    expect(page.locator("li.hit .lane.none", has_text="dense")).to_have_count(5, timeout=TIMEOUT_MS)
    # A filter that is not JSON is refused before anything is sent.
    page.fill("textarea[name=filter]", "{lang: en")
    page.click("#search-form button[type=submit]")
    expect(page.get_by_test_id("error")).to_contain_text("filter is not JSON")
    page.fill("textarea[name=filter]", "")
    page.check("input[name=lanes][value=hybrid]")
    page.click("#search-form button[type=submit]")
    expect(hits.first.locator(".lane", has_text="dense #")).to_have_count(1, timeout=TIMEOUT_MS)
    shot(page, shots, "search")


def test_stats_show_the_recall_searches_delivered(page: Page, dev):
    """After the searches above, each shard's live recall estimate (issue 73; every search sampled in this
    cluster) is in the stats table: the rows are unsealed, searched exactly, so it is 1, and no shard has a search
    setting to tune."""
    page.goto(dev.url)
    page.locator(f"tr[data-collection={COLLECTION}]").get_by_role("button", name="Stats").click()
    cells = page.get_by_test_id("stats-table").get_by_test_id("recall")
    expect(cells).to_have_count(2)
    expect(cells.filter(has_text=re.compile(r"^1\.000 \([01]\.\d{3}–1\.000\), \d+ samples$"))).not_to_have_count(0)
    # Nothing sealed, nothing to tune for the recall target: a flat scan is exact.
    tuned = page.get_by_test_id("stats-table").get_by_test_id("tuned")
    expect(tuned).to_have_count(2)
    expect(tuned.first).to_have_text("not tuned")


def test_ask_answerable_shows_verified_claims(page: Page, dev, shots):
    open_page(page, dev, "ask")
    page.fill("#a-question", ANSWERABLE)
    with page.expect_response(lambda r: r.url.endswith(f"/v1/collections/{COLLECTION}/ask")) as asked:
        page.keyboard.press("Enter")
    # The answer comes as Server-Sent Events: the passages found first, a delta per claim, then the whole response.
    assert asked.value.headers["content-type"].startswith("text/event-stream"), asked.value.headers
    events = asked.value.text()
    assert events.startswith("event: sources"), events[:200]
    assert events.index("event: sources") < events.index("event: delta") < events.index("event: done"), events[:400]
    table = page.get_by_test_id("verification")
    expect(table).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("answer")).to_contain_text("Levi's Stadium")
    supported = table.locator("tr.supported")
    expect(supported.first.locator(".verdict")).to_have_text("supported")
    support = float(supported.first.locator("td.num").inner_text())
    assert 0 < support <= 1, support
    # The claim's footnote resolves to its citation card: the cited chunk was found and the quote is marked in it.
    link = supported.first.locator("a.fn").first
    n = re.search(r"\d+", link.inner_text()).group(0)
    link.click()
    card = page.locator(f"#cite-{n}")
    expect(card).to_be_focused()
    expect(card).to_have_attribute("data-resolved", "true", timeout=TIMEOUT_MS)
    quote = card.locator("mark.quote")
    expect(quote).to_have_count(1)
    assert quote.inner_text().strip() in card.locator(".passage").inner_text()
    expect(page.get_by_test_id("answer").locator(f"a.fn[href='#cite-{n}']")).to_have_count(1)
    expect(page.get_by_test_id("latency").locator(".seg.s-retrieve")).to_have_count(1)
    expect(page.get_by_test_id("latency").locator(".seg.s-verify")).to_have_count(1)
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, shots, "ask")


def test_ask_unanswerable_shows_the_reason(page: Page, dev, shots):
    open_page(page, dev, "ask")
    page.fill("#a-question", UNANSWERABLE)
    page.click("#ask-form button[type=submit]")
    reason = page.get_by_test_id("abstention-reason")
    expect(reason).to_be_visible(timeout=TIMEOUT_MS)
    code = reason.get_attribute("data-reason")
    assert code, "abstention without a reason code"
    # Plain words, not the code.
    assert code not in reason.inner_text() and len(reason.inner_text()) > 30, reason.inner_text()
    expect(page.get_by_test_id("answer")).to_have_count(0)
    shot(page, shots, "ask-abstained")


def test_abstention_suggestions_are_follow_ups(page: Page, dev):
    # On this corpus the extractive reader abstains here and suggests the collection's topic instead.
    open_page(page, dev, "ask")
    page.fill("#a-question", "Who won Super Bowl 50?")
    page.click("#ask-form button[type=submit]")
    suggestion = page.locator("button.suggestion").first
    expect(suggestion).to_be_visible(timeout=TIMEOUT_MS)
    text = suggestion.inner_text()
    with page.expect_request(lambda r: r.url.endswith("/ask") and text in (r.post_data or "")):
        suggestion.click()
    expect(page.locator("#a-question")).to_have_value(text)
    expect(page.get_by_test_id("answer").or_(page.get_by_test_id("abstention"))).to_be_visible(timeout=TIMEOUT_MS)

def test_cluster_page_refreshes(page: Page, dev, shots):
    open_page(page, dev, "cluster", collection=None)
    expect(page.get_by_test_id("cluster-summary")).to_contain_text("Raft leader: 1", timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("nodes").locator("tbody tr")).to_have_count(2)
    expect(page.get_by_test_id("nodes").locator(".badge.ok", has_text="alive")).to_have_count(2)
    expect(page.locator("td", has_text=COLLECTION).first).to_be_visible()
    # It refreshes by itself: the stamp changes without any action.
    stamp = page.locator("main p.muted").first
    before = stamp.inner_text()
    expect(stamp).not_to_have_text(before, timeout=10_000)
    shot(page, shots, "cluster")


def check_report(page: Page) -> None:
    data = json.loads(EVAL_REPORT.read_text())
    answered = round(data["answers"]["coverage"] * data["answers"]["answerable"])
    grid = page.get_by_test_id("two-by-two")
    expect(grid.locator("tbody tr").first.locator("td").first).to_have_text(str(answered), timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("lanes").locator("tbody tr")).to_have_count(len(data["retrieval"]))
    expect(page.locator("svg.chart circle")).to_have_count(len(data["risk_coverage"]))


def test_quality_shows_the_report_the_router_keeps(page: Page, dev, shots):
    open_page(page, dev, "quality")
    expect(page.get_by_test_id("quality-source")).to_have_attribute("data-source", "router", timeout=TIMEOUT_MS)
    check_report(page)
    assert dev.api("GET", f"/v1/collections/{COLLECTION}/eval")["meta"]["data"] == "data/squad-sample"
    shot(page, shots, "quality")


def test_phone_width(browser, dev, shots):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = context.new_page()
    try:
        open_page(page, dev, "search")
        page.fill("#s-query", "Super Bowl")
        page.keyboard.press("Enter")
        expect(page.get_by_test_id("hits").locator("li.hit").first).to_be_visible(timeout=TIMEOUT_MS)
        shot(page, shots, "search-phone")
        for name in ["search", "collections", "ingest", "ask", "cluster", "quality"]:
            if name != "search":
                open_page(page, dev, name)
                expect(page.locator("main h1")).to_be_visible()
            overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert overflow <= 1, f"{name} scrolls sideways by {overflow} px at phone width"
    finally:
        context.close()


def test_keyboard_only(page: Page, dev):
    # Keyboard only: Tab through the navigation to "Ask", Enter opens it, the question field takes focus.
    page.goto(f"{dev.url}/#/collections")
    for _ in range(12):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.dataset.page") == "ask":
            break
    else:
        raise AssertionError("Tab never reached the Ask link")
    page.keyboard.press("Enter")
    expect(page.locator("#a-question")).to_be_focused()
    page.keyboard.type(UNANSWERABLE)
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("abstention-reason")).to_be_visible(timeout=TIMEOUT_MS)


def test_fallback_banner_when_the_embedder_is_down(page: Page, dev_no_embedder, shots):
    dev = dev_no_embedder
    dev.api("POST", "/v1/collections", {"name": COLLECTION})
    # Ingest needs embeddings; with the embedder down the documents bring their own vectors.
    vector = [0.0] * 384
    vector[0] = 1.0
    docs = [{"id": f"d{i}", "title": "Super Bowl 50", "text": text, "vector": vector} for i, text in enumerate([
        "The Denver Broncos defeated the Carolina Panthers 24-10 to win Super Bowl 50.",
        "Super Bowl 50 was played at Levi's Stadium in Santa Clara, California.",
    ])]
    assert dev.api("POST", f"/v1/collections/{COLLECTION}/documents", {"documents": docs})["accepted"] == 2
    open_page(page, dev, "search")
    page.fill("#s-query", "Who won Super Bowl 50?")
    page.click("#search-form button[type=submit]")
    banner = page.get_by_test_id("fallback-banner")
    expect(banner).to_be_visible(timeout=TIMEOUT_MS)
    expect(banner).to_contain_text("embedder is unavailable")
    expect(page.get_by_test_id("hits").locator("li.hit")).to_have_count(2)
    shot(page, shots, "search-fallback")


def test_key_prompt_when_auth_is_on(page: Page, dev_auth, shots):
    dev = dev_auth
    dev.api("POST", "/v1/collections", {"name": "secured"}, key=ADMIN_KEY)
    page.goto(dev.url)
    dialog = page.locator("#key-dialog")
    expect(dialog).to_be_visible(timeout=TIMEOUT_MS)
    page.fill("#key-input", "not-a-key")
    page.click("#key-save")
    # Refused: the page says so and asks again.
    expect(page.get_by_test_id("error")).to_contain_text("set an API key")
    expect(dialog).to_be_visible()
    page.fill("#key-input", ADMIN_KEY)
    page.click("#key-save")
    expect(page.locator("tr[data-collection=secured]")).to_be_visible(timeout=TIMEOUT_MS)
    # Kept for the tab only: sessionStorage, never localStorage.
    assert page.evaluate("sessionStorage.getItem('attest.api-key')") == ADMIN_KEY
    assert ADMIN_KEY not in json.dumps(page.evaluate("Object.assign({}, localStorage)"))


def test_quality_loads_a_report_file_without_one_on_the_router(page: Page, dev_no_embedder):
    # Runs after test_fallback_banner_when_the_embedder_is_down, which made the collection on this cluster.
    open_page(page, dev_no_embedder, "quality")
    expect(page.locator("#quality")).to_contain_text("No report stored", timeout=TIMEOUT_MS)
    page.set_input_files("#quality-file", str(EVAL_REPORT))
    check_report(page)
    # Kept for the collection in this browser: a reload shows it again.
    page.reload()
    expect(page.get_by_test_id("quality-source")).to_have_attribute("data-source", "browser", timeout=TIMEOUT_MS)
    check_report(page)


def test_ask_follow_up_carries_the_conversation(page: Page, dev, shots):
    open_page(page, dev, "ask")
    page.fill("#a-question", ANSWERABLE)
    page.click("#ask-form button[type=submit]")
    expect(page.get_by_test_id("answer")).to_be_visible(timeout=TIMEOUT_MS)
    # Verdicts: every kept claim's badge, and the one-line summary.
    expect(page.get_by_test_id("verification-summary")).to_contain_text(
        re.compile(r"^\d+ claims? verified, \d+ partial, \d+ unsupported$"))
    # The first turn joins the transcript and "Follow up" is ticked for the next question.
    expect(page.get_by_test_id("transcript").locator("li")).to_have_count(1)
    expect(page.locator("#a-follow-up")).to_be_checked()
    page.fill("#a-question", "Which teams played in it?")
    with page.expect_request(lambda r: r.url.endswith("/ask")) as sent:
        page.click("#ask-form button[type=submit]")
    body = json.loads(sent.value.post_data)
    assert [t["role"] for t in body["history"]] == ["user", "assistant"], body
    assert body["history"][0]["content"] == ANSWERABLE, body
    expect(page.get_by_test_id("rewritten")).to_have_text("Asked as: Which teams played in Super Bowl 50?",
                                                         timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("transcript").locator("li")).to_have_count(2)
    shot(page, shots, "ask-follow-up")
    # A new conversation: nothing is carried, and the bare follow-up cannot be resolved.
    page.click("#a-new")
    expect(page.get_by_test_id("transcript").locator("li")).to_have_count(0)
    page.fill("#a-question", "When was he born?")
    with page.expect_request(lambda r: r.url.endswith("/ask")) as sent:
        page.click("#ask-form button[type=submit]")
    assert json.loads(sent.value.post_data)["history"] == []
    expect(page.get_by_test_id("abstention-reason")).to_have_attribute("data-reason", "unresolved_reference",
                                                                       timeout=TIMEOUT_MS)
