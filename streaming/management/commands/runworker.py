"""`manage.py runworker model-worker`: Channels' command with a worker that starts at once."""

from __future__ import annotations

import asyncio
import logging
import os

from channels.management.commands.runworker import Command as ChannelsRunworker
from channels.worker import Worker
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError

from streaming import deployment
from streaming.core import runtime
from streaming.fleet.worker import RETRY_FULL_S, WorkerCannotStart

logger = logging.getLogger(__name__)


class ModelWorker(Worker):
    """Channels' worker, except that it starts the consumer before the first message.

    Channels creates an application instance when a message first arrives on its channel; a
    model worker must load its model and announce itself before anyone knows it exists.
    """

    async def handle(self):
        """Create the consumers now, then listen."""
        for channel in self.channels:
            self.get_or_create_application_instance(
                channel, {"type": "channel", "channel": channel}
            )
        await super().handle()

    async def listener(self, channel):
        """Channels' listener, but a Redis outage is waited out instead of ending the worker."""
        while True:
            try:
                message = await self.channel_layer.receive(channel)
            except Exception as error:
                logger.warning("receiving on %s failed (%s); retrying", channel, error)
                await asyncio.sleep(RETRY_FULL_S * 10)
                continue
            if message.get("type"):
                queue = self.get_or_create_application_instance(
                    channel, {"type": "channel", "channel": channel}
                )
                await queue.put(message)

    async def application_exception(self, exception, application_details):
        """A consumer whose engine failed to start ends the process, with status 1."""
        if isinstance(exception, WorkerCannotStart):
            logger.error("%s; exiting", exception, exc_info=exception)
            # At once: a SystemExit would end only this task, and threads the engine began
            # loading may never end.
            os._exit(1)
        await super().application_exception(exception, application_details)


class Command(ChannelsRunworker):
    help = ChannelsRunworker.help + " The model-worker channel starts its engine immediately."
    worker_class = ModelWorker

    def handle(self, *args, **options):
        """This process is a model worker: its deployment (the engines of the models
        WORKER_MODELS names, in this process) before Channels loads the application."""
        try:
            built = deployment.build(worker=True)
        except ImproperlyConfigured as error:
            raise CommandError(f"Configuration error: {error}") from None
        runtime.install(built)
        super().handle(*args, **options)
