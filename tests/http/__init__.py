"""Tests of streaming/http/."""
