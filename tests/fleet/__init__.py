"""Tests of streaming/fleet/."""
