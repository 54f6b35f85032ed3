"""Tests of streaming/generations/."""
