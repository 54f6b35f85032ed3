"""The project's settings plus tests.culprits' endpoints: the article's culprits, on purpose."""

from chatsite.settings import *  # noqa: F403

ROOT_URLCONF = "tests.culprits"
