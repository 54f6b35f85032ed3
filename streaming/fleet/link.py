"""A web process's end of the channel layer: its reply channel, and what it sends on the layer.

One per web process, in its fleet client (fleet/client.py), shared with its inbox and its
handover; opened by the client's `start` (Channels' layer is looked up then, not at import).
"""

from __future__ import annotations

import logging
from typing import Any

from channels.layers import get_channel_layer

from streaming.fleet.protocol import WORKERS_GROUP, Envelope

logger = logging.getLogger(__name__)


class Link:
    """The channel layer and this process's reply channel on it."""

    def __init__(self) -> None:
        self.layer: Any = None
        self.reply_channel = ""

    async def open(self) -> None:
        """Find the layer and open our reply channel."""
        self.layer = get_channel_layer()
        self.reply_channel = await self.layer.new_channel("web.")

    async def receive(self) -> dict[str, Any]:
        """The next message on our reply channel."""
        return await self.layer.receive(self.reply_channel)

    async def send(self, channel: str, message: Envelope) -> None:
        """Send to one worker."""
        await self.layer.send(channel, message.encode())

    async def send_quietly(self, channel: str, message: Envelope) -> None:
        """Send to one worker; a failure is logged, for a message whose loss the fleet survives."""
        try:
            await self.send(channel, message)
        except Exception as error:
            logger.warning("%s to %s not sent: %r", message.type, channel, error)

    async def to_workers(self, message: Envelope) -> None:
        """Send to every worker."""
        await self.layer.group_send(WORKERS_GROUP, message.encode())
