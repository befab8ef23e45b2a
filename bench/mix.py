#!/usr/bin/env python3
"""Writes the realistic delivery mix bench/compare.sh drives through wrk
(bench/mix.lua): real fixture payloads from tests/fixtures/github-webhooks,
edited and signed with the bench's webhook secret.

    python3 bench/mix.py FIXTURES_DIR OUT_DIR SECRET

Per 1,000 requests (schedule.tsv, one line per request slot):
  950 that cannot matter to closer (no trigger, no command, no open run):
      300 issues.opened without labels, 300 plain issue comments,
      100 issues.edited, 100 pull_request.opened and 50 .synchronize on a
      contributor's branch, 60 pull_request_review.submitted and 40
      pull_request_review_comment.created on that pull request;
   50 that can: 25 issues.labeled `bug` (closer reads the repository's
      config and finds no trigger), 10 `/closer status` comments (answered),
      10 installation_repositories.added, 4 pull_request.closed on a
      closer/issue-N branch, and 1 issues.labeled `closer` on a new issue
      each time (triggers.tsv: a run starts).
installation.tsv is the installation.created delivery sent once before.
"""
import hashlib
import hmac
import json
import os
import sys

fixtures, out, secret = sys.argv[1], sys.argv[2], sys.argv[3].encode()
os.makedirs(out, exist_ok=True)
INSTALLATION = 4242
written = {}


def load(name):
    with open(os.path.join(fixtures, name)) as f:
        return json.load(f)


def body(key, name, edit):
    """Writes one payload; returns its schedule line (event, signature, path)."""
    if key in written:
        return written[key]
    payload = load(name)
    payload["installation"] = {"id": INSTALLATION, "node_id": "MDIz"}
    edit(payload)
    data = json.dumps(payload).encode()
    path = os.path.join(out, key + ".json")
    with open(path, "wb") as f:
        f.write(data)
    signature = "sha256=" + hmac.new(secret, data, hashlib.sha256).hexdigest()
    line = f"{name.split('.')[0]}\t{signature}\t{path}"
    written[key] = line
    return line


def issue(action, number, labels, label=None):
    def edit(p):
        p["action"] = action
        p["issue"]["number"] = number
        p["issue"]["labels"] = [{"name": n, "id": i, "color": "ededed"} for i, n in enumerate(labels)]
        if label:
            p["label"] = {"name": label, "id": 99, "color": "ededed"}
    return edit


def comment(number, text):
    def edit(p):
        p["issue"]["number"] = number
        p["comment"]["body"] = text
    return edit


def pull(number, head):
    def edit(p):
        p["pull_request"]["number"] = number
        p["pull_request"]["head"]["ref"] = head
    return edit


def slots():
    for i in range(300):
        n = 10001 + i % 20
        yield body(f"opened-{n}", "issues.opened.json", issue("opened", n, []))
    for i in range(300):
        n = 20001 + i % 20
        yield body(f"comment-{n}", "issue_comment.created.json",
                   comment(n, "Same here on Firefox 128, thanks for looking into it."))
    for _ in range(100):
        yield body("edited", "issues.edited.json", issue("edited", 30001, ["bug"]))
    for _ in range(100):
        yield body("pr-opened", "pull_request.opened.json", pull(40001, "fix-typo"))
    for _ in range(50):
        yield body("pr-sync", "pull_request.synchronize.json", pull(40001, "fix-typo"))
    for _ in range(60):
        yield body("review", "pull_request_review.submitted.json", pull(40001, "fix-typo"))
    for _ in range(40):
        yield body("review-comment", "pull_request_review_comment.created.json", pull(40001, "fix-typo"))
    for i in range(25):
        n = 50001 + i
        yield body(f"labeled-bug-{n}", "issues.labeled.json", issue("labeled", n, ["bug"], "bug"))
    for i in range(10):
        n = 60001 + i
        yield body(f"status-{n}", "issue_comment.created.json", comment(n, "/closer status"))
    for _ in range(10):
        yield body("repos-added", "installation_repositories.added.json", lambda p: None)
    for i in range(4):
        n = 70001 + i
        yield body(f"closer-pr-{n}", "pull_request.closed.json", pull(n, f"closer/issue-{n - 100}"))
    yield "TRIGGER"


schedule = list(slots())
assert len(schedule) == 1000, len(schedule)
# Spread each kind over the cycle instead of sending it in one block.
schedule = [schedule[(i * 379) % 1000] for i in range(1000)]
assert sorted(schedule) == sorted(slots())
with open(os.path.join(out, "schedule.tsv"), "w") as f:
    f.write("\n".join(schedule) + "\n")
# Sent once before the load: the installation the mix's events come from.
with open(os.path.join(out, "installation.tsv"), "w") as f:
    f.write(body("installation", "installation.created.json", lambda p: None) + "\n")
with open(os.path.join(out, "triggers.tsv"), "w") as f:
    for n in range(100001, 101001):
        f.write(body(f"trigger-{n}", "issues.labeled.json",
                     issue("labeled", n, ["closer"], "closer")) + "\n")
