"""`manage.py runworker model-worker`: Channels' command with a worker that starts at once."""

from __future__ import annotations

from channels.management.commands.runworker import Command as ChannelsRunworker

from streaming.fleet.worker import ModelWorker


class Command(ChannelsRunworker):
    help = ChannelsRunworker.help + " The model-worker channel starts its engine immediately."
    worker_class = ModelWorker
