"""Tests of streaming/wire/."""
