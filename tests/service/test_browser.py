"""The admin page and the chat widget in a real headless Chromium, against the running service,
the real Solr and the recording LLM. Screenshots go to test-artifacts/screenshots/.

Needs Debian's `chromium` (`make browser` installs it). Without it these tests are skipped,
unless SOLR_RAG_REQUIRE_BROWSER=1 (CI sets it), where a missing browser fails the run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from service.api.app import create_app
from service.config.properties import parse_properties
from testing.corpus import remove_documents
from testing.llm_server import LLMScript, Step
from testing.servers import serve_in_thread
from testing.service import ADMIN_TOKEN, ROOT, write_properties

playwright_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"

if not Path(CHROMIUM).exists():
    if os.environ.get("SOLR_RAG_REQUIRE_BROWSER") == "1":
        raise RuntimeError(f"no Chromium at {CHROMIUM}: run `make browser`")
    pytest.skip("no Chromium: run `make browser` to install it", allow_module_level=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",  # root in CI
                "--disable-dev-shm-usage",
                "--disable-gpu",
                # a page fulfilled by the test has no address; let it reach the service on
                # 127.0.0.1, as a search page on a public host reaches a public service
                "--disable-features=LocalNetworkAccessChecks,BlockInsecurePrivateNetworkRequests",
            ],
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    # shown when a test fails: what the browser itself complained about
    opened.on("console", lambda message: print(f"console {message.type}: {message.text}"))
    opened.on("requestfailed", lambda request: print(f"failed: {request.url} {request.failure}"))
    yield opened
    context.close()
    assert errors == [], f"JavaScript errors: {errors}"


Serve = Callable[..., tuple[str, Path]]


@pytest.fixture
def serve(
    tmp_path: Path, base_properties: dict[str, object], corpus: object, llm: LLMScript
) -> Iterator[Serve]:
    """serve({"chat.memory.enabled": True}) -> (base URL, rag.properties) of a live service."""
    stack: list[object] = []

    def start(overrides: dict[str, object] | None = None) -> tuple[str, Path]:
        path = write_properties(
            tmp_path / f"live-{len(stack)}.properties", {**base_properties, **(overrides or {})}
        )
        server = serve_in_thread(create_app(path), health_path="/health/live")
        stack.append(server)
        return server.__enter__(), path

    yield start
    for server in reversed(stack):
        server.__exit__(None, None, None)  # type: ignore[attr-defined]


def shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def ask(page, question: str) -> object:
    """Types the question and presses Enter; returns the answer's message once it is done."""
    answers = page.locator(".message.assistant")
    count = answers.count()
    box = page.get_by_label("Your question")
    box.fill(question)
    box.press("Enter")
    answer = answers.nth(count)
    answer.wait_for()
    page.wait_for_function(
        "() => !document.querySelector('.solr-rag-chat').hasAttribute('aria-busy')"
    )
    return answer


def sign_in(page, base: str) -> None:
    page.goto(f"{base}/admin")
    page.get_by_label("Admin token").fill(ADMIN_TOKEN)
    page.get_by_role("button", name="Sign in").click()
    page.locator("#config").wait_for()


# -- the admin page ------------------------------------------------------------------------------


def test_a_setting_changed_on_the_admin_page_drives_the_next_answer(
    serve: Serve, page, llm: LLMScript
) -> None:
    base, path = serve()
    sign_in(page, base)
    model = page.get_by_label("Model", exact=True)
    assert model.input_value() == "test-model"
    model.fill("model-chosen-by-admin")
    page.get_by_label("Max files (BM25 search)").fill("1")
    page.get_by_role("button", name="Save").click()
    page.get_by_text("Saved: llm.model, chunking.maxFiles.").wait_for()
    shot(page, "admin-saved")
    written = parse_properties(path.read_text(encoding="utf-8"))
    assert written["llm.model"] == "model-chosen-by-admin"

    page.goto(f"{base}/ui")
    answer = ask(page, "Who lit the lighthouse lamp?")
    assert "Test answer to" in answer.inner_text()
    assert llm.requests[-1].body["model"] == "model-chosen-by-admin"
    assert answer.locator(".sources li").count() == 1  # maxFiles = 1


def test_the_admin_page_validates_in_the_browser_and_on_the_server(
    serve: Serve, page, llm: LLMScript
) -> None:
    base, path = serve()
    before = path.read_bytes()
    sign_in(page, base)
    temperature = page.get_by_label("Temperature")
    temperature.fill("5")
    page.get_by_role("button", name="Save").click()
    assert temperature.get_attribute("aria-invalid") == "true"
    assert page.locator("#save-error").inner_text() == "Please correct the highlighted value."
    shot(page, "admin-browser-validation")
    assert path.read_bytes() == before

    temperature.fill("0.3")
    page.get_by_label("LLM API endpoint").fill("ftp://llm.example.org/v1/")
    page.get_by_role("button", name="Save").click()
    error = page.locator("#save-error")
    error.wait_for()
    assert "ai.api.endpoint" in error.inner_text()
    assert "must start with http" in error.inner_text()
    assert page.get_by_label("LLM API endpoint").get_attribute("aria-invalid") == "true"
    shot(page, "admin-server-validation")
    assert path.read_bytes() == before


def test_the_token_field_is_write_only_and_test_connection_reports(serve: Serve, page) -> None:
    base, _ = serve({"ai.api.token": "sk-hidden-777"})
    sign_in(page, base)
    token = page.get_by_label("API token")
    assert token.input_value() == ""
    assert "sk-hidden-777" not in page.content()
    page.get_by_role("button", name="Test connection").click()
    rows = page.locator("#connection tbody tr")
    page.locator("#connection tbody tr.status-up").first.wait_for()
    assert rows.count() == 4
    assert page.locator("#connection tbody tr.status-up").count() == 4
    shot(page, "admin-test-connection")


def test_a_wrong_admin_token_is_refused(serve: Serve, page) -> None:
    base, _ = serve()
    page.goto(f"{base}/admin")
    page.get_by_label("Admin token").fill("not-the-token")
    page.get_by_role("button", name="Sign in").click()
    error = page.locator("#signin-error")
    error.wait_for()
    assert "missing or wrong admin bearer token" in error.inner_text()
    assert page.locator("#config").is_hidden()


def test_the_admin_page_shows_jobs_with_their_progress_and_cancels_one(
    serve: Serve, page, solr_url: str
) -> None:
    base, _ = serve({"jobs.enabled": True, "jobs.batch.size": 20})
    documents = [
        {"id": f"job-ui-{n}", "title": f"Note {n}", "content": f"Note {n} about the tides."}
        for n in range(600)
    ]
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    try:
        job = httpx.post(f"{base}/jobs", json={"documents": documents}, headers=auth).json()
        sign_in(page, base)
        row = page.locator(f'#jobs-table tr[data-job="{job["id"]}"]')
        row.wait_for()
        bar = row.locator("progress")
        assert bar.get_attribute("max") == "600"
        page.wait_for_function(
            f"""() => {{
              const bar = document.querySelector('tr[data-job="{job["id"]}"] progress');
              return bar && Number(bar.value) > 0;
            }}"""
        )
        shot(page, "admin-jobs")
        row.get_by_role("button", name="Cancel").click()
        page.locator(f'tr[data-job="{job["id"]}"].job-cancelled').wait_for(timeout=60_000)
    finally:
        remove_documents(solr_url, [d["id"] for d in documents])


# -- the chat widget -------------------------------------------------------------------------


def test_two_questions_the_second_with_the_history_and_a_source_link(
    serve: Serve, page, llm: LLMScript
) -> None:
    base, _ = serve({"chat.memory.enabled": True})
    page.goto(f"{base}/ui")
    first = ask(page, "Who lit the lighthouse lamp?")
    link = first.locator(".sources a", has_text="The lighthouse keeper")
    assert link.get_attribute("href") == "https://example.org/lighthouse"
    assert link.get_attribute("rel") == "noopener noreferrer"
    first_answer = first.locator(".body").inner_text()
    second = ask(page, "When was it electrified?")
    assert "When was it electrified?" in second.inner_text()
    shot(page, "widget-conversation")
    sent = llm.requests[-1].messages
    contents = [message["content"] for message in sent]
    assert "Who lit the lighthouse lamp?" in contents
    assert any(first_answer.strip() in content for content in contents)
    # the citation [1] links to the first source
    citation = second.locator("a.citation").first
    target = citation.get_attribute("href")
    assert target and page.locator(target).count() == 1


def test_a_long_conversation_sends_only_the_recent_history(
    serve: Serve, page, llm: LLMScript
) -> None:
    """The service accepts 100 history messages: the 52nd question used to fail."""
    base, _ = serve({"chat.memory.enabled": True})
    page.goto(f"{base}/ui")
    for number in range(1, 56):
        answer = ask(page, f"Question {number} about the lighthouse?")
        assert "Test answer to" in answer.inner_text(), (number, answer.inner_text())
    sent = llm.requests[-1]
    assert sent.body["messages"][-1]["role"] == "user"
    assert len(page.locator(".message.assistant.error").all()) == 0


def test_new_conversation_forgets_the_history(serve: Serve, page, llm: LLMScript) -> None:
    base, _ = serve({"chat.memory.enabled": True})
    page.goto(f"{base}/ui")
    ask(page, "Who lit the lighthouse lamp?")
    page.get_by_role("button", name="New conversation").click()
    assert page.locator(".message").count() == 0
    assert page.evaluate("document.activeElement.tagName") == "TEXTAREA"
    ask(page, "When was it electrified?")
    contents = [message["content"] for message in llm.requests[-1].messages]
    assert "Who lit the lighthouse lamp?" not in contents


def test_an_llm_failure_shows_a_friendly_message(serve: Serve, page, llm: LLMScript) -> None:
    base, _ = serve()
    page.goto(f"{base}/ui")
    llm.then(Step(content="upstream exploded", status=500))
    answer = ask(page, "Who lit the lighthouse lamp?")
    alert = answer.get_by_role("alert")
    assert alert.inner_text().startswith("Sorry, I met a technical issue.")
    assert "upstream exploded" not in answer.inner_text()
    shot(page, "widget-llm-down")
    assert ask(page, "Who lit the lighthouse lamp?").locator(".sources a").count() == 1


def test_answers_and_documents_cannot_inject_html(serve: Serve, page, llm: LLMScript) -> None:
    base, _ = serve()
    page.goto(f"{base}/ui")
    llm.answer = lambda request: (
        '<img src=x onerror="window.pwned=1"> **Keeper** lit it [1].\n\n- dusk\n- fog'
    )
    answer = ask(page, "Who lit the lighthouse lamp?")
    assert answer.locator("img").count() == 0
    assert '<img src=x onerror="window.pwned=1">' in answer.inner_text()
    assert answer.locator("strong").inner_text() == "Keeper"
    assert answer.locator("ul li").count() == 2
    assert page.evaluate("window.pwned") is None
    shot(page, "widget-markdown-safe")


def test_sources_say_which_the_answer_cites_and_show_a_file_s_passage(
    serve: Serve, page, llm: LLMScript
) -> None:
    """Issue 36, item 9: every source looked alike, and a file:// source was a title only."""
    base, _ = serve({"retrieval.method": "bm25", "chunking.maxFiles": 2})
    note = {
        "id": "share-notes",
        "title": "Share notes",
        "url": "file:///srv/share/lamp-notes.txt",
        "content": "Notes on the lighthouse lamp from the file share: it was cleaned weekly.",
    }
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    httpx.post(f"{base}/documents", json={"documents": [note]}, headers=headers).raise_for_status()
    try:
        page.goto(f"{base}/ui")
        answer = ask(page, "lighthouse lamp notes file share cleaned")
        items = answer.locator(".sources li")
        assert items.count() == 2
        # the answer cites [1] only: the first source is marked, the second is not
        assert items.nth(0).get_attribute("class") == "cited"
        assert items.nth(0).locator(".badge").inner_text() == "cited"
        assert items.nth(1).get_attribute("class") == "uncited"
        shared = answer.locator(".sources li", has_text="Share notes")
        assert shared.locator("a").count() == 0  # no dead file:// link
        shared.locator("summary").click()
        assert "cleaned weekly" in shared.locator("blockquote").inner_text()
        assert shared.locator(".location").inner_text() == note["url"]
        shot(page, "widget-sources")
    finally:
        httpx.delete(f"{base}/documents/share-notes", headers=headers)


def test_a_source_without_a_web_address_links_nowhere(serve: Serve, page, llm: LLMScript) -> None:
    """Issue 45, item 8: a source with no URL (or a relative one) was linked to /ui itself."""
    base, _ = serve({"retrieval.method": "bm25", "chunking.maxFiles": 3})
    notes = [
        {"id": "no-url-notes", "title": "Bare notes",
         "content": "The foghorn bare notes say it sounds hourly."},
        {"id": "relative-url-notes", "title": "Relative notes", "url": "notes/foghorn.txt",
         "content": "The foghorn relative notes say it sounds hourly in fog."},
    ]  # fmt: skip
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    httpx.post(f"{base}/documents", json={"documents": notes}, headers=headers).raise_for_status()
    try:
        page.goto(f"{base}/ui")
        answer = ask(page, "foghorn notes sounds hourly")
        for title in ("Bare notes", "Relative notes"):
            item = answer.locator(".sources li", has_text=title)
            assert item.count() == 1 and item.locator("a").count() == 0, title
        hrefs = answer.locator(".sources a").evaluate_all("links => links.map(a => a.href)")
        assert not any("/ui" in href for href in hrefs), hrefs
    finally:
        for note in notes:
            httpx.delete(f"{base}/documents/{note['id']}", headers=headers)


def test_sentences_the_sources_do_not_support_are_marked(
    serve: Serve, page, llm: LLMScript
) -> None:
    base, _ = serve({"grounding.enabled": True})
    page.goto(f"{base}/ui")
    llm.answer = lambda request: (
        "\U0001f4a1 The lamp burned paraffin until 1952 [1]. The keeper was paid in gold coins [1]."
    )
    answer = ask(page, "Who lit the lighthouse lamp?")
    marked = answer.locator(".unsupported")
    assert marked.count() == 1
    assert marked.inner_text().startswith("The keeper was paid in gold coins [1].")
    assert marked.get_attribute("title") == "Not supported by the sources"
    assert marked.locator("a.citation").count() == 1  # its citation still links
    assert "paraffin" not in marked.inner_text()
    shot(page, "widget-grounding")


def test_the_widget_embeds_in_a_search_page_of_another_origin(
    serve: Serve, page, llm: LLMScript
) -> None:
    search_page = "http://localhost:8999/search"  # another origin, allowed by CORS
    base, _ = serve({"cors.allowed.origins": "http://localhost:8999"})
    page.route(
        search_page,
        lambda route: route.fulfill(
            content_type="text/html",
            body="<!doctype html><title>Search</title><h1>Our search</h1>"
            f'<script src="{base}/ui/widget.js" data-title="Ask our docs"></script>',
        ),
    )
    page.goto(search_page)
    page.get_by_role("button", name="Ask our docs").click()
    answer = ask(page, "Who lit the lighthouse lamp?")
    assert answer.locator(".sources a").count() == 1
    shot(page, "widget-embedded")


def test_the_widget_speaks_the_pages_language(serve: Serve, page, llm: LLMScript) -> None:
    """Issue 48: on a French page (<html lang="fr">) the widget's labels are French, and a
    French question is answered in French (the service tells it from the question)."""
    base, _ = serve()

    def french(route) -> None:
        response = route.fetch()
        body = response.text().replace('<html lang="en">', '<html lang="fr">')
        route.fulfill(response=response, body=body)

    page.route(f"{base}/ui", french)
    page.goto(f"{base}/ui")
    assert page.get_by_role("button", name="Envoyer").count() == 1
    assert page.get_by_role("button", name="Nouvelle conversation").count() == 1
    llm.then(Step(content="Chaud et sec [1]"))
    box = page.get_by_label("Votre question")
    box.fill("Quel temps fait-il l'été à Marseille ?")
    box.press("Enter")
    page.locator(".message.assistant").first.wait_for()
    page.wait_for_function(
        "() => !document.querySelector('.solr-rag-chat').hasAttribute('aria-busy')"
    )
    assert "Answer in French." in llm.requests[-1].messages[0]["content"]
    shot(page, "widget-french")
