"""What a new librarian met on the screens (issue 30), clicked through in a real chromium.

Run with `pytest -m browser`; skipped with the reason when /usr/bin/chromium is missing.
"""

import pytest

from collections_app.models import Collection
from collections_app.services.agents import create_agent
from ragsite.fusion import FUSION_WEIGHT
from tests.conftest import HANDBOOK

from .browser import log_in
from .conftest import make_built

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def offered_folders(page) -> list[str]:
    """The folder choices a person can pick now (hidden groups are not offered)."""
    return page.eval_on_selector_all(
        "#id_folder optgroup:not([disabled]) option", "options => options.map(o => o.value)"
    )


def test_add_collection_offers_only_the_picked_agents_folders_before_save(
    page, admin_user, agent, knowledge_root
):
    helpdesk, _ = create_agent(agent_id="helpdesk")
    create_agent(agent_id="empty")
    knowledge_root("alpha", "licenses", {"a.md": "# A\n\nText.\n"})
    knowledge_root("alpha", "handbook", {"a.md": "# A\n\nText.\n"})
    knowledge_root("helpdesk", "hr-share", {"b.md": "# B\n\nText.\n"})
    log_in(page)
    page.goto("/admin/collections_app/collection/add/")
    assert sorted(offered_folders(page)) == ["handbook", "hr-share", "licenses"]  # no agent yet: all, grouped
    page.select_option("#id_agent", label="helpdesk")
    assert offered_folders(page) == ["hr-share"]
    page.select_option("#id_folder", "hr-share")
    page.select_option("#id_agent", label="alpha")
    assert sorted(offered_folders(page)) == ["handbook", "licenses"]
    assert page.input_value("#id_folder") == ""  # helpdesk's folder is not kept for alpha
    page.select_option("#id_agent", label="empty")
    assert offered_folders(page) == [] and page.is_visible("#folder-none")
    page.select_option("#id_agent", label="helpdesk")
    assert not page.is_visible("#folder-none")
    page.fill("#id_name", "hr")
    page.select_option("#id_folder", "hr-share")
    page.click("input[name=_save]")
    page.wait_for_selector("ul.messagelist")
    assert Collection.objects.get(name="hr").agent == helpdesk


def test_the_landing_page_leads_to_the_admin_and_the_api_docs(page, admin_user):
    response = page.goto("/")
    assert response.status == 200  # a new user opening the printed address got a 404
    page.click("#home-admin")
    page.wait_for_selector("#login-form")
    page.goto("/")
    page.click("#home-api-docs")
    page.wait_for_selector(".swagger-ui .info")


def test_the_api_docs_try_it_out_searches_with_a_pasted_key(page, agent_key, knowledge_folder):
    agent, raw = agent_key
    make_built(agent, knowledge_folder, "handbook", HANDBOOK)
    page.goto("/api/v1/docs")
    page.click(".swagger-ui .btn.authorize")
    page.fill(".swagger-ui .modal-ux input", raw)
    page.click(".swagger-ui .modal-ux .auth-btn-wrapper .authorize")
    page.click(".swagger-ui .modal-ux .btn-done")
    operation = page.locator(".opblock", has=page.locator("[data-path='/api/v1/collections/{name}/search']"))
    operation.locator(".opblock-summary").first.click()
    operation.locator(".try-out__btn").click()
    operation.locator("input[placeholder=name]").fill("handbook")
    operation.locator(".execute").click()
    status = operation.locator(".live-responses-table tbody .response-col_status").first
    status.wait_for()
    body = operation.locator(".live-responses-table tbody .response-col_description pre").first.inner_text()
    assert status.inner_text().strip() == "200", body  # the generated example answered 403
    assert "capped at five days" in body


def test_measure_says_how_long_it_will_take_before_it_starts(page, admin_user, agent, knowledge_folder):
    notes = {
        f"note-{n}.md": f"# Note {n}\n\nThe archive keeps box {n}.\n\nThe canteen serves soup {n}.\n"
        for n in range(8)
    }
    archive = make_built(agent, knowledge_folder, "archive", notes, size=40)
    fresh = make_built(agent, knowledge_folder, "fresh", {"a.md": "# A\n\nOne paragraph only.\n"})
    log_in(page)
    page.goto(f"/admin/collections_app/collection/{archive.pk}/change/")
    page.click("text=Measure")
    page.wait_for_selector("#measure-form")
    page.select_option("#id_collection", str(archive.pk))
    page.wait_for_selector("#measure-estimate:not([hidden])")
    assert "expect roughly" in page.inner_text("#measure-estimate")
    page.select_option("#id_collection", str(fresh.pk))
    page.wait_for_function("document.getElementById('measure-estimate').textContent.includes('No build')")


# Each JSON answer the page's own code has finished with: the URL is noted in a task queued once the
# body is read, which runs after every promise callback the page chained to that body.
ANSWERS_SEEN = """
window.answersSeen = [];
const pageFetch = window.fetch;
window.fetch = (url, options) => pageFetch(url, options).then((response) => {
  const read = response.json.bind(response);
  response.json = () => read().then((body) => {
    setTimeout(() => window.answersSeen.push(String(url)), 0);
    return body;
  });
  return response;
});
"""


def test_a_late_estimate_for_an_earlier_pick_does_not_replace_the_latest(
    page, admin_user, agent, knowledge_folder
):
    notes = {f"note-{n}.md": f"# Note {n}\n\nThe archive keeps box {n}.\n" for n in range(12)}
    archive = make_built(agent, knowledge_folder, "archive", notes, size=40)
    fresh = make_built(agent, knowledge_folder, "fresh", {"a.md": "# A\n\nOne paragraph only.\n"})
    held = []

    def hold_the_archive(route):
        if route.request.url.endswith(f"collection={archive.pk}") and not held:
            held.append(route)  # answered only after the later pick's answer is shown
        else:
            route.continue_()

    log_in(page)
    page.add_init_script(ANSWERS_SEEN)
    page.goto("/admin/collections_app/collection/measure/")
    page.route("**/estimate**", hold_the_archive)
    page.select_option("#id_collection", str(archive.pk))
    page.select_option("#id_collection", str(fresh.pk))
    page.wait_for_function("document.getElementById('measure-estimate').textContent.includes('No build')")
    assert held, "the archive's estimate was never asked for"
    held[0].continue_()
    # Not "networkidle": once fired for the page it is not waited for again, so the text could be read
    # before the late answer arrived and the test would pass without the fix.
    page.wait_for_function(f"window.answersSeen.some(url => url.endsWith('collection={archive.pk}'))")
    assert "No build" in page.inner_text("#measure-estimate")
    assert "expect roughly" not in page.inner_text("#measure-estimate")


def test_an_empty_spend_page_says_why(page, admin_user, agent, settings):
    settings.EMBED_BACKEND, settings.JUDGE_URL, settings.RERANK_URL = "hash", "", ""
    log_in(page)
    page.click("#content-main a:text-is('Agents')")
    page.click(f"#result_list a:text-is('{agent.agent_id}')")
    said = page.inner_text("#spend-empty")
    assert "No model calls in the last 30 days" in said
    assert "this server uses none" in said and "searches and builds cost nothing" in said
    settings.JUDGE_URL = "http://127.0.0.1:9/judge"
    page.reload()
    assert "calls a remote judge; none of their calls was charged to this agent" in page.inner_text(
        "#spend-empty"
    )


# --- The playground counts what it shows ------------------------------------------------------------------

STEPS = [
    "install the package",
    "make a key pair",
    "sign the certificate",
    "start the listener",
    "connect the client",
    "check the encrypted traffic",
]
TUNNEL = "\n\n".join(
    [
        f"## Step: {what}\n\nTo set up an SSL tunnel with socat between two hosts, {what} first; the socat "
        f"tunnel then carries the traffic of {what.split()[-1]} encrypted."
        for what in STEPS
    ]
    + [
        "## Files\n\nThe certificate lives at cafile="
        + "/very/long/path/segment" * 14
        + "/client.crt in this setup."
    ]
    + [
        f"## Notes on {topic}\n\n"
        + " ".join(
            f"A remark about {topic}, {word} and the weather."
            for word in ("soup", "bread", "tea", "rain", "wind", "snow", "fog") * 4
        )
        for topic in ("the canteen", "the garden", "the library")
    ]
)


def test_the_playground_counts_hits_and_passages_and_its_scores_add_up(
    page, admin_user, agent, knowledge_folder
):
    tunnels = make_built(
        agent, knowledge_folder, "tunnels", {"socat.md": TUNNEL}, method="structure", size=None
    )
    log_in(page)
    page.goto(f"/admin/collections_app/collection/playground/?collection={tunnels.pk}")
    page.fill("#id_question", "how do I set up an SSL tunnel with socat")
    page.fill("#id_most", "5")
    page.fill("#id_around", "1")
    page.fill("#id_min_score", "0")
    page.click("#playground-submit")
    answer = page.locator("#playground-result")
    answer.wait_for()
    cards = answer.locator(".rs-result")
    # Five hits side by side are stitched into one passage: the page says so instead of "Results: 5".
    assert (
        answer.locator("[data-role=count]").inner_text() == f"5 hits in {cards.count()} paragraph"
        and cards.count() == 1
    )
    formula = answer.locator("[data-role=formula]").inner_text()
    assert (
        formula.startswith(f"{FUSION_WEIGHT} × semantic")
        and f"{round(1 - FUSION_WEIGHT, 6)} × lexical" in formula
        and "0.3 more" in formula
    )
    for n in range(cards.count()):
        card = cards.nth(n)
        score = float(card.locator("[data-role=score]").inner_text())
        parts = card.locator("[data-role=parts]").inner_text().split()
        # "= 0.48 × semantic S + 0.52 × lexical L": the parts shown are the ones that made the score.
        w_semantic, semantic, w_lexical, lexical = (float(parts[i]) for i in (1, 4, 6, 9))
        assert abs(w_semantic * semantic + w_lexical * lexical - score) <= 0.002, parts


def test_long_passages_fold_around_their_hit_and_the_side_by_side_view_wraps(
    page, admin_user, agent, knowledge_folder
):
    tunnels = make_built(
        agent, knowledge_folder, "tunnels", {"socat.md": TUNNEL}, method="structure", size=None
    )
    log_in(page)
    page.goto(f"/admin/collections_app/collection/playground/?collection={tunnels.pk}")
    page.fill("#id_question", "where does the client certificate cafile live")
    page.fill("#id_most", "3")
    page.fill("#id_around", "3")
    page.fill("#id_min_score", "0")
    page.fill("#id_compare_min_score", "0.1")
    page.click("#playground-submit")
    left = page.locator("#playground-result")
    left.wait_for()
    passage = left.locator("[data-role=passage]").first
    folded = passage.evaluate("p => ({shown: p.clientHeight, whole: p.scrollHeight})")
    assert folded["shown"] <= 300 < folded["whole"]
    # The best hit is in the folded window, not scrolled out of it.
    inside = passage.evaluate("""p => { const h = p.querySelector('[data-role=hit]').getBoundingClientRect();
        const b = p.getBoundingClientRect(); return h.top >= b.top - 1 && h.top < b.bottom; }""")
    assert inside
    more = left.locator("[data-role=more]").first
    more.click()
    assert passage.evaluate("p => p.clientHeight >= p.scrollHeight - 1") and more.inner_text() == "show less"
    # Side by side, the long path wraps inside its column rather than being cut at the edge.
    for answer in ("#playground-result", "#playground-result-2"):
        widths = page.locator(f"{answer} .rs-text").evaluate_all(
            "els => els.map(e => [e.scrollWidth, e.clientWidth])"
        )
        assert widths and all(scroll <= client + 1 for scroll, client in widths), widths


# --- A review queue that names what it holds --------------------------------------------------------------

MAN_PAGE = "# socat\n\n" + "\n\n".join(
    f"Option {n}: sets the timeout of the {word} connection to {n * 5} seconds before socat gives up."
    for n, word in enumerate(["first", "first", "first", "first"], start=1)
)
POLICIES = {
    "policy-2023.md": "# Leave\n\n"
    + "\n\n".join(
        f"Carry-over of annual leave for {who} is capped at 5 days in every calendar year."
        for who in ("staff", "managers", "interns")
    ),
    "policy-2024.md": "# Leave\n\n"
    + "\n\n".join(
        f"Carry-over of annual leave for {who} is capped at 10 days in every calendar year."
        for who in ("staff", "managers", "interns")
    ),
}


def test_the_review_queue_names_the_paragraphs_and_approval_sticks(page, admin_user, agent, knowledge_folder):
    from collections_app.models import BuildRun, Document, Paragraph

    collection = make_built(
        agent,
        knowledge_folder,
        "leave",
        {**POLICIES, "socat.md": MAN_PAGE},
        method="structure",
        size=None,
        outcome=BuildRun.SUCCEEDED_WITH_REVIEW,
    )
    # Repeats inside one man page are not a conflict: the page is searchable.
    assert collection.documents.get(name="socat.md").status == Document.ACTIVE
    older = collection.documents.get(name="policy-2023.md")
    log_in(page)
    page.goto(f"/admin/collections_app/collection/{collection.pk}/change/")
    warning = page.inner_text("#held-back")
    stored = Paragraph.objects.filter(collection=collection).count()
    held = Paragraph.objects.filter(collection=collection, in_review=True).count()
    assert f"{held} of its {stored} paragraphs are held back, in 2 documents waiting for review" in warning
    page.click("#held-back a")
    page.wait_for_selector("#result_list tbody .field-name_shown")  # the list's page, not the one left
    assert page.locator("#result_list tbody .field-name_shown").all_inner_texts() == [
        "policy-2023.md",
        "policy-2024.md",
    ]
    page.click("#result_list >> text=policy-2023.md")
    side = page.locator('table.rs-side-by-side[data-other="policy-2024.md"]')
    assert "5 days" in side.inner_text() and "10 days" in side.inner_text()
    # Each side names its paragraph and links to it.
    mine = side.locator("[data-role=mine]").first
    assert mine.inner_text().startswith("policy-2023.md#")
    theirs = side.locator("[data-role=theirs]").first.inner_text()
    mine.click()
    page.wait_for_url("**/paragraph/*/change/")
    page.go_back()
    page.click("#approve-button")
    page.wait_for_selector("ul.messagelist")
    assert theirs.startswith("policy-2024.md#")
    # A rebuild of the unchanged files keeps the approval and no longer warns about it.
    page.goto(f"/admin/collections_app/collection/{collection.pk}/change/")
    page.click("#rebuild-button")
    page.wait_for_selector("ul.messagelist")
    run = collection.runs.first()
    # The other side still waits: the build says so in its status.
    assert run.status == BuildRun.SUCCEEDED_WITH_REVIEW and run.pk != collection.runs.last().pk
    older.refresh_from_db()
    assert older.status == Document.ACTIVE
    assert not [w for w in run.warnings if w.startswith("policy-2023.md")]
    assert [w for w in run.warnings if w.startswith("policy-2024.md: 1 paragraph waits in review")]
    page.goto(f"/admin/collections_app/document/?collection__id__exact={collection.pk}")
    row = page.locator("#result_list tbody tr").filter(
        has=page.locator(".field-name_shown", has_text="policy-2023.md")
    )
    assert "approved by admin" in row.inner_text()


def test_the_rebuild_bar_names_the_phase_and_moves_while_embedding(page, admin_user, handbook):
    from django.utils import timezone

    from collections_app.models import BuildRun

    run = BuildRun.objects.create(
        collection=handbook,
        status=BuildRun.RUNNING,
        started_at=timezone.now(),
        heartbeat_at=timezone.now(),
        documents_total=11,
        documents_done=4,
    )
    log_in(page)
    page.goto(f"/admin/collections_app/collection/{handbook.pk}/change/")
    assert page.inner_text("#build-progress [data-role=phase]") == "reading documents"
    seen = []
    for done in (0, 62, 124):  # the build saves after every batch the model returns
        BuildRun.objects.filter(pk=run.pk).update(
            documents_done=11, paragraphs_total=186, paragraphs_done=done, heartbeat_at=timezone.now()
        )
        page.wait_for_function(
            "document.querySelector('#build-progress [data-role=detail]')"
            f".textContent.includes('{done} of 186')"
        )
        seen.append(
            (
                page.inner_text("#build-progress [data-role=phase]"),
                page.inner_text("#build-progress [data-role=percent]"),
            )
        )
    assert seen == [
        ("embedding paragraphs", "50 %"),
        ("embedding paragraphs", "66 %"),
        ("embedding paragraphs", "83 %"),
    ]
    BuildRun.objects.filter(pk=run.pk).update(paragraphs_done=186)
    page.wait_for_function(
        "document.querySelector('#build-progress [data-role=phase]').textContent === 'saving'"
    )
    assert page.inner_text("#build-progress [data-role=percent]") == "99 %"


def test_known_answers_stop_finding_a_document_the_librarian_disables(
    page, admin_user, agent, knowledge_folder, django_capture_on_commit_callbacks
):
    from collections_app.services import known_answers

    collection = make_built(agent, knowledge_folder, "handbook", HANDBOOK)
    question = "what is mileage reimbursed at per kilometre"
    with django_capture_on_commit_callbacks(execute=True):
        known_answers.set_known_answers(
            collection=collection,
            items=[
                {"question": question, "answer": "0.42 per kilometre"},
                {"question": "how much annual leave carries over", "answer": "capped at five days"},
            ],
        )
    log_in(page)
    page.goto(f"/admin/collections_app/collection/{collection.pk}/known-answers/")
    row = page.locator("#known-answers-results tbody tr", has_text=question)
    assert "found" in row.inner_text() and "not found" not in row.inner_text()
    assert "exactly as a search would" in page.inner_text("#known-answers-view")
    travel = collection.documents.get(name="travel.md")
    page.goto(f"/admin/collections_app/document/?collection__id__exact={collection.pk}")
    page.check(f'input[name="_selected_action"][value="{travel.pk}"]')
    page.select_option("select[name=action]", "disable_action")
    page.click("button[name=index]")  # the task queue runs at once in tests: measured again on commit
    page.wait_for_selector("ul.messagelist")
    page.goto(f"/admin/collections_app/collection/{collection.pk}/known-answers/")
    assert "not found" in page.locator("#known-answers-results tbody tr", has_text=question).inner_text()
