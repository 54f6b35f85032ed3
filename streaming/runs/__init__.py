"""Runs: an answer that calls tools (MCP servers) where it is made (docs/tools.md)."""
