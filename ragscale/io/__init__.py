"""Readers, writers and resume state."""
