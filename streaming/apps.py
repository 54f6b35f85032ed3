from django.apps import AppConfig


class StreamingConfig(AppConfig):
    name = "streaming"
    verbose_name = "Streaming"

    def ready(self) -> None:
        """Register the system checks."""
        from . import checks  # noqa: F401
