"""Files attached on the chat page (issue 54, static/attachments.js): by the paperclip, a drop on
the composer and a paste, each a chip uploading at once to `POST /v1/files` with the page's
cookies and CSRF token (an anonymous browser's, a signed-in person's), its bar filling on a slow
uplink; a refused one says why and is not sent; a chip removed (while uploading too); Send
waits for the uploads; a message sent names its files and shows them (what the model read of a
long one), after a reload and edited too; an image to a model that reads none is refused with
the message kept; a message's image drawn from the server. Axe on every state.

A real server (the session's: the deterministic model, which reads no images).
"""

from __future__ import annotations

import base64
import contextlib
import io
import re
import uuid
from typing import Any

from PIL import Image
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from tests.support.live import LiveServer, wait_until

from .axe import assert_accessible
from .helpers import (
    ANSWERING,
    WATCH_ANNOUNCER,
    amend_new_conversations,
    create_user,
    origin_of,
    screenshot,
    shown_conversation,
    sign_in,
)

FINISHED = re.compile(r"^(done|length)$")
READY = "準備完了"
NOTES = b"Quarterly notes\nRevenue went up.\n" * 40  # 1,320 bytes: "1.3 KB"
# No kind the server takes (a NUL, no signature): 415 unsupported_file.
BINARY = bytes(range(256)) * 8
# Longer than the three quarters of STREAM_MAX_PROMPT_CHARS (32,000) a message's files may take.
LONG_TEXT = ("All work and no play makes a long file. " * 1000).encode()  # 40,000 characters

BIG_TEXT = b"0123456789abcde\n" * 65_536  # 1 MiB
SLOW_UPLINK = 400_000  # bytes per second: BIG_TEXT takes about 2.6 s to send
# Every state a composer's chip takes, and its bar's values, in order.
WATCH_CHIPS = """() => {
  window.chipChanges = [];
  new MutationObserver((records) => {
    for (const {type, target, attributeName, addedNodes} of records) {
      const changes = window.chipChanges;
      const chips = [...addedNodes].filter((node) => node.matches?.(".attachment"));
      if (type === "childList") changes.push(...chips.map((chip) => ["state", chip.dataset.state]));
      else if (attributeName === "data-state") changes.push(["state", target.dataset.state]);
      else changes.push(["progress", target.value]);
    }
  }).observe(document.getElementById("attachments"), {
    childList: true, subtree: true, attributes: true, attributeFilter: ["data-state", "value"],
  });
}"""

DROP = """([name, type, data]) => {
  const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  const carried = new DataTransfer();
  carried.items.add(new File([bytes], name, {type}));
  const target = document.getElementById("prompt");
  const fire = (kind) => {
    const event = new DragEvent(kind, {bubbles: true, cancelable: true, dataTransfer: carried});
    target.dispatchEvent(event);
    return event.defaultPrevented;
  };
  fire("dragenter");
  const taken = fire("dragover");
  const highlighted = document.getElementById("composer").classList.contains("dropping");
  const dropped = fire("drop");
  const after = document.getElementById("composer").classList.contains("dropping");
  return {taken, highlighted, dropped, after};
}"""

PASTE = """([name, type, data, text]) => {
  const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  const clipboard = new DataTransfer();
  clipboard.items.add(new File([bytes], name, {type}));
  if (text) clipboard.setData("text/plain", text);
  const event = new ClipboardEvent(
    "paste", {bubbles: true, cancelable: true, clipboardData: clipboard});
  document.getElementById("prompt").dispatchEvent(event);
  return event.defaultPrevented;
}"""


def png(width: int = 12, height: int = 8) -> bytes:
    """A small valid PNG."""
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (210, 60, 40)).save(buffer, "PNG")
    return buffer.getvalue()


def encoded(data: bytes) -> str:
    return base64.b64encode(data).decode()


def attach(page: Any, *files: tuple[str, str, bytes]) -> None:
    """Pick `files` ((name, type, bytes)) with the paperclip's file input."""
    page.set_input_files(
        "#attach-input",
        files=[{"name": name, "mimeType": kind, "buffer": data} for name, kind, data in files],
    )


def chip(page: Any, name: str) -> Any:
    return page.locator(
        "#attachments .attachment", has=page.locator(".attachment-name", has_text=name)
    )


def files_of(page: Any) -> list[dict]:
    """The browser's files as the server lists them (the page's own cookies)."""
    return page.request.get(origin_of(page.url) + "/v1/files").json()["data"]


def announced(page: Any) -> str:
    return " | ".join(page.evaluate("window.announced"))


def upload_as_page(page: Any, name: str, kind: str, data: bytes) -> str:
    """Upload a file as the page's browser (its cookies, its CSRF token); its id."""
    url = origin_of(page.url) + "/v1/files"
    token = next(c["value"] for c in page.context.cookies(url) if c["name"] == "csrftoken")
    reply = page.request.post(
        url,
        multipart={
            "purpose": "user_data",
            "file": {"name": name, "mimeType": kind, "buffer": data},
        },
        headers={"X-CSRFToken": token},
    )
    assert reply.status == 200, reply.text()
    return reply.json()["id"]


def held_uploads(page: Any) -> list[Any]:
    """Hold the page's uploads until the test lets each go (`route.continue_()`)."""
    held: list[Any] = []
    page.route("**/v1/files", lambda route: held.append(route))
    return held


def test_the_paperclip_attaches_files_that_upload_with_the_pages_cookies(open_page) -> None:
    """Two files picked: a chip each with its name, size and state, an image's thumbnail; each
    sent as multipart with `purpose=user_data` and the CSRF token, kept as this browser's."""
    page = open_page()
    page.evaluate(WATCH_ANNOUNCER)
    uploads: list[Any] = []
    page.on(
        "request", lambda request: uploads.append(request) if "/v1/files" in request.url else None
    )
    expect(page.locator("#attachments")).to_be_hidden()

    # The paperclip, from the keyboard, opens the file picker (several files at once).
    with page.expect_file_chooser() as choosing:
        page.get_by_role("button", name="ファイルを添付").press("Enter")
    assert choosing.value.is_multiple()
    choosing.value.set_files(
        [
            {"name": "notes.txt", "mimeType": "text/plain", "buffer": NOTES},
            {"name": "chart.png", "mimeType": "image/png", "buffer": png()},
        ]
    )

    notes, chart = chip(page, "notes.txt"), chip(page, "chart.png")
    for each in (notes, chart):
        expect(each).to_have_attribute("data-state", "ready")
        expect(each).to_have_attribute("data-file-id", re.compile(r"^file-"))
        expect(each.locator(".attachment-state")).to_have_text(READY)
        expect(each.locator(".attachment-progress")).to_be_hidden()
    expect(notes.locator(".attachment-size")).to_have_text("1.3 KB")
    expect(notes.locator("img")).to_have_count(0)
    thumbnail = chart.locator("img.attachment-thumb")
    expect(thumbnail).to_have_attribute("src", re.compile(r"^blob:"))
    page.wait_for_function(
        "img => img.complete && img.naturalWidth === 12", arg=thumbnail.element_handle()
    )
    expect(page.locator("#send-button")).to_be_enabled()
    assert [a.inner_text() for a in page.locator("#attachments .attachment-name").all()] == [
        "notes.txt",
        "chart.png",
    ]

    assert [request.method for request in uploads] == ["POST", "POST"]
    for request in uploads:
        assert request.headers["x-csrftoken"]
        # Its body (a file's part: not shown to Playwright) is taken only with purpose=user_data.
        assert request.headers["content-type"].startswith("multipart/form-data; boundary=")
    kept = {each["id"]: (each["filename"], each["bytes"]) for each in files_of(page)}
    assert kept == {
        notes.get_attribute("data-file-id"): ("notes.txt", len(NOTES)),
        chart.get_attribute("data-file-id"): ("chart.png", len(png())),
    }

    said = announced(page)
    assert "notes.txt を添付しました。アップロードしています。" in said
    assert "notes.txt の準備ができました。" in said and "chart.png の準備ができました。" in said
    assert "%" not in said  # the progress is shown, not said
    assert_accessible(page, "two chips ready")
    screenshot(page, "54-attachments-ready")
    assert page.errors == []


def test_a_signed_in_persons_upload_is_theirs(open_page, chat_server: LiveServer) -> None:
    """The session's cookie and the CSRF token: the file is the person's, and only theirs."""
    name, password = f"files-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    create_user(chat_server, name, password)
    page = open_page()
    sign_in(page, name, password)
    attach(page, ("mine.txt", "text/plain", NOTES))
    mine = chip(page, "mine.txt")
    expect(mine).to_have_attribute("data-state", "ready")
    assert [each["id"] for each in files_of(page)] == [mine.get_attribute("data-file-id")]
    stranger = open_page()
    assert files_of(stranger) == []
    assert page.errors == []


def test_an_upload_shows_its_progress_then_reading(open_page) -> None:
    """A file on a slow uplink: its bar fills as the bytes go, then it is read, then ready."""
    page = open_page()
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send(
        "Network.emulateNetworkConditions",
        {
            "offline": False,
            "latency": 0,
            "downloadThroughput": -1,
            "uploadThroughput": SLOW_UPLINK,
        },
    )
    page.evaluate(WATCH_CHIPS)
    attach(page, ("big.txt", "text/plain", BIG_TEXT))
    expect(chip(page, "big.txt")).to_have_attribute("data-state", "ready", timeout=30_000)
    seen = page.evaluate("window.chipChanges")
    states = [value for kind, value in seen if kind == "state"]
    assert states == ["uploading", "reading", "ready"], states
    progress = [float(value) for kind, value in seen if kind == "progress"]
    assert len(progress) >= 3 and progress == sorted(progress), progress
    assert 0 < progress[0] < 0.5 and progress[-1] == 1, progress
    assert page.errors == []


def test_a_file_dropped_on_the_composer_is_attached(open_page) -> None:
    page = open_page()
    dropped = page.evaluate(DROP, ["dropped.md", "text/markdown", encoded(b"# Dropped\n")])
    assert dropped == {"taken": True, "highlighted": True, "dropped": True, "after": False}
    expect(chip(page, "dropped.md")).to_have_attribute("data-state", "ready")
    expect(page.locator("#prompt")).to_be_focused()
    assert page.errors == []


def test_a_pasted_image_is_attached_as_pasted_image_png(open_page) -> None:
    """A clipboard's image (Chromium names it image.png) becomes a file; the same image beside
    text is that text's picture (a word processor's copy): the text is pasted, nothing attached."""
    page = open_page()
    page.fill("#prompt", "見てください")
    assert page.evaluate(PASTE, ["image.png", "image/png", encoded(png()), ""]) is True
    pasted = chip(page, "pasted-image.png")
    expect(pasted).to_have_attribute("data-state", "ready")
    expect(pasted.locator("img.attachment-thumb")).to_have_count(1)
    expect(page.locator("#prompt")).to_have_value("見てください")
    assert [each["filename"] for each in files_of(page)] == ["pasted-image.png"]

    assert page.evaluate(PASTE, ["image.png", "image/png", encoded(png()), "a table"]) is False
    expect(page.locator("#attachments .attachment")).to_have_count(1)
    assert page.errors == []


def test_a_refused_file_says_why_and_is_not_sent(open_page) -> None:
    """415: the chip says so in the page's words and the server's; the message goes without it."""
    page = open_page()
    page.evaluate(WATCH_ANNOUNCER)
    amend_new_conversations(page, {"max_tokens": 8})
    attach(page, ("data.bin", "application/octet-stream", BINARY))
    refused = chip(page, "data.bin")
    expect(refused).to_have_attribute("data-state", "refused")
    expect(refused.locator(".attachment-state")).to_have_text(
        "受け付けられませんでした: この種類のファイルは受け付けていません。"
    )
    expect(refused.locator(".attachment-detail")).to_contain_text("binary data")
    expect(refused.get_by_role("button", name="data.bin を取り除く")).to_be_visible()
    expect(page.locator("#send-button")).to_be_enabled()
    wait_until(lambda: "data.bin は受け付けられませんでした" in announced(page))
    assert files_of(page) == []
    assert_accessible(page, "a refused chip")
    screenshot(page, "54-attachment-refused")

    page.fill("#prompt", "ファイルなしで")
    with page.expect_request(ANSWERING) as sending:
        page.press("#prompt", "Enter")
    assert sending.value.post_data_json == {"content": "ファイルなしで"}
    sent = page.locator(".message-user").last
    expect(sent.locator(".message-body")).to_have_text("ファイルなしで")
    expect(sent.locator(".attachment")).to_have_count(0)
    expect(page.locator("#attachments")).to_be_hidden()  # the composer starts afresh
    expect(page.locator(".message-assistant").last).to_have_attribute("data-state", FINISHED)
    assert page.errors == []


def test_send_waits_for_uploads_and_chips_are_removed(open_page) -> None:
    """While a file uploads Send is disabled (Enter says why); a chip is removed mid-upload
    (the upload stops) or once ready (the server forgets the file), from the keyboard, the
    focus going to the next chip."""
    page = open_page()
    page.evaluate(WATCH_ANNOUNCER)
    held = held_uploads(page)
    attach(page, ("slow.txt", "text/plain", NOTES))
    slow = chip(page, "slow.txt")
    # Route handlers run only within a Playwright call: each poll makes one.
    wait_until(lambda: page.evaluate("true") and len(held) == 1)
    expect(slow).to_have_attribute("data-state", re.compile(r"^(uploading|reading)$"))
    expect(page.locator("#send-button")).to_be_disabled()
    page.fill("#prompt", "まだ送れない")
    page.press("#prompt", "Enter")
    wait_until(lambda: "ファイルのアップロードが終わるまでお待ちください。" in announced(page))
    expect(page.locator(".message")).to_have_count(0)
    assert_accessible(page, "a chip uploading")
    screenshot(page, "54-attachment-uploading")

    slow.get_by_role("button", name="slow.txt を取り除く").click()
    expect(slow).to_have_count(0)
    expect(page.locator("#send-button")).to_be_enabled()
    wait_until(lambda: "slow.txt を取り除きました。" in announced(page))
    with contextlib.suppress(PlaywrightError):  # its request was aborted
        held[0].continue_()
    page.unroute("**/v1/files")

    attach(page, ("first.txt", "text/plain", b"one\n"), ("second.txt", "text/plain", b"two\n"))
    expect(chip(page, "first.txt")).to_have_attribute("data-state", "ready")
    expect(chip(page, "second.txt")).to_have_attribute("data-state", "ready")
    kept = chip(page, "second.txt").get_attribute("data-file-id")
    chip(page, "first.txt").locator(".attachment-remove").focus()
    page.keyboard.press("Enter")
    expect(chip(page, "first.txt")).to_have_count(0)
    expect(chip(page, "second.txt").locator(".attachment-remove")).to_be_focused()
    wait_until(lambda: [each["id"] for each in files_of(page)] == [kept])
    page.keyboard.press("Space")
    expect(page.locator("#attachments")).to_be_hidden()
    expect(page.locator("#prompt")).to_be_focused()
    wait_until(lambda: files_of(page) == [])
    assert page.errors == []


# --- sending (the server's side of issue 54 part 4 and 5) -----------------------------------


def test_a_message_sent_with_a_file_names_it_and_shows_it(open_page) -> None:
    """The message's body names the ready file; the message shows its chip, and how much of a
    long text the model read; so does the conversation after a reload."""
    page = open_page()
    amend_new_conversations(page, {"max_tokens": 8})
    attach(page, ("long.txt", "text/plain", LONG_TEXT))
    long = chip(page, "long.txt")
    expect(long).to_have_attribute("data-state", "ready")
    file_id = long.get_attribute("data-file-id")
    page.fill("#prompt", "このファイルを要約して")
    with page.expect_request(ANSWERING) as sending:
        page.press("#prompt", "Enter")
    assert sending.value.post_data_json == {"content": "このファイルを要約して", "files": [file_id]}
    expect(page.locator("#attachments")).to_be_hidden()

    sent = page.locator(".message-user").last
    shown = sent.locator(".attachment")
    expect(shown).to_have_count(1)
    expect(shown).to_have_attribute("data-file-id", file_id)
    expect(shown.locator(".attachment-name")).to_have_text("long.txt")
    expect(shown.locator(".attachment-size")).to_have_text("39 KB")
    expect(shown.get_by_role("button")).to_have_count(0)  # not removable
    expect(page.locator(".message-assistant").last).to_have_attribute("data-state", FINISHED)

    item = shown_conversation(page)["items"][0]
    assert item["role"] == "user"
    assert [
        (a["id"], a["filename"], a["kind"], a["size"], a["image"]) for a in item["attachments"]
    ] == [(file_id, "long.txt", "text", len(LONG_TEXT), False)]
    read, total = item["attachments"][0]["read"], item["attachments"][0]["total"]
    assert total == len(LONG_TEXT) and 0 < read < total
    note = f"{total:,} 文字中 {read:,} 文字を読みました"
    expect(shown.locator(".attachment-read")).to_have_text(note)
    assert shown_conversation(page)["items"][1]["attachments"] == []
    assert_accessible(page, "a message sent with a file")
    screenshot(page, "54-message-with-attachment")

    page.reload()
    again = page.locator(".message-user").first.locator(".attachment")
    expect(again).to_have_attribute("data-file-id", file_id)
    expect(again.locator(".attachment-read")).to_have_text(note)

    # Edited, it is sent again with the same file.
    page.locator(".message-user .edit-button").click()
    page.fill(".message-edit-field", "このファイルの最初の段落を要約して")
    with page.expect_request(ANSWERING) as editing:
        page.press(".message-edit-field", "Enter")
    assert editing.value.post_data_json == {
        "content": "このファイルの最初の段落を要約して",
        "after": None,
        "files": [file_id],
    }
    edited = page.locator(".message-user").first
    expect(edited.locator(".alternatives-label")).to_have_text("2 / 2")
    expect(edited.locator(".attachment")).to_have_attribute("data-file-id", file_id)
    expect(page.locator(".message-assistant").last).to_have_attribute("data-state", FINISHED)
    assert page.errors == []


def test_a_file_goes_alone_without_words(open_page) -> None:
    """Enter on an empty text box with a ready file sends the file alone (the server takes a
    message of files); with neither, nothing is sent."""
    page = open_page()
    amend_new_conversations(page, {"max_tokens": 4})
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url) if ANSWERING.search(r.url) else None)
    page.press("#prompt", "Enter")
    attach(page, ("notes.txt", "text/plain", b"Meet at noon.\n"))
    expect(chip(page, "notes.txt")).to_have_attribute("data-state", "ready")
    assert sent == []  # the empty box alone sent nothing
    file_id = chip(page, "notes.txt").get_attribute("data-file-id")
    with page.expect_request(ANSWERING) as sending:
        page.press("#prompt", "Enter")
    assert sending.value.post_data_json == {"content": "", "files": [file_id]}
    shown = page.locator(".message-user").last.locator(".attachment")
    expect(shown).to_have_attribute("data-file-id", file_id)
    expect(page.locator(".message-assistant").last).to_have_attribute("data-state", FINISHED)
    assert page.errors == []


def test_an_image_to_a_model_without_vision_keeps_the_message(open_page) -> None:
    """400 naming the model: the answer says it, and the text and the chip go back to the
    composer, nothing lost."""
    page = open_page()
    attach(page, ("photo.png", "image/png", png()))
    photo = chip(page, "photo.png")
    expect(photo).to_have_attribute("data-state", "ready")
    file_id = photo.get_attribute("data-file-id")
    model = page.request.get(origin_of(page.url) + "/v1/models").json()["data"][0]["id"]
    page.fill("#prompt", "この写真は何?")
    page.press("#prompt", "Enter")

    answer = page.locator(".message-assistant").last
    expect(answer).to_have_attribute("data-state", "error")
    expect(page.locator("#prompt")).to_have_value("この写真は何?")
    back = chip(page, "photo.png")
    expect(back).to_have_attribute("data-state", "ready")
    expect(back).to_have_attribute("data-file-id", file_id)
    expect(back.locator("img.attachment-thumb")).to_have_attribute("src", re.compile(r"^blob:"))
    assert [each["id"] for each in files_of(page)] == [file_id]
    expect(answer.locator(".message-detail")).to_contain_text(model)
    assert_accessible(page, "an image refused with its message")
    screenshot(page, "54-image-refused-kept")
    assert page.errors == []


def test_an_image_attachment_shows_its_thumbnail_from_the_server(open_page) -> None:
    """A message's image is drawn from `/v1/files/<id>/content` (alt: its name), and an English
    page's note is in English. The server's reply is given the attachments here, as a model with
    vision would have them (the deterministic model reads no images)."""
    page = open_page(locale="en-US")
    amend_new_conversations(page, {"max_tokens": 8})
    image_id = upload_as_page(page, "photo.png", "image/png", png(20, 10))
    page.fill("#prompt", "A picture")
    page.press("#prompt", "Enter")
    expect(page.locator(".message-assistant").last).to_have_attribute("data-state", FINISHED)
    attachments = [
        {
            "id": image_id,
            "filename": "photo.png",
            "kind": "png",
            "size": 100,
            "image": True,
            "read": None,
            "total": None,
        },
        {
            "id": "file-0",
            "filename": "long.txt",
            "kind": "text",
            "size": 40_000,
            "image": False,
            "read": 6000,
            "total": 28894,
        },
    ]

    def with_attachments(route: Any) -> None:
        response = route.fetch()
        branch = response.json()
        for item in branch["items"]:
            item["attachments"] = attachments if item["role"] == "user" else []
        route.fulfill(response=response, json=branch)

    page.route(re.compile(r"/api/conversations/conv_[0-9a-f]{32}$"), with_attachments)
    page.reload()
    shown = page.locator(".message-user").first.locator(".attachment")
    expect(shown).to_have_count(2)
    image = shown.nth(0).get_by_role("img", name="photo.png")
    expect(image).to_have_attribute("src", f"/v1/files/{image_id}/content")
    page.wait_for_function(
        "img => img.complete && img.naturalWidth === 20", arg=image.element_handle()
    )
    expect(shown.nth(0).locator(".attachment-size")).to_have_text("100 B")
    expect(shown.nth(1).locator(".attachment-size")).to_have_text("39 KB")
    expect(shown.nth(1).locator(".attachment-read")).to_have_text("read 6,000 of 28,894 characters")
    assert_accessible(page, "a message's image and a file read in part")
    screenshot(page, "54-message-image-thumbnail")
    assert page.errors == []


def test_sizes_read_as_people_write_them(open_page) -> None:
    """i18n.js's formatSize: units of 1,024, a decimal below 10, rounded as shown."""
    page = open_page(locale="en-US")
    sizes = [0, 78, 1023, 1024, 1_320, 10_189, 40_000, 1_048_500, 1_258_291, 33_554_432]
    shown = page.evaluate(
        "async (sizes) => { const i18n = await import('/static/i18n.js');"
        " return sizes.map((size) => i18n.formatSize(size)); }",
        sizes,
    )
    assert shown == [
        "0 B",
        "78 B",
        "1,023 B",
        "1.0 KB",
        "1.3 KB",
        "10 KB",
        "39 KB",
        "1.0 MB",
        "1.2 MB",
        "32 MB",
    ]
