"""Helpers the tests share (fixtures live in the conftest files)."""
