"""ASGI entry point: `uvicorn chatsite.asgi:application` or `daphne chatsite.asgi:application`."""

import os
import sys
import threading

from django.core.asgi import get_asgi_application
from django.core.exceptions import ImproperlyConfigured

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
try:
    django_asgi_app = get_asgi_application()  # sets Django up before anything imports models
    from streaming.core import runtime
    from streaming.engines.startup import check_configuration

    # This process's deployment, built now (`runworker model-worker` built a worker's already),
    # and what only its engines can judge of the configuration.
    runtime.current()
    check_configuration()
except ImproperlyConfigured as error:
    # Here, not in lifespan: every server (uvicorn in any lifespan mode, daphne, runserver)
    # stops before its port serves anything, with the variable's name and no traceback.
    print(f"Configuration error: {error}", file=sys.stderr, flush=True)
    if threading.current_thread() is not threading.main_thread():
        os._exit(1)  # runserver's autoreloader imports this in a thread SystemExit would only end
    raise SystemExit(1) from None

from channels.routing import ChannelNameRouter, ProtocolTypeRouter
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

from streaming.asgi import BodyLimits, Lifespan, SendTimeout, ServeOnFirstRequest
from streaming.fleet.model_workers import model_workers
from streaming.fleet.protocol import WORKER_CHANNEL

application = ProtocolTypeRouter(
    {
        # Static files are served here, in front of the middleware: WhiteNoise's middleware is
        # sync-only and would put a thread hop in front of every stream. The same handler works
        # with DEBUG off, so the page is the same under uvicorn, daphne and runserver.
        # SendTimeout: a client that stopped reading counts as gone; BodyLimits: a body too
        # large or too slow to arrive is refused (docs/security.md).
        "http": ServeOnFirstRequest(
            SendTimeout(BodyLimits(ASGIStaticFilesHandler(django_asgi_app)))
        ),
        "lifespan": Lifespan(),
        # `manage.py runworker model-worker`: generations handed over by web processes, for
        # each model WORKER_MODELS names.
        "channel": ChannelNameRouter({WORKER_CHANNEL: model_workers}),
    }
)
