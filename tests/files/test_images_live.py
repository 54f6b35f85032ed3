"""Images to a model that sees them, live: a front whose `vision = true` model is an
OpenAI-compatible upstream (tests/support/tool_upstream.py keeps every body it is sent), through
the official `openai` client; the image reaches it as an `image_url` part in its place,
downscaled and without its EXIF; the lab's model, which sees none, is named in a 400."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from PIL import Image

from tests.files.documents import PNG_1x1, photo_of, png_of
from tests.support import tool_upstream
from tests.support.live import LiveServer, start_server

pytestmark = pytest.mark.live

SIDE = 64  # the vision model's `max_image_side`
MODELS = """
[[models]]
name = "lab"
engine = "deterministic"
default = true

[[models]]
name = "eyes"
engine = "openai"
url = "http://127.0.0.1:{upstream}/v1"
upstream_model = "toolish"
vision = true
max_image_side = {side}
"""


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    with tool_upstream.serving() as base:
        yield base


@pytest.fixture(scope="module")
def server(upstream, tmp_path_factory) -> Iterator[LiveServer]:
    folder: Path = tmp_path_factory.mktemp("images")
    models = folder / "models.toml"
    models.write_text(MODELS.format(upstream=upstream.rsplit(":", 1)[1], side=SIDE))
    live = start_server(folder, env={"STREAMING_MODELS": str(models)}, ready_path="/readyz")
    yield live
    live.stop()


@pytest.fixture
def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)


def last_sent(upstream: str) -> dict:
    return httpx.get(f"{upstream}/requests").json()["requests"][-1]


def shown(url: str) -> Image.Image:
    head, _, data = url.partition(",")
    assert head in ("data:image/jpeg;base64", "data:image/png;base64")
    return Image.open(io.BytesIO(base64.b64decode(data)))


def test_an_image_reaches_the_upstream_in_its_place_downscaled_without_exif(client, upstream):
    photo = photo_of(400, 200, orientation=6)
    inline = "data:image/jpeg;base64," + base64.b64encode(photo).decode()
    client.chat.completions.create(
        model="eyes",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Before. "},
                    {"type": "image_url", "image_url": {"url": inline}},
                    {"type": "text", "text": "After."},
                ],
            }
        ],
        max_tokens=5,
    )
    parts = last_sent(upstream)["messages"][-1]["content"]
    assert [part["type"] for part in parts] == ["text", "image_url", "text"]
    assert (parts[0]["text"], parts[2]["text"]) == ("Before. ", "After.")
    image = shown(parts[1]["image_url"]["url"])
    assert image.size == (SIDE // 2, SIDE)  # turned upright as its EXIF said, then fitted
    assert not image.getexif()  # no camera, no place: nothing of its metadata is sent
    assert b"Test Camera" not in base64.b64decode(parts[1]["image_url"]["url"].split(",")[1])


def test_an_uploaded_image_is_shown_by_each_api_the_same_every_turn(client, upstream):
    uploaded = client.files.create(file=("shot.png", png_of(300, 30)), purpose="user_data")
    sent = []
    for part in (
        {"type": "input_image", "file_id": uploaded.id},
        {"type": "input_file", "file_id": uploaded.id},  # a file part naming an image
    ):
        client.responses.create(
            model="eyes",
            input=[{"role": "user", "content": [{"type": "input_text", "text": "Hi"}, part]}],
            max_output_tokens=5,
        )
        sent.append(last_sent(upstream)["messages"][-1]["content"])
    file_id = uploaded.id
    client.chat.completions.create(
        model="eyes",
        messages=[{"role": "user", "content": [{"type": "file", "file": {"file_id": file_id}}]}],
        max_tokens=5,
    )
    sent.append([{"type": "text", "text": "Hi"}, *last_sent(upstream)["messages"][-1]["content"]])
    # The same bytes each time: a later turn begins with the same prefix as the first.
    assert sent[0] == sent[1] == sent[2]
    assert [part["type"] for part in sent[0]] == ["text", "image_url"]
    assert shown(sent[0][1]["image_url"]["url"]).size == (SIDE, 6)


def test_an_image_for_a_model_without_vision_is_refused_naming_it(client, upstream):
    before = len(httpx.get(f"{upstream}/requests").json()["requests"])
    inline = "data:image/png;base64," + base64.b64encode(PNG_1x1).decode()
    with pytest.raises(openai.BadRequestError, match="'lab' is not shown images") as refused:
        client.chat.completions.create(
            model="lab",
            messages=[
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": inline}}]}
            ],
            max_tokens=5,
        )
    assert refused.value.body["param"] == "messages[0].content[0]"
    with pytest.raises(openai.BadRequestError, match="is not an image"):
        client.responses.create(
            model="eyes",
            input=[
                {
                    "role": "user",
                    "content": [
                        {"type": "input_image", "image_url": "data:image/png;base64,aGVsbG8="}
                    ],
                }
            ],
        )
    assert len(httpx.get(f"{upstream}/requests").json()["requests"]) == before
