"""ASGI entry point: `uvicorn chatsite.asgi:application` or `daphne chatsite.asgi:application`."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
django_asgi_app = get_asgi_application()  # sets Django up before anything imports models

from channels.routing import ChannelNameRouter, ProtocolTypeRouter  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from streaming.asgi import BodySizeLimit, Lifespan, SendTimeout  # noqa: E402
from streaming.worker import WORKER_CHANNEL, ModelWorkerConsumer  # noqa: E402

application = ProtocolTypeRouter(
    {
        # Static files are served here, in front of the middleware: WhiteNoise's middleware is
        # sync-only and would put a thread hop in front of every stream. The same handler works
        # with DEBUG off, so the page is the same under uvicorn, daphne and runserver.
        # SendTimeout: a client that stopped reading counts as gone (docs/security.md).
        "http": SendTimeout(BodySizeLimit(ASGIStaticFilesHandler(django_asgi_app))),
        "lifespan": Lifespan(),
        # `manage.py runworker model-worker`: generations handed over by web processes.
        "channel": ChannelNameRouter({WORKER_CHANNEL: ModelWorkerConsumer.as_asgi()}),
    }
)
