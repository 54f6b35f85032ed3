from django.apps import AppConfig


class StreamingConfig(AppConfig):
    name = "streaming"
    verbose_name = "Streaming"

    def ready(self) -> None:
        """System checks; metrics and the log writer observing generations; no thread per
        request for Django's idle receivers."""
        from . import checks, metrics, recording  # noqa: F401 - checks register themselves
        from .registry import generation_finished, generation_started
        from .request_thread import skip_idle_request_started_receivers

        generation_started.connect(metrics.on_started, dispatch_uid="metrics")
        generation_finished.connect(metrics.on_finished, dispatch_uid="metrics")
        generation_finished.connect(recording.on_finished, dispatch_uid="log")
        skip_idle_request_started_receivers()
