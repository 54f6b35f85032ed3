from django.apps import AppConfig


class StreamingConfig(AppConfig):
    name = "streaming"
    verbose_name = "Streaming"

    def ready(self) -> None:
        """Register the system checks; no thread per request for Django's idle receivers."""
        from . import checks  # noqa: F401
        from .request_thread import skip_idle_request_started_receivers

        skip_idle_request_started_receivers()
