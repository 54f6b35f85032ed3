"""Tests of streaming/tools/."""
