"""Tests of streaming/ops/."""
