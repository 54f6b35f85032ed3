"""Tests of streaming/engines/."""
