"""Tests of streaming/programs/."""
