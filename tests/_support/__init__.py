"""Helpers the test modules share (a test module never imports another: tests/test_test_imports.py)."""
