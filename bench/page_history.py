"""A long conversation on the chat page: one is written straight into a live server's database
for a browser (or a signed-in person), then opened, its alternatives switched, and an answer
streamed into it, while the page's main thread is watched (bench/page_bench.py's probe).

bench/page_bench.py runs it for a case with history (`10000@1000+500`); the browser tests seed
their long conversations with `seed_conversation` too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from streaming.programs.liveserver import ROOT, LiveServer

# Run in the server's environment (its database): the conversation, for the owner the spec
# names or the browser whose `llm_owner` cookie it gives; one answer at `alternative_at` gets
# a sibling, and the branch shown is the long one again.
SEED_PY = """
import json, sys
from django.http import HttpRequest
from streaming.conversations import branches, records
from streaming.http.auth import OWNER_COOKIE, anonymous_token
spec = json.loads(sys.stdin.read())
browser = HttpRequest()
browser.COOKIES[OWNER_COOKIE] = spec["cookie"]
owner = spec["owner"] or f"anon:{anonymous_token(browser)}"
conversation = records.create(owner, title=spec["title"], items=[tuple(i) for i in spec["items"]],
                              **spec["settings"])
branch = branches.branch(conversation)
if spec["alternative_at"] is not None:
    answer = branch.items[spec["alternative_at"]]
    records.append(conversation, [("assistant", spec["alternative_text"])], after=answer.parent)
    records.show(conversation, branch.items[-1])
print(json.dumps({"id": conversation.conversation_id, "items": [i.item_id for i in branch.items]}))
"""
PARAGRAPH = (
    "ストリーミングでは、トークンが生成されるたびにサーバーからブラウザーへ送られます。"
    "An answer of a few sentences, with **bold**, `code` and a [link](https://example.com)."
)


def django_shell(server: LiveServer, code: str, stdin: str = "") -> str:
    """Run `code` in `manage.py shell` against the server's database, `stdin` its input;
    what it printed."""
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=server.env,
        input=stdin,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py shell failed:\n{done.stderr}")
    return done.stdout


def long_conversation_items(count: int) -> list[tuple[str, str]]:
    """`count` items, a person's question and an answer of a few paragraphs in turn."""
    items = []
    for n in range(count):
        if n % 2 == 0:
            items.append(("user", f"質問 {n // 2 + 1}: ストリーミングについて教えてください。"))
        else:
            answer = "\n\n".join(f"{PARAGRAPH} ({n}.{p})" for p in range(3))
            items.append(("assistant", f"## 回答 {n // 2 + 1}\n\n{answer}\n\n- 一つ目\n- 二つ目"))
    return items


def seed_conversation(
    server: LiveServer,
    items: list[tuple[str, str]],
    *,
    owner: str = "",
    cookie: str = "",
    title: str = "長い会話",
    alternative_at: int | None = None,
    alternative_text: str = "別の回答です。",
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write a conversation of `items` for `owner` (e.g. `user:3`) or for the browser whose
    `llm_owner` cookie value is `cookie`, with its answers' `settings`; `alternative_at`: the
    index of an answer that gets a sibling. Returns {"id", "items": [item ids of the branch
    shown]}."""
    spec = {
        "owner": owner,
        "cookie": cookie,
        "title": title,
        "items": items,
        "alternative_at": alternative_at,
        "alternative_text": alternative_text,
        "settings": settings or {},
    }
    return json.loads(django_shell(server, SEED_PY, json.dumps(spec)).splitlines()[-1])


def owner_cookie(page: Any) -> str:
    """The value of the browser's signed `llm_owner` cookie (the chat page sets it)."""
    return next(c["value"] for c in page.context.cookies() if c["name"] == "llm_owner")


# The long tasks that begin after `since` (performance.now() time), and the frames since.
TASKS_SINCE_JS = """(since) => {
  const p = window.__pageProbe;
  const tasks = p.longTasks.filter((t) => t.start >= since);
  return {long_tasks: tasks.length, longest_task_ms: Math.max(0, ...tasks.map((t) => t.duration))};
}"""
# Until every message of the branch has its view (the page makes them a frame's budget at a
# time), and a frame after that.
BUILT_JS = """(count) => document.querySelectorAll('#thread .message').length === count
  && document.getElementById('messages').getAttribute('aria-busy') !== 'true'"""


def timed(page: Any, action: Any, count: int, timeout_s: float = 60.0) -> dict[str, Any]:
    """Do `action()` on the probed page and wait until `count` messages are shown; the long
    tasks meanwhile and how long it took (to within the 50 ms the wait polls at)."""
    since = page.evaluate("performance.now()")
    action()
    page.wait_for_function(BUILT_JS, arg=count, timeout=timeout_s * 1000, polling=50)
    took = page.evaluate("performance.now()") - since
    page.wait_for_timeout(300)  # long-task entries are delivered a task later
    return {**page.evaluate(TASKS_SINCE_JS, since), "ms": took}


PAGE_ITEMS = 50  # what the page shows of a conversation opened: its last page
# Until every page before is shown: "Load earlier messages" pressed whenever the last press's
# page is in (the page being made in the meantime).
LOAD_ALL_EARLIER_JS = """() => new Promise((resolve) => {
  const button = document.getElementById('load-earlier');
  const log = document.getElementById('messages');
  const step = () => {
    if (button.hidden) return resolve();
    if (log.getAttribute('aria-busy') !== 'true') button.click();
    setTimeout(step, 50);
  };
  step();
})"""


def measure_history(page: Any, server: LiveServer, count: int) -> dict[str, Any]:
    """Seed a conversation of `count` items (its first answer has an alternative) for the
    probed page's browser, open it from the list (its last page), load every page before, switch
    that answer to its alternative and back (the branch again, down from it): the longest
    main-thread task of each step."""
    from bench.page_bench import settle  # it imports this module

    seed_conversation(
        server, long_conversation_items(count), cookie=owner_cookie(page), alternative_at=1
    )
    page.reload()
    page.wait_for_selector(".conversation-open")
    settle(page)  # the load and the page's idle-time warm-up are not what is measured
    opened = min(count, PAGE_ITEMS)
    figures = {"open": timed(page, lambda: page.click(".conversation-open"), opened)}
    figures["earlier"] = timed(page, lambda: page.evaluate(LOAD_ALL_EARLIER_JS), count)
    second = page.locator(".message-assistant").nth(0)
    figures["to_alternative"] = timed(page, lambda: second.locator(".alternative-next").click(), 2)
    figures["back"] = timed(
        page, lambda: page.locator(".message-assistant .alternative-previous").first.click(), count
    )
    return figures
