"""chatsite's settings without middleware: only for `python -m bench --diagnose`.

Measures what Django's middleware stack costs a streaming request (each sync-style middleware
is a hop to a worker thread under ASGI); not a configuration to serve with.
"""

from chatsite.settings import *  # noqa: F403

MIDDLEWARE: list[str] = []
# The admin's system checks insist on its middleware; the diagnosis never opens the admin.
SILENCED_SYSTEM_CHECKS = ["admin.E408", "admin.E409", "admin.E410"]
