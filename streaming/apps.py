from django.apps import AppConfig
from django.core.signals import setting_changed


class StreamingConfig(AppConfig):
    name = "streaming"
    verbose_name = "Streaming"

    def ready(self) -> None:
        """How a process's deployment is built; settings read again when one changes; system
        checks; metrics and the log writer observing generations; no thread per request for
        Django's idle receivers."""
        from streaming import deployment
        from streaming.conversations import answers
        from streaming.core import config, runtime
        from streaming.generations.registry import generation_finished, generation_started
        from streaming.http import (
            audit,
            checks,  # noqa: F401 - the checks register themselves
        )
        from streaming.http.request_thread import skip_idle_request_started_receivers
        from streaming.ops import log_writer, metrics

        runtime.built_by(deployment.build)  # a process's parts, where nothing installed them
        setting_changed.connect(config.reset, dispatch_uid="config")  # tests override settings
        generation_started.connect(metrics.on_started, dispatch_uid="metrics")
        generation_started.connect(answers.on_started, dispatch_uid="conversations")
        generation_finished.connect(metrics.on_finished, dispatch_uid="metrics")
        generation_finished.connect(log_writer.on_finished, dispatch_uid="log")
        generation_finished.connect(answers.on_finished, dispatch_uid="conversations")
        audit.connect()  # sign-ins, their failures and sign-outs, into the audit log
        skip_idle_request_started_receivers()
