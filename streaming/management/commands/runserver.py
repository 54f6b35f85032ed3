"""`manage.py runserver`: daphne's, except that Ctrl-C and SIGTERM drain the server first.

Under Django's autoreloader two processes run: a watcher, which restarts the server process
when a file changes, and the server process, where daphne serves from a thread while the main
thread watches files. Django's reloader exits on SIGTERM in both, and on Ctrl-C the watcher
kills the server process a quarter of a second later: open streams are cut with no word and
their rows are lost. Here the watcher passes a signal on and waits, and the server process
drains (streaming/lifecycle.py) before it stops daphne. Without the reloader daphne runs in
the main thread and lifecycle's own handlers do it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading

from daphne.management.commands.runserver import Command as DaphneRunserver
from django.utils import autoreload

from streaming import lifecycle
from streaming.core import config

STOP_S = 10.0  # after the drain, how long daphne's thread may take to stop


class Command(DaphneRunserver):
    help = DaphneRunserver.help + " Ctrl-C and SIGTERM drain open streams first."

    def run(self, **options):
        """Serve, with the autoreloader if asked, draining on a signal."""
        if not options["use_reloader"]:
            return self.inner_run(None, **options)
        if os.environ.get(autoreload.DJANGO_AUTORELOAD_ENV) == "true":
            return self._serve_and_watch_files(**options)
        sys.exit(_watch_the_server_process())

    def inner_run(self, *args, **options):
        """daphne's, noting the thread it serves from (the server process's drain stops it)."""
        self.serving_thread = threading.current_thread()
        return super().inner_run(*args, **options)

    def _serve_and_watch_files(self, **options) -> None:
        """The server process: daphne in a thread, the file watcher here, where signals come."""
        signal.signal(signal.SIGINT, self._drain_then_stop)
        signal.signal(signal.SIGTERM, self._drain_then_stop)
        try:
            autoreload.start_django(autoreload.get_reloader(), self.inner_run, **options)
        except KeyboardInterrupt:
            pass

    def _drain_then_stop(self, signum, frame) -> None:
        # Blocks this thread (the file watcher) while daphne's thread drains and stops.
        for again in lifecycle.SIGNALS:
            signal.signal(again, signal.SIG_IGN)  # a repeat of the same Ctrl-C, passed on
        loop = lifecycle.serving_loop()
        if loop is not None and not loop.is_closed():
            drained = asyncio.run_coroutine_threadsafe(lifecycle.drain(), loop)
            try:
                drained.result(config.current().connections.shutdown_grace_s + STOP_S)
            except Exception as error:  # a drain that failed or hung: stop all the same
                self.stderr.write(f"draining failed: {error!r}")
        from twisted.internet import reactor

        reactor.callFromThread(reactor.stop)
        thread = getattr(self, "serving_thread", None)
        if thread is not None:
            thread.join(STOP_S)
        raise KeyboardInterrupt  # ends the file watcher, and with it this process


def _watch_the_server_process() -> int:
    """The watcher: run the server process until it exits other than to be restarted (3).

    Django's own (`autoreload.restart_with_reloader`) kills it on Ctrl-C; here a signal is
    passed on to it and the watcher waits for its drain (Ctrl-C at a terminal reaches both:
    the server process ignores signals once it drains).
    """
    server: subprocess.Popen | None = None

    def pass_on(signum, frame) -> None:
        if server is not None and server.poll() is None:
            server.send_signal(signum)

    for signum in lifecycle.SIGNALS:
        signal.signal(signum, pass_on)
    environment = {**os.environ, autoreload.DJANGO_AUTORELOAD_ENV: "true"}
    while True:
        server = subprocess.Popen(
            autoreload.get_child_arguments(), env=environment, close_fds=False
        )
        code = server.wait()
        if code != 3:
            return code
