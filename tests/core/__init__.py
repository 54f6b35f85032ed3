"""Tests of streaming/core/."""
