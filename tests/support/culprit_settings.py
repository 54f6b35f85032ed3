"""The project's settings plus the culprit endpoints (culprits.py): the article's culprits, on
purpose."""

from chatsite.settings import *  # noqa: F403

ROOT_URLCONF = "tests.support.culprits"
