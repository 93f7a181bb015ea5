"""The review's page over HTTP (Starlette's test client): the token, Host and Origin checks, the
security headers, hostile records shown inert, labels saved, and the agreement computed as
scikit-learn computes it. The real browser is in tests/system/review/."""

import hashlib
import json

import pytest

pytest.importorskip("sklearn")

from starlette.testclient import TestClient

from localjury.review.app import COOKIE, create_app
from localjury.review.queue import Review
from tests.fakes import scripted_results

PORT = 8123
TOKEN = "t0ken-for-the-tests"
OWN = f"http://127.0.0.1:{PORT}"
HOSTILE = {
    "id": "hostile",
    "user_input": "<script>window.pwned = 1</script><img src=x onerror=alert(1)>",
    "response": '<a href="javascript:alert(1)">click</a> \u202eevil\u202c 1999 ' + "x" * 10_000_000,
    "retrieved_contexts": ["</div><script>alert(2)</script>"],
}
RECORDS = [
    {"id": f"r{i}", "user_input": f"Question {i}?", "response": f"Answer {i}" + (" in 1990." if i % 3 else ".")}
    for i in range(8)
] + [HOSTILE]


@pytest.fixture
def review(tmp_path):
    return Review(scripted_results(tmp_path, RECORDS))


@pytest.fixture
def client(review):
    with TestClient(create_app(review, TOKEN, PORT), base_url=OWN, follow_redirects=False) as client:
        yield client


def signed_in(client):
    moved = client.get(f"/?token={TOKEN}")
    assert moved.status_code == 303 and moved.headers["location"] == "/"
    assert (
        "httponly" in moved.headers["set-cookie"].lower() and "samesite=strict" in moved.headers["set-cookie"].lower()
    )
    return client


def test_every_request_needs_the_token(client):
    assert client.get("/").status_code == 403
    assert client.get("/?token=wrong").status_code == 403
    client.cookies.set(COOKIE, "wrong")
    assert client.get("/item/0").status_code == 403
    client.cookies.clear()
    assert client.get("/static/review.js").status_code == 403
    assert signed_in(client).get("/").status_code == 200


def test_another_host_or_origin_is_refused(client):
    signed_in(client)
    assert client.get("/", headers={"Host": "evil.example:8123"}).status_code == 421  # DNS rebinding
    assert client.get("/", headers={"Host": "127.0.0.1:9999"}).status_code == 421
    assert client.get("/", headers={"Origin": "http://evil.example"}).status_code == 403
    label = {"n": 0, "gold": 1}
    assert client.post("/api/label", json=label).status_code == 403  # a change names its origin
    assert client.post("/api/label", json=label, headers={"Origin": "http://evil.example"}).status_code == 403
    assert client.post("/api/label", json=label, headers={"Origin": OWN}).status_code == 200


def test_every_answer_forbids_what_comes_from_elsewhere(client):
    for answer in (client.get("/"), signed_in(client).get("/"), client.get("/item/0"), client.get("/item/999")):
        csp = answer.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert answer.headers["x-content-type-options"] == "nosniff"
    assert client.get("/item/999").status_code == 400


def test_a_hostile_record_is_shown_inert(client, review):
    signed_in(client)
    n = review.index.record_ids.index("hostile")
    page = client.get(f"/item/{n}").text
    assert "<script>window" not in page and "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert 'href="javascript:' not in page and "&lt;a href=&#34;javascript:alert(1)&#34;&gt;" in page
    assert "\u202e" not in page and '<span class="ctl">U+202E</span>evil' in page  # the override shown, not obeyed
    assert len(page) < 100_000 and "9,980,0" in page  # 10 MB of text: its start shown, the rest counted
    # The page's own scripts only, from this server.
    assert page.count("<script") == 1 and '<script src="/static/review.js" defer></script>' in page


def test_labels_are_saved_and_the_results_never_written(client, review, tmp_path):
    results = review.path
    before = hashlib.sha256(results.read_bytes()).hexdigest()
    signed_in(client)
    for n, gold in [(0, 1), (1, 0), (2, 1), (1, 1)]:
        saved = client.post("/api/label", json={"n": n, "gold": gold, "note": f"n{n}"}, headers={"Origin": OWN})
        assert saved.status_code == 200 and saved.json()["label"]["gold"] == gold
    kept = [json.loads(line) for line in review.labels.path.read_text().splitlines()]
    assert [(r["id"], r["gold"]) for r in kept] == [("r0", 1), ("r2", 1), ("r1", 1)]
    assert kept[0]["user_input"] == "Question 0?" and kept[0]["criterion"] == review.criteria["dated"]
    assert hashlib.sha256(results.read_bytes()).hexdigest() == before
    bad = client.post("/api/label", json={"n": 0, "gold": 7}, headers={"Origin": OWN})
    assert bad.status_code == 400 and "must be 0 or 1" in bad.json()["error"]
    queue = client.get("/?filter=labeled").text
    assert queue.count('<tr data-n="') == 3


def test_the_agreement_is_sklearns_on_the_same_labels(client, review):
    from sklearn.metrics import cohen_kappa_score

    signed_in(client)
    gold = {0: 1, 1: 0, 2: 1, 3: 1, 4: 0, 5: 1, 6: 1}
    for n, g in gold.items():
        client.post("/api/label", json={"n": n, "gold": g}, headers={"Origin": OWN})
    (figures,) = client.get("/api/agreement").json()
    assert figures["labels"] == 7 and figures["head_needs"] == 33
    rows = [review.index.row(n) for n in gold]
    for name in ("A", "B"):
        preds = [next(m["verdict"] for m in r["models"] if m["model"] == name) for r in rows]
        assert figures["judges"][name]["kappa"] == pytest.approx(cohen_kappa_score(list(gold.values()), preds))
    jury = [int(r["score"] > 0.5) for r in rows]
    assert figures["judges"]["jury"]["kappa"] == pytest.approx(cohen_kappa_score(list(gold.values()), jury))
    assert "localjury align" in figures["align"] and "--metric dated" in figures["align"]
    page = client.get("/agreement").text
    assert f'data-kappa="{figures["judges"]["A"]["kappa"]}"' in page


def test_a_record_shows_its_turns_and_tool_calls_and_each_quote_marked_where_it_stands(tmp_path):
    conversation = {
        "id": "agent",
        "messages": [
            {"role": "user", "content": "When did the Wall fall?"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "function": {"name": "search", "arguments": '{"q": "Berlin Wall"}'}}]},
            {"role": "tool", "name": "search", "tool_call_id": "c1", "content": "It fell in 1989."},
            {"role": "assistant", "content": "The Wall fell in 1989."},
        ],
    }  # fmt: skip
    results = scripted_results(tmp_path, [conversation])
    row = json.loads(results.read_text())
    a = row["models"][0]
    a["evidence"] = [[{"text": "1989", "field": "response", "start": 17, "end": 21}], [], None]
    a["thinking"] = ["I look for a year first.", None, None]
    a["head"] = {"layer": 7, "probability": 0.91, "head_sha256": "0" * 64, "votes": [0, 0, 1]}
    results.write_text(json.dumps(row) + "\n")
    review = Review(results)
    assert review.index.flags[0] & 8  # the head decided against the samples drawn beside it
    with TestClient(create_app(review, TOKEN, PORT), base_url=OWN, follow_redirects=False) as client:
        page = signed_in(client).get("/item/0?filter=head").text
    assert 'data-field="response"' not in page  # a conversation's answer is its last turn
    assert (
        page.count('<li class="turn') == 4 and "calls <code>search({&#34;q&#34;: &#34;Berlin Wall&#34;})</code>" in page
    )
    assert "The Wall fell in <mark>1989</mark>." in page and "It fell in 1989." in page  # the quote's own field only
    assert '<details class="thinking"><summary>thinking</summary><div class="text">I look for a year first.' in page
    assert "decided by its decision head (block 7): p 0.91; its samples voted [0, 0, 1]" in page
    a["head"] = {"layer": 7, "score": 3.417, "head_sha256": "0" * 64}  # a graded head's score, no probability
    results.write_text(json.dumps(row) + "\n")
    with TestClient(create_app(Review(results), TOKEN, PORT), base_url=OWN, follow_redirects=False) as client:
        assert "decided by its decision head (block 7): score 3.42</p>" in signed_in(client).get("/item/0").text
